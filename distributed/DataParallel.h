#pragma once
// distributed::DataParallelGroup: the processes that mpirun started, training one model data
// parallel (runtime/Trainer.h, "Data parallel"). Every MPI call kiln makes is behind this
// header, in distributed/MpiGroup.cpp; a kiln built without MPI (KILN_MPI off) links
// distributed/WithoutMpi.cpp instead, whose group cannot be made.
//
// What the group does for a Trainer (attach): rank 0's parameters, optimizer state, step count
// and learning rate are copied to every rank first (broadcastFromRank0); after each update's
// gradients are computed, they are summed over the ranks (each rank weighted its own by its
// share of the update, so the sum is the update's mean) and BatchNorm's running statistics
// (the step's buffers) are replaced by rank 0's, as PyTorch's DistributedDataParallel does with
// its default broadcast_buffers; the batch statistics stay each rank's own. Every rank then
// applies the same update, so the parameters stay bitwise identical (checkIdentical proves it).
//
// Gradients travel in buckets (GradientBuckets.h) that overlap the backward pass: planned
// (planGradients) over the trained parameters in the order the step's backward pass finalises
// their gradients (TrainingStep::gradientReadyOrder, rank 0's on every rank), a first bucket
// of about 1 MiB, then up to 25 MiB. While the backward pass runs, each gradient is copied
// into its bucket's buffer as soon as the kernel that last touches it has run (gradientReady,
// from the Trainer's onGradientReady hook), and a bucket whose gradients are all there is
// summed with a nonblocking MPI_Iallreduce at once; buckets start strictly in plan order, so
// every rank issues the same collectives in the same order. MPI progresses only inside MPI
// calls (Open MPI has no progress thread, and the kernels' threads use every core), so
// progress() tests the transfers in flight between every two kernels (the Trainer's
// betweenKernels hook). After the pass, sumGradients starts what is left, waits for the rest
// and copies the sums back. Every bucket is summed elementwise by the same MPI call whenever it
// starts, so overlap changes no result. allreduceStats() says, per update, how long the
// transfers were in flight and how much of that the backward pass covered.
//
// Faults: every wait for another rank is a loop of MPI_Test against a deadline (timeoutSeconds
// after the wait began). A rank that passes it prints one line saying what it waited for and
// calls MPI_Abort, which ends the whole job: a rank that hangs costs at most the timeout. A
// rank that dies is noticed by mpirun, which ends the job (Open MPI's default). A kiln::Error
// on one rank ends that process without MPI_Finalize, which mpirun also treats as a failure
// of the job.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/Tensor.h"
#include "runtime/Trainer.h"
#include "runtime/TrainingStep.h"

namespace kiln::distributed {

/// Whether this kiln was built with MPI.
bool mpiAvailable();

struct DataParallelOptions {
  /// How long a rank waits for the others at any one point before it aborts the job.
  double timeoutSeconds = 300;
  /// Gradient buckets: the first (reverse order, so the last layers') and the others' sizes.
  int64_t firstBucketBytes = int64_t(1) << 20;
  int64_t bucketBytes = int64_t(25) << 20;
  /// Compare the parameters' checksums across the ranks after every update (checkIdentical;
  /// kiln-run --check-identical): a debugging aid and what the tests run with.
  bool checkEveryUpdate = false;
};

/// The gradient allreduce as this rank saw it: of the last update, or summed over the updates.
/// Completion is seen when MPI is tested (between kernels), so times are rounded up to that.
struct AllreduceStats {
  int64_t updates = 0;
  int64_t buckets = 0, bytes = 0; // of one update
  /// From the first bucket's start to the last one's completion.
  double seconds = 0;
  /// Of `seconds`, the wait after the backward pass had finished (not overlapped).
  double exposedSeconds = 0;
  /// Inside MPI calls while the backward pass ran (starting buckets, testing them): the cost of
  /// overlapping, taken from the computation on this core.
  double mpiSeconds = 0;
  double overlappedSeconds() const { return seconds > exposedSeconds ? seconds - exposedSeconds : 0; }
  double overlappedFraction() const { return seconds > 0 ? overlappedSeconds() / seconds : 0; }
};

class DataParallelGroup {
public:
  /// Initializes MPI (thread level FUNNELED: only this thread calls MPI; the kernels' thread
  /// pool never does). kiln::Error, saying data parallel training is unavailable, in a kiln
  /// built without MPI; kiln::Error for a timeout that is not a positive number of seconds.
  explicit DataParallelGroup(DataParallelOptions options = {});
  /// Finalizes MPI, except while an exception unwinds: a rank that fails must not wait in
  /// MPI_Finalize for ranks that wait for it.
  ~DataParallelGroup();
  DataParallelGroup(const DataParallelGroup &) = delete;
  DataParallelGroup &operator=(const DataParallelGroup &) = delete;

  int rank() const;
  int size() const;

  /// Makes every rank's parameters, optimizer state, step count and learning rate rank 0's.
  /// The steps must have the same parameters (by name, type) on every rank.
  void broadcastFromRank0(runtime::TrainingStep &step);
  /// Plans the buckets for `step`'s gradients in the order its backward pass finalises them
  /// (rank 0's order on every rank). Without it, the first sumGradients plans them in reverse
  /// parameter order. kiln::Error for gradients that are neither f32 nor f64.
  void planGradients(const runtime::TrainingStep &step);
  /// During the backward pass: gradient `index` (of the step's trained parameters) is final.
  /// Copies it into its bucket and starts, in plan order, every bucket now complete.
  void gradientReady(size_t index, const Tensor &gradient);
  /// Between kernels: tests the buckets in flight, so that MPI moves them on.
  void progress();
  /// Sums `gradients` over the ranks in place, in buckets (above): starts the buckets that
  /// gradientReady did not, waits for all and copies the sums back. f32 and f64 gradients.
  void sumGradients(std::vector<Tensor> &gradients);
  /// The last update's allreduce, and every update's so far.
  const AllreduceStats &lastAllreduce() const;
  const AllreduceStats &allreduceStats() const;
  /// How many times checkIdentical has passed (the per-update checks, with checkEveryUpdate).
  int64_t identicalChecks() const { return identicalChecks_; }
  /// Sums `values` over the ranks in place.
  void sum(std::vector<double> &values);
  /// Replaces the step's buffers (updates owned by themselves: BatchNorm's running statistics)
  /// by rank 0's.
  void broadcastBuffers(runtime::TrainingStep &step);
  /// A checksum (FNV-1a) of every parameter, state and the step count, the same on every rank;
  /// kiln::Error on every rank when some rank's differs.
  uint64_t checkIdentical(const runtime::TrainingStep &step);

  /// Sets the Trainer's ranks and rank, plans the buckets (planGradients), and hooks that sum
  /// the gradients as they become final (onGradientReady, betweenKernels, onGradients), broadcast
  /// the buffers, sum the losses over the ranks, and, with checkEveryUpdate, check the
  /// parameters after every update (before the caller's onProgress). onGradients,
  /// onGradientReady and betweenKernels must be unset.
  void attach(runtime::TrainingStep &step, runtime::TrainerOptions &options, runtime::TrainerHooks &hooks);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DataParallelOptions options_;
  int64_t updates_ = 0;     // seen by the gradient hooks (for the fault-injection test hook)
  bool updateBegun_ = false; // a gradient of the current update was ready
  bool skewUpdate_ = false;  // injectFault said "skew" for the current update
  int64_t identicalChecks_ = 0;
};

/// The FNV-1a checksum of the step's parameters and states (by name) and its step count.
uint64_t parameterChecksum(const runtime::TrainingStep &step);

/// Test hook: KILN_DATA_PARALLEL_FAULT="exit:R:U" makes rank R exit (status 3, without
/// MPI_Finalize) at the gradients of update U of the run; "hang:R:U" makes it sleep there for
/// good; "skew:R:U" returns true there, and the caller changes that rank's summed gradients by
/// one ulp (so that its parameters differ, for checkIdentical to find). Does nothing, and
/// returns false, when the variable is unset or names another rank or update.
bool injectFault(int rank, int64_t update);

} // namespace kiln::distributed
