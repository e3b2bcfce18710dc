// ResNet-18 (frontend/models/ResNet.h, 10 classes, 3x64x64 images, BatchNorm on each batch's
// statistics) trained through runtime::Trainer against PyTorch, on what
// tests/distributed/resnet18/torch_resnet18_ddp.py wrote: torchvision's initial weights, 40 samples, and
// the losses of 5 updates of 8 samples with cross-entropy and SGD(lr 0.002, momentum 0.9).
//
//   --data-parallel (under mpirun -np 2): a split step on 4 samples a rank, in a
//     distributed::DataParallelGroup (gradient buckets overlapping the backward pass, local
//     BatchNorm statistics, rank 0's running statistics), the ranks' parameters compared after
//     every update: the losses must be PyTorch DistributedDataParallel's over gloo within
//     rtol 1e-4, and some of the allreduce must have overlapped the backward pass.
//   --frozen: one process, every parameter but fc's frozen: the compiled step's kernel list must
//     hold no backward kernel of a convolution, pooling or BatchNorm (the frozen layers' backward
//     is pruned, not computed and dropped), where the step that trains everything holds them;
//     the losses must be PyTorch's with requires_grad=False within rtol 1e-4.
//
// usage: kiln_resnet18_data_parallel_check DIR --data-parallel|--frozen
// Prints one line per update ("update I loss L torch T rel E") and exits 1 on any mismatch.
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "distributed/DataParallel.h"
#include "frontend/models/ResNet.h"
#include "runtime/SafeTensors.h"
#include "runtime/Trainer.h"
#include "tests/LossFile.h"

using namespace kiln;

namespace {

constexpr double kRelTolerance = 1e-4;
constexpr int64_t kBatch = 8, kClasses = 10, kSize = 64;

using kiln::test::readLosses;

struct Model {
  std::unique_ptr<ir::Graph> graph;
  std::vector<codegen::BufferWrite> buffers;
};

/// ResNet-18 at batch `batch` from PyTorch's initial weights (torchvision's names are kiln's;
/// loadStateDict with strict checks every one).
Model resnet18(const std::string &weights, int64_t batch) {
  frontend::models::ResNet18 model(kClasses);
  runtime::NamedTensors state = runtime::readSafeTensors(weights);
  model.loadStateDict(std::map<std::string, Tensor>(state.begin(), state.end()), /*strict=*/true);
  model.train();
  frontend::GraphBuilder builder("resnet18_ddp");
  frontend::Var x = builder.input("x", DType::F32, {batch, 3, kSize, kSize});
  Model out;
  out.graph = builder.finish({{"logits", model(x)}});
  out.buffers = builder.bufferWrites();
  return out;
}

/// Trains `step` for one epoch of the data (5 updates of 8 samples, in order) and compares each
/// update's loss with `want`; returns whether all match. `group`: as one of its ranks.
bool trainAndCompare(TrainingStep &step, const std::string &dir, const std::vector<double> &want,
                     distributed::DataParallelGroup *group) {
  runtime::TrainerOptions options;
  runtime::TrainerHooks hooks;
  std::vector<double> got;
  hooks.onProgress = [&](const runtime::TrainerProgress &progress) { got.push_back(progress.loss); };
  if (group != nullptr)
    group->attach(step, options, hooks);
  runtime::Dataset data =
      runtime::Dataset::open({{"x", dir + "/resnet18_ddp_x.npy"}, {"labels", dir + "/resnet18_ddp_labels.npy"}});
  runtime::Trainer trainer(step, data, options, hooks);
  if (trainer.batchSize() != kBatch)
    fail("an update holds {} samples, PyTorch's {}", trainer.batchSize(), kBatch);
  trainer.run();
  if (group != nullptr && group->rank() != 0)
    return true;
  if (got.size() != want.size())
    fail("{} updates, PyTorch ran {}", got.size(), want.size());
  bool ok = true;
  for (size_t i = 0; i < got.size(); ++i) {
    double rel = std::fabs(got[i] - want[i]) / std::fabs(want[i]);
    ok &= rel <= kRelTolerance;
    std::cout << fmt::format("update {} loss {:.9g} torch {:.9g} rel {:.3g}{}\n", i + 1, got[i], want[i], rel,
                             rel <= kRelTolerance ? "" : " MISMATCH");
  }
  return ok;
}

codegen::LossSpec crossEntropy() { return codegen::LossSpec{codegen::LossKind::CrossEntropy, 0, "", "labels"}; }
codegen::OptimizerSpec sgd() { return codegen::OptimizerSpec::sgd(0.002, 0.9); }

int dataParallel(const std::string &dir) {
  distributed::DataParallelOptions groupOptions;
  groupOptions.checkEveryUpdate = true;
  groupOptions.timeoutSeconds = 120;
  distributed::DataParallelGroup group(groupOptions);
  if (group.size() != 2)
    fail("run under mpirun -np 2 (PyTorch's run had 2 ranks), not {}", group.size());
  Model model = resnet18(dir + "/resnet18_ddp.safetensors", kBatch / group.size());
  TrainingOptions options;
  options.split = true;
  options.buffers = model.buffers;
  // Rank 0 compiles first, the other then finds the shared object in the compile cache.
  std::vector<double> barrier{0};
  std::optional<TrainingStep> step;
  for (int turn = 0; turn < 2; ++turn) {
    if ((group.rank() == 0) == (turn == 0))
      step.emplace(compile_training_step(*model.graph, crossEntropy(), sgd(), options));
    group.sum(barrier);
  }
  group.broadcastFromRank0(*step);
  bool ok = trainAndCompare(*step, dir, readLosses(dir + "/resnet18_ddp.ddp.losses"), &group);
  uint64_t checksum = group.checkIdentical(*step);
  if (group.rank() == 0) {
    const distributed::AllreduceStats &stats = group.allreduceStats();
    std::cout << fmt::format("2 ranks: the parameters were bitwise identical after each of the {} updates (checksum "
                             "{:016x}); allreduce of {:.1f} MB in {} buckets, {:.1f} ms in flight per update, {:.0f}% "
                             "overlapped\n",
                             group.identicalChecks() - 1, checksum, static_cast<double>(stats.bytes) / 1e6,
                             stats.buckets, stats.seconds / static_cast<double>(stats.updates) * 1e3,
                             100 * stats.overlappedFraction());
    std::cout << (ok ? "losses match PyTorch DistributedDataParallel (gloo) within rtol 1e-4\n"
                     : "losses differ from PyTorch DistributedDataParallel\n");
    // The first bucket (fc's gradients) is final early in the backward pass: its allreduce must
    // have started there, not after the pass.
    if (stats.buckets < 2 || !(stats.overlappedSeconds() > 0)) {
      std::cout << "the allreduce did not overlap the backward pass\n";
      ok = false;
    }
  }
  return ok ? 0 : 1;
}

/// Whether a launch named so computes a backward that the frozen layers would need.
bool isFrozenLayerBackward(const std::string &launch) {
  for (const char *backward : {"conv_weight_grad", "conv_transpose", "pool_grad", "batch_norm_grad"})
    if (launch.find(backward) != std::string::npos)
      return true;
  return false;
}

int frozen(const std::string &dir) {
  Model model = resnet18(dir + "/resnet18_ddp.safetensors", kBatch);
  TrainingOptions everything;
  everything.buffers = model.buffers;
  TrainingOptions head = everything;
  head.params = {"fc.weight", "fc.bias"};
  TrainingStep step = compile_training_step(*model.graph, crossEntropy(), sgd(), head);
  int64_t frozenBackward = 0, fullBackward = 0;
  for (int64_t l = 0; l < step.executable().numLaunches(); ++l)
    frozenBackward += isFrozenLayerBackward(step.executable().launchName(l));
  // The step that trains everything, lowered (not compiled): its launch list holds them.
  codegen::LoweredTrainingStep all = codegen::lowerTrainingStep(*model.graph, crossEntropy(), sgd(), everything);
  for (const codegen::LaunchInfo &launch : all.lowered.model.launches)
    fullBackward += isFrozenLayerBackward(launch.name);
  std::cout << fmt::format("frozen but fc: {} kernels, {} trained tensors, {} backward kernels of convolutions, "
                           "pooling or BatchNorm; everything trained: {} kernels, {} such\n",
                           step.executable().numLaunches(), step.trainedParameters().size(), frozenBackward,
                           all.lowered.model.launches.size(), fullBackward);
  bool ok = frozenBackward == 0 && fullBackward > 0 && step.trainedParameters().size() == 2;
  if (!ok)
    std::cout << "the frozen layers' backward is not pruned (or the kernel names no longer say what they compute)\n";
  ok &= trainAndCompare(step, dir, readLosses(dir + "/resnet18_ddp.frozen.losses"), nullptr);
  std::cout << (ok ? "losses match PyTorch with requires_grad=False within rtol 1e-4\n"
                   : "losses differ from PyTorch with requires_grad=False\n");
  return ok ? 0 : 1;
}

} // namespace

int main(int argc, char **argv) {
  try {
    std::string mode = argc == 3 ? argv[2] : "";
    if (mode != "--data-parallel" && mode != "--frozen") {
      std::cerr << "usage: kiln_resnet18_data_parallel_check DIR --data-parallel|--frozen\n";
      return 2;
    }
    return mode == "--frozen" ? frozen(argv[1]) : dataParallel(argv[1]);
  } catch (const std::exception &error) {
    std::cerr << "error: " << error.what() << "\n";
    return 1;
  }
}
