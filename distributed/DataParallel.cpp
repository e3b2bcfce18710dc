// The MPI-free parts of the data-parallel group (DataParallel.h): the checksum, the Trainer's
// hooks, the fault-injection test hook.
#include "distributed/DataParallel.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/Error.h"

namespace kiln::distributed {

uint64_t parameterChecksum(const runtime::TrainingStep &step) {
  uint64_t hash = 1469598103934665603ull;
  auto mix = [&hash](const void *data, size_t size) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < size; ++i)
      hash = (hash ^ bytes[i]) * 1099511628211ull;
  };
  for (const auto &[name, tensor] : step.parameters()) {
    mix(name.data(), name.size());
    mix(tensor.data(), tensor.byteSize());
  }
  int64_t steps = step.stepCount();
  mix(&steps, sizeof steps);
  return hash;
}

bool injectFault(int rank, int64_t update) {
  const char *spec = std::getenv("KILN_DATA_PARALLEL_FAULT");
  if (spec == nullptr)
    return false;
  char kind[8] = {};
  int faultRank = -1;
  long long faultUpdate = -1;
  if (std::sscanf(spec, "%7[a-z]:%d:%lld", kind, &faultRank, &faultUpdate) != 3 || faultRank != rank ||
      faultUpdate != update)
    return false;
  // One write, so that mpirun's forwarding cannot split the line among the other ranks' output.
  std::fprintf(stderr, "kiln data-parallel: rank %d %s at update %lld (KILN_DATA_PARALLEL_FAULT)\n", rank,
               std::strcmp(kind, "hang") == 0   ? "hangs"
               : std::strcmp(kind, "skew") == 0 ? "skews its summed gradients"
                                                : "exits",
               static_cast<long long>(update));
  if (std::strcmp(kind, "skew") == 0)
    return true;
  if (std::strcmp(kind, "hang") == 0)
    for (;;)
      std::this_thread::sleep_for(std::chrono::seconds(1));
  _exit(3);
}

void DataParallelGroup::attach(runtime::TrainingStep &step, runtime::TrainerOptions &options,
                               runtime::TrainerHooks &hooks) {
  if (hooks.onGradients || hooks.onGradientReady || hooks.betweenKernels)
    fail("data parallel: the Trainer's gradient hooks are taken already");
  options.ranks = size();
  options.rank = rank();
  planGradients(step);
  // The fault hook fires at the first sign of an update: a rank that hangs there has started
  // none of its buckets, so the others wait for the gradients.
  auto beginUpdate = [this] {
    if (!updateBegun_)
      skewUpdate_ = injectFault(rank(), ++updates_);
    updateBegun_ = true;
  };
  hooks.onGradientReady = [this, beginUpdate](size_t index, Tensor &gradient) {
    beginUpdate();
    gradientReady(index, gradient);
  };
  hooks.betweenKernels = [this] { progress(); };
  hooks.onGradients = [this, beginUpdate, &step](std::vector<Tensor> &gradients) {
    beginUpdate();
    updateBegun_ = false;
    sumGradients(gradients);
    if (skewUpdate_ && !gradients.empty() && gradients[0].dtype() == DType::F32 && gradients[0].numElements() > 0) {
      auto *first = static_cast<float *>(gradients[0].data());
      *first = std::nextafter(*first, INFINITY);
    }
    broadcastBuffers(step);
  };
  hooks.sumOverRanks = [this](std::vector<double> &values) { sum(values); };
  if (options_.checkEveryUpdate) {
    auto shown = std::move(hooks.onProgress);
    hooks.onProgress = [this, &step, shown](const runtime::TrainerProgress &progress) {
      checkIdentical(step);
      if (shown)
        shown(progress);
    };
  }
}

} // namespace kiln::distributed
