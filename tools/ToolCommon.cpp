// Flag parsing and helpers of the command-line tools (see ToolCommon.h).
#include "tools/ToolCommon.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include <sys/resource.h>
#include <unistd.h>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "frontend/onnx/OnnxImporter.h"
#include "runtime/Npy.h"

namespace kiln::tools {

void FlagParser::addSwitch(const std::string &name, SwitchHandler handler) { switches_[name] = std::move(handler); }

void FlagParser::addOption(const std::string &name, ValueHandler handler) { options_[name] = std::move(handler); }

std::vector<std::string> FlagParser::parse(int argc, char **argv) const {
  std::vector<std::string> args(argv + 1, argv + argc), positional;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (auto it = switches_.find(arg); it != switches_.end()) {
      it->second();
      continue;
    }
    bool looksLikeFlag = !arg.empty() && arg[0] == '-' && arg != "-";
    if (!looksLikeFlag) {
      positional.push_back(arg);
      continue;
    }
    // "--opt=VALUE" or "--opt VALUE".
    std::string flag = arg, value;
    size_t eq = arg.rfind("--", 0) == 0 ? arg.find('=') : std::string::npos;
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    auto it = options_.find(flag);
    if (it == options_.end()) {
      if (eq != std::string::npos && switches_.count(flag))
        fail("{} takes no value", flag);
      fail("unknown option '{}' (see --help)", flag);
    }
    if (eq == std::string::npos) {
      if (i + 1 >= args.size())
        fail("{} needs a value", flag);
      value = args[++i];
    }
    it->second(flag, value);
  }
  return positional;
}

Binding parseBinding(const std::string &flag, const std::string &value) {
  size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
    fail("{} expects NAME=FILE.npy, got '{}'", flag, value);
  return {value.substr(0, eq), value.substr(eq + 1)};
}

double parseTolerance(const std::string &flag, const std::string &value) {
  errno = 0;
  char *end = nullptr;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v < 0)
    fail("{} expects a non-negative number, got '{}'", flag, value);
  return v;
}

void addDimBinding(const std::string &flag, const std::string &value, DimBindings &dims) {
  const size_t equals = value.find('=');
  const std::string name = value.substr(0, equals);
  if (equals == std::string::npos || !isValidSymbolName(name))
    fail("{} {}: expected NAME=N with NAME an identifier", flag, value);
  const uint64_t extent = parseCount(flag, value.substr(equals + 1), "an extent");
  if (extent > static_cast<uint64_t>(kMaxElements))
    fail("{} {}: the extent is larger than kiln's limit of 2^48", flag, value);
  if (!dims.emplace(name, static_cast<int64_t>(extent)).second)
    fail("{} {}: symbol {} is given twice", flag, value, name);
}

codegen::ContractionPrecision parsePrecision(const std::string &flag, const std::string &value) {
  try {
    return codegen::parseContractionPrecision(value);
  } catch (const Error &e) {
    fail("{}: {}", flag, e.what());
  }
}

uint64_t parseCount(const std::string &flag, const std::string &value, const char *what) {
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    fail("{} expects {}, got '{}'", flag, what, value);
  errno = 0;
  unsigned long long v = std::strtoull(value.c_str(), nullptr, 10);
  if (errno == ERANGE)
    fail("{} value '{}' is too large", flag, value);
  return v;
}

int parseBoundedCount(const std::string &flag, const std::string &value, int low, int high) {
  uint64_t count = parseCount(flag, value, low > 0 ? "a positive integer" : "a non-negative integer");
  return static_cast<int>(std::clamp<uint64_t>(count, static_cast<uint64_t>(low), static_cast<uint64_t>(high)));
}

const std::string &nonEmpty(const std::string &flag, const std::string &value) {
  if (value.empty())
    fail("{} needs a value", flag);
  return value;
}

std::pair<std::string, Shape> parseShapeBinding(const std::string &flag, const std::string &value) {
  size_t eq = value.find('=');
  if (eq == std::string::npos || eq == 0)
    fail("{} expects NAME=D0,D1,..., got '{}'", flag, value);
  Shape shape;
  std::string dims = value.substr(eq + 1);
  size_t start = 0;
  while (start < dims.size()) {
    size_t comma = dims.find(',', start);
    std::string dim = dims.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (dim.empty() || dim.find_first_not_of("0123456789") != std::string::npos || dim.size() > 15)
      fail("{} expects NAME=D0,D1,... with dims >= 0, got '{}'", flag, value);
    shape.push_back(static_cast<int64_t>(std::stoll(dim)));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
    if (start == dims.size())
      fail("{} expects NAME=D0,D1,... with dims >= 0, got '{}'", flag, value);
  }
  return {value.substr(0, eq), shape};
}

std::string oneLine(std::string message) {
  for (char &c : message)
    if (c == '\n' || c == '\r')
      c = ' ';
  return message;
}

std::string joinNames(const std::vector<std::string> &names) {
  return names.empty() ? "(none)" : fmt::format("{}", fmt::join(names, ", "));
}

bool endsWith(const std::string &text, const std::string &suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Tensor readTensorFile(const std::string &path) {
  return endsWith(path, ".pb") ? frontend::readTensorProtoFile(path) : runtime::readNpy(path);
}

void checkFitsInMemory(const TensorType &type, const std::string &what) {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || pageSize <= 0)
    return;
  double limit = static_cast<double>(pages) * static_cast<double>(pageSize) / 2;
  double bytes = static_cast<double>(type.numElements()) * static_cast<double>(dtypeSize(type.dtype));
  if (bytes > limit)
    fail("{} of type {} needs {:.1f} GiB, more than half of this machine's {:.1f} GiB of memory", what, type.toString(),
         bytes / (1 << 30), 2 * limit / (1 << 30));
}

int64_t peakResidentBytes() {
  // VmHWM is this process image's own high-water mark. getrusage's ru_maxrss is not: Linux
  // carries it across fork and exec, so a kiln-run started by a Python harness that had loaded
  // PyTorch reported the harness's 250 MB as its own peak.
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0)
      return std::stoll(line.substr(6)) * 1024; // "VmHWM:    56320 kB"
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // Linux reports kilobytes
}

int runTool(const char *tool, const std::function<int()> &command) {
  try {
    return command();
  } catch (const Error &e) {
    std::cout << std::flush;
    std::cerr << tool << ": " << oneLine(e.what()) << "\n";
  } catch (const std::bad_alloc &) {
    std::cout << std::flush;
    std::cerr << tool << ": out of memory (is a tensor in the graph or an input too large?)\n";
  } catch (const std::exception &e) {
    std::cout << std::flush;
    std::cerr << tool << ": internal error: " << oneLine(e.what()) << "\n";
  }
  return 1;
}

} // namespace kiln::tools
