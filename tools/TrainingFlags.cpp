// The loss and optimizer flags of kiln-run --train and kiln-compile --train (see TrainingFlags.h).
#include "tools/TrainingFlags.h"

#include <algorithm>
#include <cmath>
#include <functional>

#include "core/Error.h"
#include "ir/SymbolicShapes.h" // isStaticGraph

namespace kiln::tools {

const char *const kTrainingFlagsUsage =
    R"(  --train LOSS            mean | sum (of the first output's elements), mse (against --labels),
                          cross-entropy (logits [N, C] against class indices [N] in --labels),
                          nll (log-probabilities [N, C] against class indices)
  --loss-output NAME      the output the loss is taken of (default: the first)
  --optimizer KIND        sgd (default) | adam | adamw, with torch.optim's defaults
  --lr LR                 learning rate (default 0.01)
  --momentum M            SGD momentum (default 0)
  --nesterov              SGD Nesterov momentum (needs --momentum)
  --weight-decay WD       SGD and Adam: L2 penalty; AdamW: decoupled decay (default 0; AdamW 0.01)
  --betas B1,B2           Adam and AdamW (default 0.9,0.999)
  --eps E                 Adam and AdamW (default 1e-8)
)";

codegen::OptimizerSpec TrainingFlags::defaultOptimizer() {
  codegen::OptimizerSpec optimizer;
  optimizer.lr = 0.01;
  return optimizer;
}

void requireSymbolicBatch(const ir::Graph &graph) {
  if (ir::isStaticGraph(graph))
    fail("--batch-tile: graph @{} has a static batch (its input '{}' is {}): a symbolic batch (an ONNX dim_param) "
         "trains in tiles",
         graph.name(), graph.inputs().at(0)->name(), graph.inputs().at(0)->type().toString());
}

codegen::LossKind parseLossKind(const std::string &flag, const std::string &value) {
  static const std::vector<std::pair<std::string, codegen::LossKind>> kinds = {
      {"mean", codegen::LossKind::Mean},
      {"sum", codegen::LossKind::Sum},
      {"mse", codegen::LossKind::Mse},
      {"cross-entropy", codegen::LossKind::CrossEntropy},
      {"nll", codegen::LossKind::Nll},
  };
  for (const auto &[name, kind] : kinds)
    if (name == value)
      return kind;
  fail("{}: unknown loss '{}' (expected mean, sum, mse, cross-entropy or nll)", flag, value);
}

namespace {

codegen::OptimizerKind parseOptimizerKind(const std::string &flag, const std::string &value) {
  if (value == "sgd")
    return codegen::OptimizerKind::Sgd;
  if (value == "adam")
    return codegen::OptimizerKind::Adam;
  if (value == "adamw")
    return codegen::OptimizerKind::AdamW;
  fail("{}: unknown optimizer '{}' (expected sgd, adam or adamw)", flag, value);
}

} // namespace

double parseNumber(const std::string &flag, const std::string &value) {
  size_t used = 0;
  double number = 0;
  try {
    number = std::stod(value, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (value.empty() || used != value.size() || !std::isfinite(number))
    fail("{} expects a number, got '{}'", flag, value);
  return number;
}

bool isLabelLoss(codegen::LossKind kind) {
  return kind == codegen::LossKind::Mse || kind == codegen::LossKind::CrossEntropy ||
         kind == codegen::LossKind::Nll;
}

void addTrainingFlags(FlagParser &parser, TrainingFlags &flags) {
  // The handlers run after this returns: they hold a pointer to `flags`, not the reference.
  TrainingFlags *f = &flags;
  using Handler = std::function<void(const std::string &, const std::string &)>;
  auto option = [&parser, f](const std::string &name, Handler handler) {
    parser.addOption(name, [f, handler](const std::string &flag, const std::string &value) {
      handler(flag, value);
      f->given.push_back(flag);
    });
  };
  parser.addSwitch("--nesterov", [f] {
    f->optimizer.nesterov = true;
    f->given.push_back("--nesterov");
  });
  option("--loss-output", [f](const std::string &flag, const std::string &value) {
    f->loss.outputName = nonEmpty(flag, value);
  });
  option("--optimizer", [f](const std::string &flag, const std::string &value) {
    f->optimizer.kind = parseOptimizerKind(flag, value);
  });
  option("--lr", [f](const std::string &flag, const std::string &value) { f->optimizer.lr = parseNumber(flag, value); });
  option("--momentum", [f](const std::string &flag, const std::string &value) {
    f->optimizer.momentum = parseNumber(flag, value);
  });
  option("--weight-decay", [f](const std::string &flag, const std::string &value) {
    f->optimizer.weightDecay = parseNumber(flag, value);
  });
  option("--betas", [f](const std::string &flag, const std::string &value) {
    size_t comma = value.find(',');
    if (comma == std::string::npos)
      fail("{} expects B1,B2, got '{}'", flag, value);
    f->optimizer.beta1 = parseNumber(flag, value.substr(0, comma));
    f->optimizer.beta2 = parseNumber(flag, value.substr(comma + 1));
  });
  option("--eps", [f](const std::string &flag, const std::string &value) {
    f->optimizer.eps = parseNumber(flag, value);
  });
}

bool gaveFlag(const TrainingFlags &flags, const std::string &flag) {
  return std::find(flags.given.begin(), flags.given.end(), flag) != flags.given.end();
}

void finishTrainingFlags(TrainingFlags &flags) {
  bool sgd = flags.optimizer.kind == codegen::OptimizerKind::Sgd;
  if (sgd && (gaveFlag(flags, "--betas") || gaveFlag(flags, "--eps")))
    fail("--betas and --eps apply to adam and adamw, not to sgd");
  if (!sgd && (gaveFlag(flags, "--momentum") || gaveFlag(flags, "--nesterov")))
    fail("--momentum and --nesterov apply to sgd, not to {}",
         flags.optimizer.kind == codegen::OptimizerKind::Adam ? "adam" : "adamw");
  if (flags.optimizer.kind == codegen::OptimizerKind::AdamW && !gaveFlag(flags, "--weight-decay"))
    flags.optimizer.weightDecay = 1e-2; // torch.optim.AdamW's default
  if (flags.loss.kind == codegen::LossKind::CrossEntropy || flags.loss.kind == codegen::LossKind::Nll)
    flags.loss.targetName = "labels";
}

} // namespace kiln::tools
