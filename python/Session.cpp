// kiln::python::Session (see Session.h).
#include "python/Session.h"

#include "ir/BatchTiling.h"
#include "ir/SymbolicShapes.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <list>
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

/// The ONNX model `import` reads, with `inputShapes` fixing inputs' dims and `dims` its
/// dim_params: the dim_params left stay symbols where the model imports so (a batch that one
/// compile serves, or dims the session compiles per size); else it imports static, a dim_param
/// left being an error asking for input_shapes.
std::unique_ptr<ir::Graph> importOnnx(
    const std::function<std::unique_ptr<ir::Graph>(const frontend::OnnxImportOptions &)> &import,
    const std::map<std::string, Shape> &inputShapes, const DimBindings &dims) {
  frontend::OnnxImportOptions options;
  options.inputShapes = inputShapes;
  options.dimParams = dims;
  options.keepSymbolicDims = true;
  try {
    return import(options);
  } catch (const Error &) {
    // a mapping that cannot take symbols: the static import below says what it needs
  }
  options.keepSymbolicDims = false;
  return import(options);
}

/// An ONNX model's declarations as a session's specs, `inputShapes` fixing inputs' shapes.
ModelSource::Declared declaredOf(const frontend::OnnxDeclaredValues &values,
                                 const std::map<std::string, Shape> &inputShapes) {
  ModelSource::Declared declared;
  for (const auto &[name, type] : values.inputs) {
    auto fixed = inputShapes.find(name);
    declared.inputs.push_back({name, fixed == inputShapes.end() ? type : TensorType{type.dtype, fixed->second}});
  }
  for (const auto &[name, type] : values.outputs)
    declared.outputs.push_back({name, type});
  return declared;
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
  return ModelSource(path, [path, inputShapes, seen](const DimBindings &dims) {
    std::lock_guard<std::mutex> lock(seen->mutex);
    checkFileExists(path);
    std::error_code sizeError, timeError;
    uintmax_t size = fs::file_size(path, sizeError);
    fs::file_time_type time = fs::last_write_time(path, timeError);
    if (seen->read && (sizeError || timeError || size != seen->size || time != seen->time))
      fail("'{}' changed since the session read it; open a new Session to use the new model", path);
    std::unique_ptr<ir::Graph> graph = importOnnx(
        [&](const frontend::OnnxImportOptions &options) { return frontend::importOnnxFile(path, options); },
        inputShapes, dims);
    seen->read = true;
    seen->size = size;
    seen->time = time;
    return graph;
  }, [path, inputShapes] { return declaredOf(frontend::onnxDeclaredValuesOfFile(path), inputShapes); });
}

ModelSource ModelSource::onnxBytes(std::string bytes, std::map<std::string, Shape> inputShapes) {
  auto held = std::make_shared<const std::string>(std::move(bytes));
  return ModelSource(
      "<onnx bytes>",
      [held, inputShapes](const DimBindings &dims) {
        return importOnnx(
            [&](const frontend::OnnxImportOptions &options) { return frontend::importOnnxBytes(*held, options); },
            inputShapes, dims);
      },
      [held, inputShapes] { return declaredOf(frontend::onnxDeclaredValuesOfBytes(*held), inputShapes); });
}

ModelSource ModelSource::kirFile(const std::string &path) {
  return ModelSource(path, [path](const DimBindings &) {
    checkFileExists(path);
    return ir::parseGraphFile(path);
  });
}

ModelSource ModelSource::graph(std::string what, std::function<std::unique_ptr<ir::Graph>()> build) {
  return ModelSource(std::move(what), [build = std::move(build)](const DimBindings &) { return build(); });
}

std::unique_ptr<ir::Graph> ModelSource::build(const DimBindings &dims) const {
  std::unique_ptr<ir::Graph> graph = build_(dims);
  if (!graph)
    fail("{}: no graph was built", what_);
  // What the builder did not bind (a graph's symbols; ONNX binds its own at import).
  if (!dims.empty() && !ir::isStaticGraph(*graph)) {
    DimBindings own;
    for (const std::string &symbol : ir::graphSymbols(*graph))
      if (dims.count(symbol))
        own[symbol] = dims.at(symbol);
    if (!own.empty())
      graph = ir::bindSymbols(*graph, own);
  }
  return graph;
}

// --- Session -------------------------------------------------------------------------------

Session::Session(std::string what, std::shared_ptr<ModelSource> source, std::string compiledPath,
                 SessionOptions options, runtime::Executable executable)
    : what_(std::move(what)), source_(std::move(source)), compiledPath_(std::move(compiledPath)),
      options_(std::move(options)), executable_(std::make_shared<runtime::Executable>(std::move(executable))) {}

/// A model compiled per size: its declared inputs and outputs, and the compiled sizes held.
struct Session::Specializations {
  std::vector<runtime::TensorSpec> inputs, outputs;
  std::optional<std::string> batchSymbol; // axis 0 of the first input, when one symbol
  codegen::CompileOptions compile;        // one thread pool for every size
  int64_t capacity = 1;

  std::mutex mutex; // guards what follows; held while a size compiles
  struct Entry {
    DimBindings key; // the extents compiled in (without a batch the model serves at any size)
    std::shared_ptr<runtime::Executable> executable;
  };
  std::list<Entry> entries; // most recently used first
  SpecializationStats stats; // but `held`
  bool profiling = false;
};

Session::Session(ModelSource source, SessionOptions options)
    : Session(std::make_shared<ModelSource>(std::move(source)), std::move(options)) {}

Session::Session(std::shared_ptr<ModelSource> source, SessionOptions options)
    : what_(source->what()), source_(std::move(source)), options_(std::move(options)) {
  std::unique_ptr<ir::Graph> graph;
  try {
    graph = source_->build();
  } catch (const Error &) {
    // A model that imports only at fixed sizes (an ONNX Range over a symbolic dim) is still
    // compiled per size, from what it declares; the first size then says what else fails.
    std::optional<ModelSource::Declared> declared;
    try {
      declared = source_->declared();
    } catch (const Error &) {
      // the import's error says more
    }
    bool symbolic = declared && std::any_of(declared->inputs.begin(), declared->inputs.end(),
                                            [](const runtime::TensorSpec &spec) { return !isStaticType(spec.type); });
    if (!symbolic)
      throw;
    compilePerSize(std::move(declared->inputs), std::move(declared->outputs));
    return;
  }
  if (ir::isStaticGraph(*graph) || ir::servesEveryBatch(*graph)) {
    // The graph is handed over: released once lowered, it leaves the executable the only
    // holder of the weights (codegen/CompileModel.h).
    executable_ = std::make_shared<runtime::Executable>(codegen::compile(std::move(graph), compileOptions(options_)));
    return;
  }
  std::vector<runtime::TensorSpec> inputs, outputs;
  for (const ir::Value *input : graph->inputs())
    inputs.push_back({input->name(), input->type()});
  for (size_t i = 0; i < graph->outputs().size(); ++i)
    outputs.push_back({graph->outputName(i), graph->outputs()[i]->type()});
  compilePerSize(std::move(inputs), std::move(outputs)); // the graph goes: each size is built again
}

void Session::compilePerSize(std::vector<runtime::TensorSpec> inputs, std::vector<runtime::TensorSpec> outputs) {
  if (options_.maxSpecializations < 1)
    failArgument(ArgumentError::Kind::Value, "max_specializations must be at least 1, got {}",
                 options_.maxSpecializations);
  auto held = std::make_shared<Specializations>();
  held->inputs = std::move(inputs);
  held->outputs = std::move(outputs);
  if (!held->inputs.empty() && held->inputs[0].type.rank() > 0)
    held->batchSymbol = dimSymbolName(held->inputs[0].type.shape[0]);
  held->compile = compileOptions(options_);
  held->capacity = options_.maxSpecializations;
  specializations_ = std::move(held);
}

std::shared_ptr<runtime::Executable> Session::executableFor(const std::vector<Tensor> &inputs) const {
  if (!specializations_)
    return executable_;
  Specializations &held = *specializations_;
  if (inputs.size() != held.inputs.size())
    failArgument(ArgumentError::Kind::Value, "the model has {} inputs ({}), got {}", held.inputs.size(),
                 joinNames(held.inputs), inputs.size());
  std::vector<std::string> names;
  std::vector<TensorType> types;
  std::vector<std::optional<Shape>> shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    names.push_back(held.inputs[i].name);
    types.push_back(held.inputs[i].type);
    shapes.push_back(inputs[i].defined() ? std::optional<Shape>(inputs[i].shape()) : std::nullopt);
  }
  DimBindings bindings = ir::bindingsFromShapes(names, types, shapes);
  std::lock_guard<std::mutex> lock(held.mutex);
  for (auto entry = held.entries.begin(); entry != held.entries.end(); ++entry) {
    bool fits = std::all_of(entry->key.begin(), entry->key.end(), [&](const auto &bound) {
      auto given = bindings.find(bound.first);
      return given != bindings.end() && given->second == bound.second;
    });
    if (fits) {
      ++held.stats.hits;
      held.entries.splice(held.entries.begin(), held.entries, entry);
      return held.entries.front().executable;
    }
  }
  // A new size: the graph built with these extents, its batch left symbolic where one compile
  // then serves every batch.
  ++held.stats.compiles;
  DimBindings key = bindings;
  std::unique_ptr<ir::Graph> graph;
  if (held.batchSymbol && key.erase(*held.batchSymbol)) {
    try {
      graph = source_->build(key);
      if (!ir::isStaticGraph(*graph) && !ir::servesEveryBatch(*graph))
        graph.reset();
    } catch (const Error &) {
      graph.reset(); // the batch bound too, below
    }
  }
  if (!graph) {
    key = bindings;
    graph = source_->build(key);
  }
  auto executable = std::make_shared<runtime::Executable>(codegen::compile(std::move(graph), held.compile));
  if (held.profiling)
    executable->setProfiling(true);
  held.entries.push_front({key, executable});
  if (static_cast<int64_t>(held.entries.size()) > held.capacity) {
    held.entries.pop_back(); // a run still holding it keeps it alive until it returns
    ++held.stats.evictions;
  }
  return executable;
}

const std::vector<runtime::TensorSpec> &Session::inputs() const {
  return specializations_ ? specializations_->inputs : executable_->inputs();
}

const std::vector<runtime::TensorSpec> &Session::outputs() const {
  return specializations_ ? specializations_->outputs : executable_->outputs();
}

int Session::threads() const {
  if (executable_)
    return executable_->numThreads();
  const codegen::CompileOptions &compile = specializations_->compile;
  return (compile.runtime.pool ? compile.runtime.pool : runtime::defaultThreadPool())->numThreads();
}

int64_t Session::arenaBytes() const {
  if (executable_)
    return executable_->arenaBytes();
  std::lock_guard<std::mutex> lock(specializations_->mutex);
  int64_t largest = 0;
  for (const Specializations::Entry &entry : specializations_->entries)
    largest = std::max(largest, entry.executable->arenaBytes());
  return largest;
}

std::optional<SpecializationStats> Session::specializations() const {
  if (!specializations_)
    return std::nullopt;
  std::lock_guard<std::mutex> lock(specializations_->mutex);
  SpecializationStats stats = specializations_->stats;
  for (const Specializations::Entry &entry : specializations_->entries)
    stats.held.push_back(entry.key);
  return stats;
}

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

std::vector<Tensor> Session::run(const std::vector<Tensor> &inputs) const { return executableFor(inputs)->run(inputs); }

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
  executableFor(inputs)->runInto(inputs, outputs);
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
  if (specializations_)
    fail("{}: one compiled model serves one size of its symbolic dims ({}); give input_shapes to save one",
         what_, joinNames(specializations_->inputs));
  codegen::CompileOptions aot; // no thread pool: nothing runs
  aot.compiler.cacheDir = options_.cacheDir;
  codegen::compileAheadOfTime(*source_->build(), path, aot);
}

void Session::startProfiling() {
  if (executable_) {
    executable_->profiler().clear();
    executable_->setProfiling(true);
    return;
  }
  std::lock_guard<std::mutex> lock(specializations_->mutex);
  specializations_->profiling = true;
  for (const Specializations::Entry &entry : specializations_->entries) {
    entry.executable->profiler().clear();
    entry.executable->setProfiling(true);
  }
}

void Session::stopProfiling(const std::string &tracePath) {
  if (executable_) {
    executable_->setProfiling(false);
    executable_->profiler().writeChromeTrace(tracePath);
    return;
  }
  // One trace of every size held, each launch named with its size: "[S=7] softmax_2".
  std::lock_guard<std::mutex> lock(specializations_->mutex);
  specializations_->profiling = false;
  std::vector<std::string> names;
  std::vector<runtime::Profiler::Event> events;
  for (const Specializations::Entry &entry : specializations_->entries) {
    runtime::Executable &executable = *entry.executable;
    executable.setProfiling(false);
    std::string size;
    for (const auto &[symbol, extent] : entry.key)
      size += fmt::format("{}{}={}", size.empty() ? "" : ", ", symbol, extent);
    auto first = static_cast<int32_t>(names.size());
    for (int64_t launch = 0; launch < executable.numLaunches(); ++launch)
      names.push_back(fmt::format("[{}] {}", size, executable.launchName(launch)));
    for (runtime::Profiler::Event event : executable.profiler().events()) {
      event.launch += first;
      events.push_back(event);
    }
  }
  runtime::Profiler merged(names);
  merged.record(events.data(), events.size());
  merged.writeChromeTrace(tracePath);
}

bool Session::profiling() const {
  if (executable_)
    return executable_->profiling();
  std::lock_guard<std::mutex> lock(specializations_->mutex);
  return specializations_->profiling;
}

} // namespace kiln::python
