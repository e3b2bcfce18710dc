// Bisecting a pipeline by numerics: one reference evaluation of the graph as given, then one
// after each pass from the manager's after-pass callback (the graph has been verified by then).
// Every pass is checked, not only up to the first failure, so a pass that later restores the
// numbers, or one that breaks them again, shows in the report.
#include "passes/Bisect.h"

#include <algorithm>

#include "core/Error.h"

namespace kiln::passes {

std::vector<PassCheck> bisectPasses(ir::Graph &graph, PassManager &manager, const std::vector<Tensor> &inputs,
                                    const ir::ParamValues &params, double rtol, double atol,
                                    const std::function<void(const PassCheck &)> &onCheck) {
  std::vector<Tensor> reference = ir::evaluate(graph, inputs, params);
  std::vector<PassCheck> checks;
  manager.setAfterPassCallback([&](const PassRecord &record, const ir::Graph &after) {
    PassCheck check;
    check.index = checks.size() + 1;
    check.pass = record.name;
    try {
      std::vector<Tensor> outputs = ir::evaluate(after, inputs, params);
      if (outputs.size() != reference.size()) {
        check.ok = false;
        check.problem = fmt::format("the graph returns {} outputs instead of {}", outputs.size(), reference.size());
      }
      for (size_t i = 0; i < std::min(outputs.size(), reference.size()); ++i) {
        Comparison comparison = compareTensors(outputs[i], reference[i], rtol, atol);
        check.maxRelError = std::max(check.maxRelError, comparison.maxRelError);
        if (!comparison.ok && check.ok) {
          check.ok = false;
          check.failedOutput = static_cast<int>(i);
          check.problem = comparison.message;
        }
      }
    } catch (const Error &error) {
      check.ok = false;
      check.failedOutput = -1;
      check.problem = fmt::format("evaluation failed: {}", error.what());
    }
    checks.push_back(check);
    if (onCheck)
      onCheck(checks.back());
  });
  // The callback refers to this frame: it must not outlive it, whatever happens.
  PassContext context;
  try {
    manager.run(graph, context);
  } catch (...) {
    manager.setAfterPassCallback({});
    throw;
  }
  manager.setAfterPassCallback({});
  return checks;
}

const PassCheck *firstFailure(const std::vector<PassCheck> &checks) {
  auto it = std::find_if(checks.begin(), checks.end(), [](const PassCheck &check) { return !check.ok; });
  return it == checks.end() ? nullptr : &*it;
}

} // namespace kiln::passes
