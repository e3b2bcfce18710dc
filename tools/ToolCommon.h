#pragma once
// What kiln's command-line tools share: a parser of flags (switches and "--opt VALUE" /
// "--opt=VALUE" options), parsers of option values that fail with one-line kiln::Errors naming
// the flag, and small file and text helpers.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "codegen/Precision.h"
#include "core/SymbolicDim.h"
#include "core/Tensor.h"

namespace kiln::tools {

/// NAME=FILE, as --input, --param, --output and --check take it.
struct Binding {
  std::string name, path;
};

/// The command line as switches, options with a value and positional arguments. Handlers run
/// in command-line order; a flag not declared is a kiln::Error "unknown option '--x' (see
/// --help)", an option without its value "--x needs a value".
class FlagParser {
public:
  using SwitchHandler = std::function<void()>;
  using ValueHandler = std::function<void(const std::string &flag, const std::string &value)>;

  /// A flag with no value ("--reference"); several names may share a handler.
  void addSwitch(const std::string &name, SwitchHandler handler);
  /// A flag with a value, written "--opt VALUE" or "--opt=VALUE" ("-o VALUE" for a short one).
  void addOption(const std::string &name, ValueHandler handler);
  /// Parses argv[1..argc), calling the handlers; returns the positional arguments in order.
  std::vector<std::string> parse(int argc, char **argv) const;

private:
  std::map<std::string, SwitchHandler> switches_;
  std::map<std::string, ValueHandler> options_;
};

Binding parseBinding(const std::string &flag, const std::string &value);
/// A finite number >= 0.
double parseTolerance(const std::string &flag, const std::string &value);
/// A decimal integer >= 0; `what` says what the flag expects ("a positive integer").
uint64_t parseCount(const std::string &flag, const std::string &value, const char *what);
/// parseCount clamped to [low, high].
int parseBoundedCount(const std::string &flag, const std::string &value, int low, int high);
/// `value`, which must not be empty.
const std::string &nonEmpty(const std::string &flag, const std::string &value);
/// `value` ("NAME=N", --dim) added to `dims`: NAME an identifier, N an extent within kiln's
/// limit, NAME not given before (kiln-run and kiln-dump).
void addDimBinding(const std::string &flag, const std::string &value, DimBindings &dims);
/// `value` of --precision ("f32" or "bf16"); the error names the flag.
codegen::ContractionPrecision parsePrecision(const std::string &flag, const std::string &value);
/// "NAME=D0,D1,..." (dims >= 0; "NAME=" is a scalar).
std::pair<std::string, Shape> parseShapeBinding(const std::string &flag, const std::string &value);

/// One line, whatever the message holds.
std::string oneLine(std::string message);
/// "a, b, c", or "(none)".
std::string joinNames(const std::vector<std::string> &names);
bool endsWith(const std::string &text, const std::string &suffix);

/// A tensor file: an ONNX TensorProto when it ends in .pb, else .npy.
Tensor readTensorFile(const std::string &path);
/// A kiln::Error when a tensor of `type` kiln would create itself (a random input) does not
/// fit in half of the machine's memory: drawing it would end in the OOM killer instead.
void checkFitsInMemory(const TensorType &type, const std::string &what);
/// The process's peak resident memory so far, in bytes (its own image's: VmHWM).
int64_t peakResidentBytes();

/// Runs `command` and turns what it throws into one line "TOOL: MESSAGE" on stderr and exit
/// status 1; returns `command`'s status otherwise.
int runTool(const char *tool, const std::function<int()> &command);

} // namespace kiln::tools
