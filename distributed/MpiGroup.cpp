// The data-parallel group over MPI (see DataParallel.h): every MPI call kiln makes. Every
// collective is nonblocking and waited for by waitAll, which gives up at a deadline and aborts
// the job with one line saying what this rank waited for.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <algorithm>
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
  using Clock = std::chrono::steady_clock;
  // The gradient exchange (DataParallel.h), planned once: buckets, their buffers, and where each
  // gradient lies in them.
  std::vector<GradientBucket> buckets;
  std::vector<std::vector<char>> bucketBuffers;
  std::vector<size_t> bucketOf, offsetOf; // per gradient
  std::vector<int64_t> gradientBytes;     // per gradient
  // The exchange of the current update.
  std::vector<size_t> missing;       // per bucket: its gradients not packed yet
  std::vector<char> packed;          // per gradient
  std::vector<MPI_Request> requests; // per bucket
  size_t started = 0;                // buckets started (always a prefix, in plan order)
  bool allDone = false;              // every bucket seen complete
  Clock::time_point firstStart, lastDone;
  double mpiSeconds = 0;
  AllreduceStats last, total;

  void plan(const std::vector<int64_t> &bytes, const std::vector<int> &dtypeBytes, const std::vector<size_t> &order,
            const DataParallelOptions &options) {
    buckets = planBuckets(bytes, dtypeBytes, order, options.firstBucketBytes, options.bucketBytes);
    gradientBytes = bytes;
    bucketOf.assign(bytes.size(), 0);
    offsetOf.assign(bytes.size(), 0);
    bucketBuffers.clear();
    for (size_t b = 0; b < buckets.size(); ++b) {
      if (buckets[b].bytes / buckets[b].dtypeBytes > INT32_MAX)
        fail("data parallel: a gradient bucket of {} elements exceeds what one MPI call takes",
             buckets[b].bytes / buckets[b].dtypeBytes);
      bucketBuffers.emplace_back(static_cast<size_t>(buckets[b].bytes));
      size_t offset = 0;
      for (size_t g : buckets[b].gradients) {
        bucketOf[g] = b;
        offsetOf[g] = offset;
        offset += static_cast<size_t>(bytes[g]);
      }
    }
    resetUpdate();
  }
  void resetUpdate() {
    missing.clear();
    for (const GradientBucket &bucket : buckets)
      missing.push_back(bucket.gradients.size());
    packed.assign(bucketOf.size(), 0);
    requests.assign(buckets.size(), MPI_REQUEST_NULL);
    started = 0;
    allDone = buckets.empty();
    mpiSeconds = 0;
  }
  void pack(size_t g, const Tensor &gradient) {
    if (g >= packed.size() || gradient.byteSize() != static_cast<size_t>(gradientBytes[g]))
      fail("data parallel: gradient {} ({} bytes) is not one of the {} planned", g, gradient.byteSize(),
           packed.size());
    if (packed[g])
      fail("data parallel: gradient {} was ready twice in one update", g);
    packed[g] = 1;
    std::memcpy(bucketBuffers[bucketOf[g]].data() + offsetOf[g], gradient.data(), gradient.byteSize());
    --missing[bucketOf[g]];
  }
  /// Starts, in plan order, the buckets whose gradients are all packed.
  void startComplete() {
    while (started < buckets.size() && missing[started] == 0) {
      const GradientBucket &bucket = buckets[started];
      if (started == 0)
        firstStart = Clock::now();
      MPI_Iallreduce(MPI_IN_PLACE, bucketBuffers[started].data(), static_cast<int>(bucket.bytes / bucket.dtypeBytes),
                     bucket.dtypeBytes == 4 ? MPI_FLOAT : MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &requests[started]);
      ++started;
    }
  }
  /// Tests the buckets started; notes when all are done.
  void test() {
    if (started == 0 || allDone)
      return;
    int done = 0;
    MPI_Testall(static_cast<int>(started), requests.data(), &done, MPI_STATUSES_IGNORE);
    if (done && started == buckets.size()) {
      allDone = true;
      lastDone = Clock::now();
    }
  }

  /// Waits for `requests`, testing them (MPI progresses only inside MPI calls) and yielding the
  /// core in between; past the deadline, prints why and aborts the job.
  void waitAll(std::vector<MPI_Request> &requests, const std::string &what) const {
    const auto begun = Clock::now();
    auto deadline = begun + std::chrono::duration<double>(timeoutSeconds);
    for (;;) {
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
      // Each test moves the collective on by a step or two (Open MPI has no progress thread),
      // so the first 100 ms only yield between tests. Sleeping 100 us after the first 1000
      // polls instead held the seed MLP's 2.6 MB allreduce in flight 2.2 ms an update (now
      // 1.45) on a quiet machine, and 216 ms (now 110) while a build ran beside it. A wait
      // longer than that is another rank still computing: sleep, leaving it the core.
      if (Clock::now() - begun < std::chrono::milliseconds(100))
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

void DataParallelGroup::planGradients(const runtime::TrainingStep &step) {
  std::vector<int64_t> bytes;
  std::vector<int> dtypeBytes;
  for (const std::string &name : step.trainedParameters()) {
    const Tensor &parameter = step.parameter(name); // a gradient has its parameter's type
    if (parameter.dtype() != DType::F32 && parameter.dtype() != DType::F64)
      fail("data parallel: the gradient of '{}' ({}) cannot be summed across ranks (f32 and f64 can)", name,
           dtypeName(parameter.dtype()));
    bytes.push_back(static_cast<int64_t>(parameter.byteSize()));
    dtypeBytes.push_back(static_cast<int>(dtypeSize(parameter.dtype())));
  }
  // Rank 0's order on every rank: the buckets, and so the collectives, must be the same
  // everywhere, whatever each rank's compiler made of the schedule.
  std::vector<size_t> localOrder = step.gradientReadyOrder();
  std::vector<int64_t> order(localOrder.begin(), localOrder.end());
  std::vector<MPI_Request> requests(1);
  MPI_Ibcast(order.data(), static_cast<int>(order.size()), MPI_INT64_T, 0, MPI_COMM_WORLD, &requests[0]);
  impl_->waitAll(requests, "rank 0's gradient order");
  impl_->plan(bytes, dtypeBytes, std::vector<size_t>(order.begin(), order.end()), options_);
}

void DataParallelGroup::gradientReady(size_t index, const Tensor &gradient) {
  auto start = Impl::Clock::now();
  impl_->pack(index, gradient);
  impl_->startComplete();
  impl_->test();
  impl_->mpiSeconds += std::chrono::duration<double>(Impl::Clock::now() - start).count();
}

void DataParallelGroup::progress() {
  if (impl_->started == 0 || impl_->allDone)
    return;
  auto start = Impl::Clock::now();
  impl_->test();
  impl_->mpiSeconds += std::chrono::duration<double>(Impl::Clock::now() - start).count();
}

void DataParallelGroup::sumGradients(std::vector<Tensor> &gradients) {
  Impl &im = *impl_;
  if (im.bucketOf.size() != gradients.size()) { // not planned for a step: reverse parameter order
    std::vector<int64_t> bytes;
    std::vector<int> dtypeBytes;
    for (const Tensor &gradient : gradients) {
      if (gradient.dtype() != DType::F32 && gradient.dtype() != DType::F64)
        fail("data parallel: gradients of {} cannot be summed across ranks (f32 and f64 can)",
             dtypeName(gradient.dtype()));
      bytes.push_back(static_cast<int64_t>(gradient.byteSize()));
      dtypeBytes.push_back(static_cast<int>(dtypeSize(gradient.dtype())));
    }
    std::vector<size_t> reversed;
    for (size_t g = gradients.size(); g-- > 0;)
      reversed.push_back(g);
    im.plan(bytes, dtypeBytes, reversed, options_);
  }
  // What the backward pass did not hand over (all of it, without the Trainer's hooks), in plan
  // order, testing the buckets in flight while the next is packed.
  auto waitStart = Impl::Clock::now();
  for (const GradientBucket &bucket : im.buckets)
    for (size_t g : bucket.gradients)
      if (!im.packed[g]) {
        im.pack(g, gradients[g]);
        im.startComplete();
        im.test();
      }
  if (!im.allDone) {
    im.waitAll(im.requests,
               fmt::format("the gradients ({} bucket{})", im.buckets.size(), im.buckets.size() == 1 ? "" : "s"));
    im.lastDone = Impl::Clock::now();
  }
  AllreduceStats &last = im.last;
  last.updates = 1;
  last.buckets = static_cast<int64_t>(im.buckets.size());
  last.bytes = 0;
  for (const GradientBucket &bucket : im.buckets)
    last.bytes += bucket.bytes;
  last.seconds = im.buckets.empty() ? 0 : std::chrono::duration<double>(im.lastDone - im.firstStart).count();
  last.exposedSeconds =
      std::min(last.seconds, std::max(0.0, std::chrono::duration<double>(im.lastDone - waitStart).count()));
  last.mpiSeconds = im.mpiSeconds;
  im.total.updates += 1;
  im.total.buckets = last.buckets;
  im.total.bytes = last.bytes;
  im.total.seconds += last.seconds;
  im.total.exposedSeconds += last.exposedSeconds;
  im.total.mpiSeconds += last.mpiSeconds;
  for (size_t b = 0; b < im.buckets.size(); ++b) {
    const char *buffer = im.bucketBuffers[b].data();
    for (size_t g : im.buckets[b].gradients)
      std::memcpy(gradients[g].data(), buffer + im.offsetOf[g], gradients[g].byteSize());
  }
  im.resetUpdate();
}

const AllreduceStats &DataParallelGroup::lastAllreduce() const { return impl_->last; }
const AllreduceStats &DataParallelGroup::allreduceStats() const { return impl_->total; }

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
      fail("data parallel: the parameters of rank {} (checksum {:016x}) differ from rank 0's ({:016x}) after "
           "update {}",
           r, all[r], all[0], step.stepCount());
  ++identicalChecks_;
  return mine;
}

} // namespace kiln::distributed
