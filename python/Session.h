#pragma once
// kiln::python::Session: what `kiln.Session` is, in C++ and without Python. A compiled model
// and the facts the bindings (python/Module.cpp) need to expose it: its inputs and outputs,
// running it, writing it ahead of time, profiling it. The bindings only convert numpy arrays
// and dicts to and from the tensors here; every decision about a model lives on this side.
//
// A session is compiled from a ModelSource (an ONNX file or bytes, a .kir file, later a graph
// built in Python) or loaded from a shared object kiln-compile or save() wrote. run() and
// runInto() may be called from several threads at once: runtime::Executable gives each
// concurrent call its own arena (runtime/Executable.h), and nothing here is mutated by a run.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "core/Tensor.h"
#include "ir/Graph.h"
#include "runtime/Executable.h"

namespace kiln::python {

/// A mistake in what the caller passed rather than in the model: an unknown or missing name, a
/// wrong dtype or shape, a file that does not exist. Still a kiln::Error (its message names
/// what and where); the bindings raise the Python exception its kind names instead of
/// kiln.Error.
class ArgumentError : public Error {
public:
  enum class Kind { Value, Type, FileNotFound };
  ArgumentError(Kind kind, const std::string &message) : Error(message), kind_(kind) {}
  Kind kind() const { return kind_; }

private:
  Kind kind_;
};

/// Throws ArgumentError of `kind` with a fmt-formatted message.
template <typename... Args>
[[noreturn]] void failArgument(ArgumentError::Kind kind, fmt::format_string<Args...> format, Args &&...args) {
  throw ArgumentError(kind, fmt::format(format, std::forward<Args>(args)...));
}

/// Where a session's graph comes from. It can build the graph again: compiling releases it (so
/// that the executable alone holds the weights) and save() builds it anew for the ahead-of-time
/// writer rather than keep a second copy of the weights for the session's lifetime.
class ModelSource {
public:
  /// Builds the graph with the extents `dims` gives its symbols (empty: as the model declares
  /// them).
  using GraphBuilder = std::function<std::unique_ptr<ir::Graph>(const DimBindings &dims)>;

  /// An ONNX model file; `inputShapes` fix its inputs' symbolic dims by input name. Building
  /// it again fails when the file changed since it was first read (a save() of another model
  /// than the one running would be a silent surprise).
  static ModelSource onnxFile(const std::string &path, std::map<std::string, Shape> inputShapes = {});
  /// A serialized ONNX model, kept for rebuilding.
  static ModelSource onnxBytes(std::string bytes, std::map<std::string, Shape> inputShapes = {});
  /// A graph in kiln's text form (.kir); every parameter needs its value in the file.
  static ModelSource kirFile(const std::string &path);
  /// Any graph `build` returns, `what` naming it in errors: the door for graphs built with
  /// the graph API from Python.
  static ModelSource graph(std::string what, std::function<std::unique_ptr<ir::Graph>()> build);

  /// The graph, its symbols bound to `dims` (an ONNX model's dim_params fixed at import, where
  /// shape computations fold with them).
  std::unique_ptr<ir::Graph> build(const DimBindings &dims = {}) const;
  const std::string &what() const { return what_; }

  /// The inputs and outputs as the model declares them, symbols included, read without
  /// importing it: what a session compiled per size takes when the model does not import with
  /// its symbols (an ONNX Range over a sequence length). None for a source that cannot say.
  struct Declared {
    std::vector<runtime::TensorSpec> inputs, outputs;
  };
  std::optional<Declared> declared() const { return declare_ ? std::optional<Declared>(declare_()) : std::nullopt; }

private:
  ModelSource(std::string what, GraphBuilder build, std::function<Declared()> declare = {})
      : what_(std::move(what)), build_(std::move(build)), declare_(std::move(declare)) {}

  std::string what_;
  GraphBuilder build_;
  std::function<Declared()> declare_;
};

struct SessionOptions {
  /// Threads that run the kernels, the caller's included; 0: the runtime's shared pool (one
  /// thread per core).
  int threads = 0;
  /// The compile cache's folder (codegen/CxxCompiler.h); empty: $KILN_CACHE_DIR or the default.
  std::string cacheDir;
  /// What GEMMs and GEMM-computed convolutions multiply in (Session(precision="bf16")).
  codegen::ContractionPrecision precision = codegen::ContractionPrecision::F32;
  /// A model with symbolic dims beyond a batch that one compile serves (a sequence length)
  /// is compiled per size, on first use; at most this many compiled sizes are kept (the least
  /// recently used goes first). At least 1.
  int64_t maxSpecializations = 8;
};

/// What a session compiled per size has done (Session::specializations).
struct SpecializationStats {
  int64_t compiles = 0;  // runs that found no compiled model for their sizes (misses)
  int64_t hits = 0;      // runs that found one
  int64_t evictions = 0; // compiled models dropped to keep maxSpecializations
  /// The sizes held, most recently used first: each one's symbol extents (a batch that the
  /// compiled model serves at any size is left out).
  std::vector<DimBindings> held;
};

/// The runtime and compile options `options` ask for (what a Session compiles with, and a
/// training step too). ArgumentError for a negative thread count.
runtime::ExecutableOptions executableOptions(const SessionOptions &options);
codegen::CompileOptions compileOptions(const SessionOptions &options);

class Session {
public:
  /// Builds and compiles `source` with the inference pipeline. kiln::Error for a model that
  /// does not import or compile (codegen's message names the op), ArgumentError for bad options.
  Session(ModelSource source, SessionOptions options);
  /// Loads a shared object that kiln-compile or save() wrote: no compiler runs. The model is
  /// the file's as it is now, also when this process loaded the same path before and the file
  /// was replaced since (which dlopen alone would not see). ArgumentError (FileNotFound) for a
  /// missing file, kiln::Error for anything the runtime refuses to load.
  static Session loadCompiled(const std::string &path, SessionOptions options);
  /// What `path` holds, judged by its content and name: a compiled model (an ELF file), a .kir
  /// graph, or else an ONNX model; opened as loadCompiled or Session(ModelSource) would.
  static Session open(const std::string &path, SessionOptions options,
                      std::map<std::string, Shape> inputShapes = {});

  /// As declared: a dim the model leaves symbolic is its symbol.
  const std::vector<runtime::TensorSpec> &inputs() const;
  const std::vector<runtime::TensorSpec> &outputs() const;
  /// The position of the input (output) named `name`; ArgumentError (Value) naming the
  /// model's inputs (outputs) when there is none.
  size_t inputIndex(const std::string &name) const;
  size_t outputIndex(const std::string &name) const;
  int threads() const;
  /// Scratch bytes a run uses (compiled per size: the largest of the sizes held).
  int64_t arenaBytes() const;
  /// For a model compiled per size (symbolic dims beyond a batch): what that did; none for a
  /// model compiled once.
  std::optional<SpecializationStats> specializations() const;
  /// What the session runs, for messages and repr: the file, or "<onnx bytes>".
  const std::string &what() const { return what_; }

  /// Runs the model on `inputs` (in input order, of the declared types) into fresh outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) const;
  /// Writes the outputs into `outputs` (in output order, of the declared types), which may
  /// share no byte with an input or with each other: ArgumentError (Value) naming the two.
  void runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const;

  /// Writes the model ahead of time as the shared object `path` (what kiln-compile writes):
  /// loadCompiled() runs it with no compiler. A session loaded from a shared object copies it.
  /// kiln::Error for a model compiled per size (one object serves one).
  void save(const std::string &path) const;

  /// Times every launch of the runs that follow, forgetting those timed before.
  void startProfiling();
  /// Stops timing and writes the launches timed since startProfiling() as a Chrome trace.
  void stopProfiling(const std::string &tracePath);
  bool profiling() const;

private:
  struct Specializations;
  Session(std::string what, std::shared_ptr<ModelSource> source, std::string compiledPath,
          SessionOptions options, runtime::Executable executable);
  Session(std::shared_ptr<ModelSource> source, SessionOptions options);
  /// Makes the session one compiled per size, taking `inputs` and giving `outputs`.
  void compilePerSize(std::vector<runtime::TensorSpec> inputs, std::vector<runtime::TensorSpec> outputs);
  /// The compiled model that runs `inputs`: the session's one, or the one compiled for their
  /// sizes (compiled now when none is held).
  std::shared_ptr<runtime::Executable> executableFor(const std::vector<Tensor> &inputs) const;

  std::string what_;
  /// How to build the graph again (null for a session loaded from a shared object).
  std::shared_ptr<ModelSource> source_;
  std::string compiledPath_; // the shared object it was loaded from, if it was
  SessionOptions options_;
  std::shared_ptr<runtime::Executable> executable_; // null when compiled per size
  std::shared_ptr<Specializations> specializations_; // set when compiled per size
};

} // namespace kiln::python
