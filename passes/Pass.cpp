#include "passes/Pass.h"

namespace kiln::passes {

void PassStatistics::add(const std::string &counter, int64_t amount) { counters_[counter] += amount; }

int64_t PassStatistics::get(const std::string &counter) const {
  auto it = counters_.find(counter);
  return it == counters_.end() ? 0 : it->second;
}

void PassStatistics::merge(const PassStatistics &other) {
  for (const auto &[counter, amount] : other.counters_)
    counters_[counter] += amount;
}

} // namespace kiln::passes
