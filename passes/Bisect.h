#pragma once
// Finding the pass that changes a graph's numbers (kiln-run --bisect-passes): the reference
// evaluator runs on the graph as given and again after every pass, on the same inputs and
// parameters, and each pass's outputs are compared with the first run's.
#include <functional>
#include <string>
#include <vector>

#include "ir/Evaluator.h"
#include "passes/PassManager.h"

namespace kiln::passes {

/// How the graph's outputs after one pass compare with the graph's outputs before any pass.
struct PassCheck {
  size_t index = 0; // 1-based position in the pass list
  std::string pass;
  /// The largest |got - want| / |want| over every output's finite elements with want != 0.
  double maxRelError = 0;
  bool ok = true;
  /// When !ok: the first output out of tolerance (ir::compareTensors' message, whose worst
  /// element decides), or -1 when the graph did not evaluate or returned a different number of
  /// outputs; `problem` says which.
  int failedOutput = -1;
  std::string problem;
};

/// Evaluates `graph` on `inputs` and `params`, then runs `manager` on it, evaluating after every
/// pass and comparing each output with |got - want| <= atol + rtol * |want| (NaN equal to NaN).
/// `onCheck`, when given, sees each check as soon as it is made. A parameter a pass removes is
/// simply not looked up; one it adds must carry a value. Throws kiln::Error if the graph as given
/// does not evaluate, or a pass fails (PassManager::run); a graph that no longer evaluates after
/// a pass is a failed check, not an error. Replaces `manager`'s after-pass callback.
std::vector<PassCheck> bisectPasses(ir::Graph &graph, PassManager &manager, const std::vector<Tensor> &inputs,
                                    const ir::ParamValues &params, double rtol, double atol,
                                    const std::function<void(const PassCheck &)> &onCheck = {});

/// The first failed check, or nullptr when every pass agrees.
const PassCheck *firstFailure(const std::vector<PassCheck> &checks);

} // namespace kiln::passes
