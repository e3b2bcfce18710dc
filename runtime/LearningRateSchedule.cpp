// Learning-rate schedules (see LearningRateSchedule.h).
#include "runtime/LearningRateSchedule.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "core/Error.h"

namespace kiln::runtime {

namespace {

std::vector<std::string> splitColons(const std::string &text) {
  std::vector<std::string> parts;
  size_t from = 0;
  for (;;) {
    size_t colon = text.find(':', from);
    parts.push_back(text.substr(from, colon == std::string::npos ? std::string::npos : colon - from));
    if (colon == std::string::npos)
      return parts;
    from = colon + 1;
  }
}

int64_t parseInteger(const std::string &text, const std::string &schedule, const char *what, int64_t low) {
  char *end = nullptr;
  errno = 0;
  long long value = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < low)
    fail("learning-rate schedule '{}': {} must be an integer >= {}, got '{}'", schedule, what, low, text);
  return value;
}

double parseFactor(const std::string &text, const std::string &schedule) {
  char *end = nullptr;
  double value = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || !std::isfinite(value) || value < 0)
    fail("learning-rate schedule '{}': the factor G must be a finite number >= 0, got '{}'", schedule, text);
  return value;
}

} // namespace

LearningRateSchedule LearningRateSchedule::parse(const std::string &text) {
  std::vector<std::string> parts = splitColons(text);
  LearningRateSchedule schedule;
  if (parts[0] == "constant" && parts.size() == 1)
    return schedule;
  if (parts[0] == "step" && parts.size() == 3) {
    schedule.kind = Kind::Step;
    schedule.stepSize = parseInteger(parts[1], text, "the step size K", 1);
    schedule.gamma = parseFactor(parts[2], text);
    return schedule;
  }
  if (parts[0] == "cosine" && parts.size() <= 2) {
    schedule.kind = Kind::Cosine;
    if (parts.size() == 2)
      schedule.warmup = parseInteger(parts[1], text, "the warm-up W", 0);
    return schedule;
  }
  fail("learning-rate schedule '{}': expected constant, step:K:G or cosine[:W]", text);
}

std::string LearningRateSchedule::toString() const {
  switch (kind) {
  case Kind::Constant:
    return "constant";
  case Kind::Step:
    return fmt::format("step:{}:{}", stepSize, gamma);
  case Kind::Cosine:
    return warmup > 0 ? fmt::format("cosine:{}", warmup) : "cosine";
  }
  return "constant";
}

double LearningRateSchedule::at(double lr, int64_t t, int64_t total) const {
  switch (kind) {
  case Kind::Constant:
    return lr;
  case Kind::Step:
    return lr * std::pow(gamma, static_cast<double>(t / stepSize));
  case Kind::Cosine: {
    if (warmup >= total && total > 0)
      fail("learning-rate schedule '{}': the warm-up of {} updates leaves none of the run's {} to decay over",
           toString(), warmup, total);
    if (t < warmup)
      return lr * static_cast<double>(t + 1) / static_cast<double>(warmup);
    double progress = static_cast<double>(t - warmup) / static_cast<double>(std::max<int64_t>(1, total - warmup));
    return lr * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
  }
  }
  return lr;
}

} // namespace kiln::runtime
