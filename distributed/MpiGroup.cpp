// The data-parallel group over MPI (see DataParallel.h): every MPI call kiln makes. Every
// collective is nonblocking and waited for by waitAll, which gives up at a deadline and aborts
// the job with one line saying what this rank waited for.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "core/Error.h"
#include "distributed/DataParallel.h"
#include "distributed/GradientBuckets.h"

namespace kiln::distributed {

bool mpiAvailable() { return true; }

struct DataParallelGroup::Impl {
  int rank = 0, size = 1;
  bool initializedHere = false;
  double timeoutSeconds = 300;
  std::vector<GradientBucket> buckets; // planned at the first sumGradients
  std::vector<std::vector<char>> bucketBuffers;

  /// Waits for `requests`, testing them (MPI progresses only inside MPI calls) and yielding the
  /// core in between; past the deadline, prints why and aborts the job.
  void waitAll(std::vector<MPI_Request> &requests, const std::string &what) const {
    using Clock = std::chrono::steady_clock;
    auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSeconds);
    for (int polls = 0;; ++polls) {
      int done = 0;
      MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
      if (done)
        return;
      if (Clock::now() > deadline) {
        std::fprintf(stderr,
                     "kiln data-parallel: rank %d of %d waited %g s for %s; another rank died or hangs "
                     "(--mpi-timeout); aborting the job\n",
                     rank, size, timeoutSeconds, what.c_str());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      // Spin briefly (a collective between ranks on one host completes in microseconds), then
      // let the other ranks, which may share this core, run.
      if (polls < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
};

DataParallelGroup::DataParallelGroup(DataParallelOptions options) : impl_(std::make_unique<Impl>()), options_(options) {
  if (!(options_.timeoutSeconds > 0))
    fail("data parallel: the timeout must be a positive number of seconds, got {}", options_.timeoutSeconds);
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    impl_->initializedHere = true;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &impl_->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl_->size);
  impl_->timeoutSeconds = options_.timeoutSeconds;
}

DataParallelGroup::~DataParallelGroup() {
  if (impl_->initializedHere && std::uncaught_exceptions() == 0)
    MPI_Finalize();
}

int DataParallelGroup::rank() const { return impl_->rank; }
int DataParallelGroup::size() const { return impl_->size; }

void DataParallelGroup::broadcastFromRank0(runtime::TrainingStep &step) {
  std::vector<MPI_Request> requests;
  // Sizes first: a rank whose step differs must fail, not receive into a buffer of another size.
  std::vector<int64_t> shape;
  for (const auto &[name, tensor] : step.parameters())
    shape.push_back(tensor.byteSize());
  std::vector<int64_t> rank0Shape = shape;
  requests.emplace_back();
  MPI_Ibcast(rank0Shape.data(), static_cast<int>(rank0Shape.size()), MPI_INT64_T, 0, MPI_COMM_WORLD, &requests.back());
  impl_->waitAll(requests, "rank 0's parameter sizes");
  if (rank0Shape != shape)
    fail("data parallel: rank {}'s step has other parameters than rank 0's (every rank must compile the same model)",
         rank());
  requests.clear();
  for (const auto &[name, tensor] : step.parameters()) {
    // Large tensors in pieces below 2^31 bytes (MPI counts are int).
    auto *bytes = static_cast<char *>(const_cast<void *>(static_cast<const void *>(tensor.data())));
    const auto tensorBytes = static_cast<int64_t>(tensor.byteSize());
    for (int64_t offset = 0; offset < tensorBytes; offset += int64_t(1) << 30) {
      int count = static_cast<int>(std::min<int64_t>(int64_t(1) << 30, tensorBytes - offset));
      requests.emplace_back();
      MPI_Ibcast(bytes + offset, count, MPI_BYTE, 0, MPI_COMM_WORLD, &requests.back());
    }
  }
  double counters[2] = {static_cast<double>(step.stepCount()), step.learningRate()};
  requests.emplace_back();
  MPI_Ibcast(counters, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD, &requests.back());
  impl_->waitAll(requests, "rank 0's initial parameters");
  step.setStepCount(static_cast<int64_t>(counters[0]));
  step.setLearningRate(counters[1]);
}

void DataParallelGroup::sumGradients(std::vector<Tensor> &gradients) {
  if (impl_->buckets.empty() && !gradients.empty()) {
    std::vector<int64_t> bytes;
    std::vector<int> dtypeBytes;
    for (const Tensor &gradient : gradients) {
      if (gradient.dtype() != DType::F32 && gradient.dtype() != DType::F64)
        fail("data parallel: gradients of {} cannot be summed across ranks (f32 and f64 can)",
             dtypeName(gradient.dtype()));
      bytes.push_back(gradient.byteSize());
      dtypeBytes.push_back(static_cast<int>(dtypeSize(gradient.dtype())));
    }
    impl_->buckets = planBuckets(bytes, dtypeBytes, options_.firstBucketBytes, options_.bucketBytes);
    for (const GradientBucket &bucket : impl_->buckets)
      impl_->bucketBuffers.emplace_back(static_cast<size_t>(bucket.bytes));
  }
  std::vector<MPI_Request> requests(impl_->buckets.size(), MPI_REQUEST_NULL);
  for (size_t b = 0; b < impl_->buckets.size(); ++b) {
    const GradientBucket &bucket = impl_->buckets[b];
    char *buffer = impl_->bucketBuffers[b].data();
    int64_t offset = 0;
    for (size_t g : bucket.gradients) {
      std::memcpy(buffer + offset, gradients[g].data(), gradients[g].byteSize());
      offset += gradients[g].byteSize();
    }
    int64_t count = bucket.bytes / bucket.dtypeBytes;
    if (count > INT32_MAX)
      fail("data parallel: a gradient bucket of {} elements exceeds what one MPI call takes", count);
    MPI_Iallreduce(MPI_IN_PLACE, buffer, static_cast<int>(count), bucket.dtypeBytes == 4 ? MPI_FLOAT : MPI_DOUBLE,
                   MPI_SUM, MPI_COMM_WORLD, &requests[b]);
    int flag = 0; // progress the buckets in flight while the next one is packed
    MPI_Testall(static_cast<int>(b + 1), requests.data(), &flag, MPI_STATUSES_IGNORE);
  }
  impl_->waitAll(requests, fmt::format("the gradients ({} bucket{})", impl_->buckets.size(), impl_->buckets.size() == 1 ? "" : "s"));
  for (size_t b = 0; b < impl_->buckets.size(); ++b) {
    const char *buffer = impl_->bucketBuffers[b].data();
    int64_t offset = 0;
    for (size_t g : impl_->buckets[b].gradients) {
      std::memcpy(gradients[g].data(), buffer + offset, gradients[g].byteSize());
      offset += gradients[g].byteSize();
    }
  }
}

void DataParallelGroup::sum(std::vector<double> &values) {
  std::vector<MPI_Request> requests(1);
  MPI_Iallreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                 &requests[0]);
  impl_->waitAll(requests, "the sum of the losses");
}

void DataParallelGroup::broadcastBuffers(runtime::TrainingStep &step) {
  std::vector<MPI_Request> requests;
  for (const runtime::TrainingManifestUpdate &update : step.manifest().updates) {
    if (!update.isState || update.param != update.name)
      continue;
    const Tensor &buffer = step.parameter(update.name);
    requests.emplace_back();
    MPI_Ibcast(const_cast<void *>(static_cast<const void *>(buffer.data())), static_cast<int>(buffer.byteSize()),
               MPI_BYTE, 0, MPI_COMM_WORLD, &requests.back());
  }
  if (!requests.empty())
    impl_->waitAll(requests, "rank 0's BatchNorm running statistics");
}

uint64_t DataParallelGroup::checkIdentical(const runtime::TrainingStep &step) {
  uint64_t mine = parameterChecksum(step);
  std::vector<uint64_t> all(static_cast<size_t>(size()));
  std::vector<MPI_Request> requests(1);
  MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD, &requests[0]);
  impl_->waitAll(requests, "the parameter checksums");
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != all[0])
      fail("data parallel: the parameters of rank {} (checksum {:016x}) differ from rank 0's ({:016x})", r, all[r],
           all[0]);
  return mine;
}

} // namespace kiln::distributed
