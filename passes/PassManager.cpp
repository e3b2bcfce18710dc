// The registry is built from passes/PassRegistry.def. The manager runs passes in order; around
// each it (1) moves the context's statistics aside so that the pass starts from empty counters,
// (2) runs and times the pass, (3) verifies the graph, (4) records the pass's counters and adds
// them back to the context, and (5) calls the after-pass callback. Any error on the way is
// re-raised with the pass's name, so a broken pipeline says which pass broke it.
#include "passes/PassManager.h"

#include <chrono>

#include "core/Error.h"
#include "ir/Verifier.h"
#include "passes/Passes.h"
#include "passes/Pipelines.h"

namespace kiln::passes {

const std::vector<PassInfo> &registeredPasses() {
  static const std::vector<PassInfo> passes = {
#define PASS(Factory, Name, Description) {Name, Description, &Factory},
#include "passes/PassRegistry.def"
  };
  return passes;
}

const PassInfo *findPass(std::string_view name) {
  for (const PassInfo &info : registeredPasses())
    if (info.name == name)
      return &info;
  return nullptr;
}

std::unique_ptr<Pass> createPass(std::string_view name) {
  if (const PassInfo *info = findPass(name))
    return info->create();
  std::vector<std::string_view> known;
  for (const PassInfo &info : registeredPasses())
    known.push_back(info.name);
  fail("unknown pass '{}' (known passes: {})", name, fmt::join(known, ", "));
}

std::vector<std::string> splitPassList(std::string_view list) {
  if (list.empty())
    fail("the pass list is empty");
  std::vector<std::string> names;
  size_t start = 0;
  while (true) {
    size_t comma = list.find(',', start);
    std::string_view item = list.substr(start, comma == std::string_view::npos ? list.size() - start : comma - start);
    if (item.empty())
      fail("empty pass name in the pass list '{}'", list);
    names.emplace_back(item);
    if (comma == std::string_view::npos)
      return names;
    start = comma + 1;
  }
}

void PassManager::addPass(std::unique_ptr<Pass> pass) {
  if (!pass)
    fail("PassManager::addPass: the pass is null");
  passes_.push_back(std::move(pass));
}

void PassManager::addPass(std::string_view name) { passes_.push_back(createPass(name)); }

void PassManager::addPasses(const std::vector<std::string> &names) {
  // Look every name up before adding any, so a typo leaves the manager as it was.
  std::vector<std::unique_ptr<Pass>> created;
  for (const std::string &name : names)
    created.push_back(createPass(name));
  for (auto &pass : created)
    passes_.push_back(std::move(pass));
}

void PassManager::addPipeline(std::string_view name) {
  const PipelineInfo &pipeline = findPipeline(name);
  std::vector<std::string> names(pipeline.passes.begin(), pipeline.passes.end());
  addPasses(names);
}

std::vector<std::string> PassManager::passNames() const {
  std::vector<std::string> names;
  for (const auto &pass : passes_)
    names.emplace_back(pass->name());
  return names;
}

bool PassManager::run(ir::Graph &graph, PassContext &context) {
  records_.clear();
  try {
    ir::verify(graph);
  } catch (const Error &error) {
    fail("the graph is invalid before the first pass: {}", error.what());
  }
  bool anyChanged = false;
  for (size_t index = 0; index < passes_.size(); ++index) {
    Pass &pass = *passes_[index];
    PassRecord record;
    record.name = std::string(pass.name());
    // The pass counts from zero so its record holds only its own counters; the totals so far
    // are put back (with this pass's added) afterwards.
    PassStatistics totals = std::move(context.stats);
    context.stats = PassStatistics();
    auto start = std::chrono::steady_clock::now();
    try {
      record.changed = pass.run(graph, context);
    } catch (const Error &error) {
      context.stats = std::move(totals);
      fail("pass '{}' (pass {} of {}) failed: {}", record.name, index + 1, passes_.size(), error.what());
    }
    record.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    record.stats = std::move(context.stats);
    totals.merge(record.stats);
    context.stats = std::move(totals);
    try {
      ir::verify(graph);
    } catch (const Error &error) {
      fail("the graph is invalid after pass '{}' (pass {} of {}): {}", record.name, index + 1, passes_.size(),
           error.what());
    }
    anyChanged = anyChanged || record.changed;
    records_.push_back(std::move(record));
    if (afterPass_)
      afterPass_(records_.back(), graph);
  }
  return anyChanged;
}

} // namespace kiln::passes
