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
// Gradients travel in buckets (GradientBuckets.h): the trained parameters in reverse order (the
// order backward produces them), a first bucket of about 1 MiB, then up to 25 MiB, each copied
// into one buffer and summed with a nonblocking MPI_Iallreduce as soon as it is packed, so that
// packing the next bucket (and unpacking the previous) overlaps the transfers in flight. The
// split step exposes its gradients only when the whole backward pass is done: the transfers
// do not overlap the backward pass itself.
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
  /// Sums `gradients` over the ranks in place, in buckets (above). f32 and f64 gradients.
  void sumGradients(std::vector<Tensor> &gradients);
  /// Sums `values` over the ranks in place.
  void sum(std::vector<double> &values);
  /// Replaces the step's buffers (updates owned by themselves: BatchNorm's running statistics)
  /// by rank 0's.
  void broadcastBuffers(runtime::TrainingStep &step);
  /// A checksum (FNV-1a) of every parameter, state and the step count, the same on every rank;
  /// kiln::Error on every rank when some rank's differs.
  uint64_t checkIdentical(const runtime::TrainingStep &step);

  /// Sets the Trainer's ranks and rank, and hooks that sum the gradients (and broadcast the
  /// buffers) and the losses over the ranks. onGradients must be unset.
  void attach(runtime::TrainingStep &step, runtime::TrainerOptions &options, runtime::TrainerHooks &hooks);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DataParallelOptions options_;
  int64_t updates_ = 0; // seen by the gradient hook (for the fault-injection test hook)
};

/// The FNV-1a checksum of the step's parameters and states (by name) and its step count.
uint64_t parameterChecksum(const runtime::TrainingStep &step);

/// Test hook: KILN_DATA_PARALLEL_FAULT="exit:R:U" makes rank R exit (status 3, without
/// MPI_Finalize) at the gradients of update U of the run; "hang:R:U" makes it sleep there for
/// good. Does nothing when the variable is unset or names another rank or update.
void injectFault(int rank, int64_t update);

} // namespace kiln::distributed
