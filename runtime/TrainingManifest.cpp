// The training manifest's text form (see TrainingManifest.h): written by codegen, read back by
// the runtime. Numbers are written with 17 significant digits so that they read back exactly.
#include "runtime/TrainingManifest.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>

#include "core/Error.h"

namespace kiln::runtime {

namespace {

constexpr int kFormatVersion = 1;

void checkName(const std::string &name) {
  if (name.empty() || name.find_first_of("\t\n\r") != std::string::npos)
    fail("training manifest: name '{}' is empty or holds a tab or a line break", name);
}

std::vector<std::string> splitTabs(const std::string &line) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    fields.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
    if (tab == std::string::npos)
      return fields;
    start = tab + 1;
  }
}

/// Reads one line's fields, naming the line in errors.
class LineReader {
public:
  LineReader(const std::string &what, size_t number, std::vector<std::string> fields)
      : what_(what), number_(number), fields_(std::move(fields)) {}

  void expectFields(size_t count) const {
    if (fields_.size() != count)
      fail("{}: training manifest line {} ('{}') has {} fields, expected {}", what_, number_, fields_[0],
           fields_.size(), count);
  }
  const std::string &text(size_t i) const {
    if (fields_[i].empty())
      fail("{}: training manifest line {} ('{}') has an empty field {}", what_, number_, fields_[0], i);
    // A line split on '\n' alone may keep a '\r', which no name can hold (toText refuses it).
    if (fields_[i].find('\r') != std::string::npos)
      fail("{}: training manifest line {} ('{}') has a carriage return in field {}", what_, number_, fields_[0], i);
    return fields_[i];
  }
  double number(size_t i) const {
    size_t used = 0;
    double value = 0;
    try {
      value = std::stod(fields_[i], &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used == 0 || used != fields_[i].size() || !std::isfinite(value))
      fail("{}: training manifest line {} ('{}') expects a number, got '{}'", what_, number_, fields_[0], fields_[i]);
    return value;
  }
  int64_t integer(size_t i, int64_t low) const {
    size_t used = 0;
    long long value = 0;
    try {
      value = std::stoll(fields_[i], &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (used == 0 || used != fields_[i].size() || value < low)
      fail("{}: training manifest line {} ('{}') expects an integer >= {}, got '{}'", what_, number_, fields_[0], low,
           fields_[i]);
    return value;
  }

private:
  const std::string &what_;
  size_t number_;
  std::vector<std::string> fields_;
};

} // namespace

std::string TrainingManifest::toText() const {
  std::string text = fmt::format("kiln-training\t{}\n", kFormatVersion);
  checkName(loss);
  checkName(optimizer);
  text += fmt::format("loss\t{}\noptimizer\t{}\n", loss, optimizer);
  for (const auto &[name, value] : hyperParameters) {
    checkName(name);
    text += fmt::format("hyper\t{}\t{:.17g}\n", name, value);
  }
  text += fmt::format("lr\t{:.17g}\nsteps\t{}\nclasses\t{}\n", lr, steps, classes);
  if (ignoreIndex)
    text += fmt::format("ignore-index\t{}\n", *ignoreIndex);
  text += fmt::format("input\tlr\t{}\ninput\tstep\t{}\n", lrInput, stepInput);
  if (targetInput >= 0)
    text += fmt::format("input\ttarget\t{}\n", targetInput);
  if (batchTile > 0) {
    checkName(batchSymbol);
    text += fmt::format("input\tsample-weight\t{}\nbatch-tile\t{}\t{}\n", weightInput, batchTile, batchSymbol);
    for (int64_t input : batchInputs)
      text += fmt::format("batch-input\t{}\n", input);
  }
  for (const std::string &name : params) {
    checkName(name);
    text += fmt::format("param\t{}\n", name);
  }
  for (const TrainingManifestUpdate &update : updates) {
    checkName(update.name);
    checkName(update.param);
    text += fmt::format("update\t{}\t{}\t{}\t{}\n", update.output, update.isState ? "state" : "param", update.name,
                        update.param);
  }
  return text;
}

TrainingManifest TrainingManifest::parse(const std::string &text, const std::string &what) {
  TrainingManifest manifest;
  std::istringstream lines(text);
  std::string line;
  size_t number = 0;
  bool sawVersion = false, sawLr = false, sawStep = false;
  while (std::getline(lines, line)) {
    ++number;
    if (line.empty())
      continue;
    std::vector<std::string> fields = splitTabs(line);
    LineReader reader(what, number, fields);
    const std::string &key = fields[0];
    if (!sawVersion) {
      reader.expectFields(2);
      if (key != "kiln-training" || reader.integer(1, 0) != kFormatVersion)
        fail("{}: the training manifest is not version {} of kiln's format (it starts '{}')", what, kFormatVersion,
             line);
      sawVersion = true;
    } else if (key == "loss" || key == "optimizer") {
      reader.expectFields(2);
      (key == "loss" ? manifest.loss : manifest.optimizer) = reader.text(1);
    } else if (key == "hyper") {
      reader.expectFields(3);
      manifest.hyperParameters.emplace_back(reader.text(1), reader.number(2));
    } else if (key == "lr") {
      reader.expectFields(2);
      manifest.lr = reader.number(1);
    } else if (key == "steps") {
      reader.expectFields(2);
      manifest.steps = reader.integer(1, 0);
    } else if (key == "classes") {
      reader.expectFields(2);
      manifest.classes = reader.integer(1, 0);
    } else if (key == "ignore-index") {
      reader.expectFields(2);
      manifest.ignoreIndex = reader.integer(1, std::numeric_limits<int64_t>::min());
    } else if (key == "input") {
      reader.expectFields(3);
      const std::string &role = reader.text(1);
      int64_t index = reader.integer(2, 0);
      if (role == "lr")
        manifest.lrInput = index, sawLr = true;
      else if (role == "step")
        manifest.stepInput = index, sawStep = true;
      else if (role == "target")
        manifest.targetInput = index;
      else if (role == "sample-weight")
        manifest.weightInput = index;
      else
        fail("{}: training manifest line {}: unknown input role '{}'", what, number, role);
    } else if (key == "batch-tile") {
      reader.expectFields(3);
      manifest.batchTile = reader.integer(1, 1);
      manifest.batchSymbol = reader.text(2);
    } else if (key == "batch-input") {
      reader.expectFields(2);
      manifest.batchInputs.push_back(reader.integer(1, 0));
    } else if (key == "param") {
      reader.expectFields(2);
      manifest.params.push_back(reader.text(1));
    } else if (key == "update") {
      reader.expectFields(5);
      TrainingManifestUpdate update;
      update.output = reader.integer(1, 1);
      const std::string &kind = reader.text(2);
      if (kind != "param" && kind != "state")
        fail("{}: training manifest line {}: unknown update kind '{}'", what, number, kind);
      update.isState = kind == "state";
      update.name = reader.text(3);
      update.param = reader.text(4);
      manifest.updates.push_back(update);
    } else {
      fail("{}: training manifest line {}: unknown entry '{}'", what, number, key);
    }
  }
  if (!sawVersion)
    fail("{}: the training manifest is empty", what);
  if (!sawLr || !sawStep)
    fail("{}: the training manifest does not say which inputs take the learning rate and the step count", what);
  // toText writes both, and a step without them could not be written back or described.
  if (manifest.loss.empty() || manifest.optimizer.empty())
    fail("{}: the training manifest does not name its loss and optimizer", what);
  if ((manifest.batchTile > 0) != (manifest.weightInput >= 0) || (manifest.batchTile > 0) == manifest.batchInputs.empty())
    fail("{}: the training manifest's batch tiles need the tile, the sample weights input and the batch inputs "
         "together",
         what);
  return manifest;
}

std::string TrainingManifest::describe() const {
  std::string text = fmt::format("{} loss, {} (lr {}", loss, optimizer, lr);
  for (const auto &[name, value] : hyperParameters)
    text += fmt::format(", {} {}", name, value);
  return text + ")";
}

} // namespace kiln::runtime
