// kiln::python::Session (see Session.h).
#include "python/Session.h"

#include "ir/BatchTiling.h"
#include "ir/SymbolicShapes.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <system_error>

#include "codegen/CompileModel.h"
#include "frontend/onnx/OnnxImporter.h"
#include "ir/BatchTiling.h"
#include "ir/Parser.h"
#include "ir/SymbolicShapes.h"
#include "runtime/Profiler.h"
#include "runtime/ThreadPool.h"

namespace kiln::python {

namespace {

namespace fs = std::filesystem;

/// Refuses a path that names no file, as Python's open() would: FileNotFoundError.
void checkFileExists(const std::string &path) {
  std::error_code error;
  if (!fs::is_regular_file(path, error))
    failArgument(ArgumentError::Kind::FileNotFound, "no such file: '{}'", path);
}

/// The ONNX model `import` reads, with `inputShapes` fixing inputs' dims: symbolic in its batch
/// when that is its one dim_param left and the graph serves every batch from one compile
/// (ir::servesEveryBatch); else imported as before, a dim_param left being an error asking
/// for input_shapes.
std::unique_ptr<ir::Graph> importServingEveryBatch(
    const std::function<std::unique_ptr<ir::Graph>(const frontend::OnnxImportOptions &)> &import,
    const std::map<std::string, Shape> &inputShapes) {
  frontend::OnnxImportOptions options;
  options.inputShapes = inputShapes;
  options.keepSymbolicDims = true;
  try {
    std::unique_ptr<ir::Graph> graph = import(options);
    if (ir::isStaticGraph(*graph) || ir::servesEveryBatch(*graph))
      return graph;
  } catch (const Error &) {
    // a mapping that cannot take symbols: the static import below says what it needs
  }
  options.keepSymbolicDims = false;
  return import(options);
}

std::string joinNames(const std::vector<runtime::TensorSpec> &specs) {
  std::string names;
  for (const runtime::TensorSpec &spec : specs)
    names += (names.empty() ? "'" : ", '") + spec.name + "'";
  return names.empty() ? "none" : names;
}

size_t indexOf(const std::vector<runtime::TensorSpec> &specs, const std::string &name, const char *kind) {
  for (size_t i = 0; i < specs.size(); ++i)
    if (specs[i].name == name)
      return i;
  failArgument(ArgumentError::Kind::Value, "unknown {} '{}'; the model's {}s are {}", kind, name, kind,
               joinNames(specs));
}

} // namespace

runtime::ExecutableOptions executableOptions(const SessionOptions &options) {
  if (options.threads < 0)
    failArgument(ArgumentError::Kind::Value, "threads must be a positive count (or None for one per core), got {}",
                 options.threads);
  runtime::ExecutableOptions runtimeOptions;
  if (options.threads > 0)
    runtimeOptions.pool = std::make_shared<runtime::ThreadPool>(options.threads);
  return runtimeOptions;
}

codegen::CompileOptions compileOptions(const SessionOptions &options) {
  codegen::CompileOptions compile;
  compile.runtime = executableOptions(options);
  compile.compiler.cacheDir = options.cacheDir;
  compile.precision = options.precision;
  return compile;
}

namespace {

/// Executable::load(path), also when this process loaded `path` before and the file there has
/// been replaced since (a model saved again over the path it was loaded from): dlopen() would
/// return the object already loaded under that name, the old model. Such a path is loaded
/// through a name of its own, a hard link beside it (or a copy in the temporary folder), which
/// dlopen tells apart by name, and then by inode when the file is the same after all.
runtime::Executable loadCurrentFile(const std::string &path, const runtime::ExecutableOptions &options) {
  std::string name = path.find('/') == std::string::npos ? "./" + path : path; // as Executable::load opens it
  void *loaded = dlopen(name.c_str(), RTLD_LAZY | RTLD_NOLOAD);
  if (!loaded)
    return runtime::Executable::load(path, options);
  dlclose(loaded); // RTLD_NOLOAD counted a reference
  static std::atomic<uint64_t> next{0};
  std::string suffix = fmt::format(".kiln-load-{}-{}", getpid(), next++);
  fs::path alias = path + suffix;
  std::error_code error;
  fs::create_hard_link(path, alias, error);
  if (error) {
    alias = fs::temp_directory_path(error) / (fs::path(path).filename().string() + suffix);
    if (!error)
      fs::copy_file(path, alias, error);
    if (error)
      fail("'{}' was loaded before and cannot be loaded again under another name ({}): {}", path, alias.string(),
           error.message());
  }
  struct Remove {
    fs::path path;
    ~Remove() {
      std::error_code ignored;
      fs::remove(path, ignored); // the mapping keeps the file's bytes
    }
  } remove{alias};
  return runtime::Executable::load(alias.string(), options);
}

/// The byte range of a tensor, empty for a tensor with no bytes.
struct ByteRange {
  const unsigned char *begin, *end;
  bool overlaps(const ByteRange &other) const { return begin < other.end && other.begin < end; }
};

ByteRange bytesOf(const Tensor &tensor) {
  auto begin = static_cast<const unsigned char *>(tensor.data());
  return {begin, begin + tensor.byteSize()};
}

} // namespace

// --- ModelSource ---------------------------------------------------------------------------

ModelSource ModelSource::onnxFile(const std::string &path, std::map<std::string, Shape> inputShapes) {
  // What the file was when first read: size and modification time.
  struct Seen {
    std::mutex mutex; // save() may be called from several threads
    bool read = false;
    uintmax_t size = 0;
    fs::file_time_type time;
  };
  auto seen = std::make_shared<Seen>();
  return ModelSource(path, [path, inputShapes = std::move(inputShapes), seen] {
    std::lock_guard<std::mutex> lock(seen->mutex);
    checkFileExists(path);
    std::error_code sizeError, timeError;
    uintmax_t size = fs::file_size(path, sizeError);
    fs::file_time_type time = fs::last_write_time(path, timeError);
    if (seen->read && (sizeError || timeError || size != seen->size || time != seen->time))
      fail("'{}' changed since the session read it; open a new Session to use the new model", path);
    std::unique_ptr<ir::Graph> graph = importServingEveryBatch(
        [&](const frontend::OnnxImportOptions &options) { return frontend::importOnnxFile(path, options); },
        inputShapes);
    seen->read = true;
    seen->size = size;
    seen->time = time;
    return graph;
  });
}

ModelSource ModelSource::onnxBytes(std::string bytes, std::map<std::string, Shape> inputShapes) {
  auto held = std::make_shared<const std::string>(std::move(bytes));
  return ModelSource("<onnx bytes>", [held, inputShapes = std::move(inputShapes)] {
    return importServingEveryBatch(
        [&](const frontend::OnnxImportOptions &options) { return frontend::importOnnxBytes(*held, options); },
        inputShapes);
  });
}

ModelSource ModelSource::kirFile(const std::string &path) {
  return ModelSource(path, [path] {
    checkFileExists(path);
    return ir::parseGraphFile(path);
  });
}

ModelSource ModelSource::graph(std::string what, GraphBuilder build) {
  return ModelSource(std::move(what), std::move(build));
}

std::unique_ptr<ir::Graph> ModelSource::build() const {
  std::unique_ptr<ir::Graph> graph = build_();
  if (!graph)
    fail("{}: no graph was built", what_);
  return graph;
}

// --- Session -------------------------------------------------------------------------------

Session::Session(std::string what, std::shared_ptr<ModelSource> source, std::string compiledPath,
                 SessionOptions options, runtime::Executable executable)
    : what_(std::move(what)), source_(std::move(source)), compiledPath_(std::move(compiledPath)),
      options_(std::move(options)), executable_(std::make_shared<runtime::Executable>(std::move(executable))) {}

Session::Session(ModelSource source, SessionOptions options)
    : Session(source.what(), std::make_shared<ModelSource>(source), "", options,
              // The graph is handed over: released once lowered, it leaves the executable the
              // only holder of the weights (codegen/CompileModel.h).
              codegen::compile(source.build(), compileOptions(options))) {}

Session Session::loadCompiled(const std::string &path, SessionOptions options) {
  checkFileExists(path);
  runtime::ExecutableOptions runtimeOptions = executableOptions(options);
  return Session(path, nullptr, path, options, loadCurrentFile(path, runtimeOptions));
}

Session Session::open(const std::string &path, SessionOptions options, std::map<std::string, Shape> inputShapes) {
  checkFileExists(path);
  if (runtime::isSharedObjectFile(path)) {
    if (!inputShapes.empty())
      failArgument(ArgumentError::Kind::Value, "input_shapes apply to ONNX models; '{}' is a compiled model", path);
    if (options.precision != codegen::ContractionPrecision::F32)
      failArgument(ArgumentError::Kind::Value, "precision applies when compiling; '{}' is a compiled model", path);
    return loadCompiled(path, options);
  }
  if (path.size() >= 4 && path.compare(path.size() - 4, 4, ".kir") == 0) {
    if (!inputShapes.empty())
      failArgument(ArgumentError::Kind::Value, "input_shapes apply to ONNX models; '{}' is a graph with static shapes",
                   path);
    return Session(ModelSource::kirFile(path), options);
  }
  return Session(ModelSource::onnxFile(path, std::move(inputShapes)), options);
}

size_t Session::inputIndex(const std::string &name) const { return indexOf(inputs(), name, "input"); }
size_t Session::outputIndex(const std::string &name) const { return indexOf(outputs(), name, "output"); }

std::vector<Tensor> Session::run(const std::vector<Tensor> &inputs) const { return executable_->run(inputs); }

void Session::runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs) const {
  // The kernels read inputs while writing outputs, launch after launch: a shared byte would
  // change an input before its last read (the runtime assumes there is none).
  const std::vector<runtime::TensorSpec> &inputSpecs = this->inputs(), &outputSpecs = this->outputs();
  for (size_t o = 0; o < outputs.size() && o < outputSpecs.size(); ++o) {
    ByteRange out = bytesOf(outputs[o]);
    for (size_t i = 0; i < inputs.size() && i < inputSpecs.size(); ++i)
      if (out.overlaps(bytesOf(inputs[i])))
        failArgument(ArgumentError::Kind::Value, "output '{}' shares memory with input '{}'; give it an array of its own",
                     outputSpecs[o].name, inputSpecs[i].name);
    for (size_t other = 0; other < o; ++other)
      if (out.overlaps(bytesOf(outputs[other])))
        failArgument(ArgumentError::Kind::Value, "outputs '{}' and '{}' share memory; give each an array of its own",
                     outputSpecs[other].name, outputSpecs[o].name);
  }
  executable_->runInto(inputs, outputs);
}

void Session::save(const std::string &path) const {
  if (!source_) {
    // Loaded from a shared object: that file is the model, weights included.
    std::error_code error;
    if (fs::exists(path, error) && fs::equivalent(compiledPath_, path, error))
      return;
    fs::copy_file(compiledPath_, path, fs::copy_options::overwrite_existing, error);
    if (error)
      fail("cannot copy '{}' to '{}': {}", compiledPath_, path, error.message());
    return;
  }
  codegen::CompileOptions aot; // no thread pool: nothing runs
  aot.compiler.cacheDir = options_.cacheDir;
  codegen::compileAheadOfTime(*source_->build(), path, aot);
}

void Session::startProfiling() {
  executable_->profiler().clear();
  executable_->setProfiling(true);
}

void Session::stopProfiling(const std::string &tracePath) {
  executable_->setProfiling(false);
  executable_->profiler().writeChromeTrace(tracePath);
}

} // namespace kiln::python
