#pragma once
// kiln::runtime::Executable: a compiled model, ready to run. It holds the loaded kernels (a
// shared object whose `kiln_model` symbol describes the model, runtime/KernelAbi.h), the launch
// list, the weights and the arena size, and runs the launch list on kiln's thread pool.
//
// Loading checks the whole description (ABI version, dtypes, shapes, every buffer reference
// against the buffer it points into), so a damaged or mismatched model is a kiln::Error at
// load time, never a bad address at run time. Running checks every input (and caller-provided
// output) against its declared dtype and shape.
//
// run() may be called from several threads at once: each call borrows its own arena (and its
// own buffer-address table) from a small pool that grows to the number of concurrent callers
// and is reused afterwards, so a runInto() on a warm executable allocates nothing.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/Tensor.h"
#include "runtime/KernelAbi.h"

namespace kiln::runtime {

class LoadedObject;
class Profiler;
class ThreadPool;

/// A graph input, output or weight as the model declares it.
struct TensorSpec {
  std::string name;
  TensorType type;
};

/// How an Executable runs (a namespace-level struct: GCC rejects a nested one with default
/// member initializers as a default argument of its enclosing class's members).
struct ExecutableOptions {
  /// The pool the kernels run on; null means defaultThreadPool().
  std::shared_ptr<ThreadPool> pool;
  /// Time every launch from the start (see Executable::setProfiling).
  bool profile = false;
};

/// Whether `path` names a compiled model (what Executable::load opens) rather than a graph
/// file: named *.so, or an ELF file whatever its name (graph files are text or protobuf).
bool isSharedObjectFile(const std::string &path);

class Executable {
public:
  using Options = ExecutableOptions;

  /// Opens the shared object at `soPath` and binds `weights` (in the model's weight order).
  /// With no weights given, a model compiled ahead of time uses the weights it carries
  /// (kiln_model_desc::weight_data). Throws kiln::Error when the file cannot be loaded, has no
  /// `kiln_model` symbol, was built for another ABI version, or does not describe a valid
  /// model, or when a weight's count, dtype or shape differs from the model's. A file cut short
  /// is an error too, not a crash: its ELF segments are checked against its size before dlopen
  /// maps them (touching a mapped page past the end of a file is a SIGBUS). The weights'
  /// storage is shared, not copied (as Tensor copies share it): the model reads it in place.
  /// A weight the model repacks at load (kiln_weight_packing) gets a packed copy, and the
  /// executable drops its reference to the plain one; a GEMM weight stored N x K that no
  /// other tensor shares (Tensor::ownsStorageAlone: the caller kept no copy) is packed over
  /// its own storage instead, so that a model's largest weight is never held twice.
  ///
  /// The shared object stays loaded as long as the Executable. dlopen() returns the already
  /// loaded object for a path it has open, so a model rewritten in place needs a new path.
  /// `symbol` names the description function: a shared object compiled from several models
  /// (codegen::compileBatch) exports one `<prefix>kiln_model` per model.
  static Executable load(const std::string &soPath, std::vector<Tensor> weights = {},
                         Options options = {}, const std::string &symbol = KILN_MODEL_SYMBOL);
  static Executable load(const std::string &soPath, Options options) {
    return load(soPath, {}, std::move(options));
  }

  /// The same over a description already in memory (`what` names it in errors); `desc` and
  /// everything it points to must outlive the Executable.
  static Executable fromDescription(const kiln_model_desc &desc, std::vector<Tensor> weights,
                                    Options options = {}, const std::string &what = "model");

  Executable(Executable &&) noexcept;
  Executable &operator=(Executable &&) noexcept;
  ~Executable();

  const std::vector<TensorSpec> &inputs() const;
  const std::vector<TensorSpec> &outputs() const;
  const std::vector<TensorSpec> &weights() const;
  int64_t numLaunches() const;
  const std::string &launchName(int64_t launch) const;
  /// Scratch bytes each concurrent run uses: for a batch-tiled model, one tile's arena per
  /// thread (tiles run side by side, runtime/BatchTiles.h).
  int64_t arenaBytes() const;
  /// Rows of the batch one run of the kernels computes (kiln_model_desc::batch_tile); 0 for a
  /// model that runs whole.
  int64_t batchTile() const;
  int numThreads() const;

  /// Runs the model on `inputs` (in the model's input order) and returns fresh outputs.
  std::vector<Tensor> run(const std::vector<Tensor> &inputs) const;
  /// So that `run({x, shift})` means positional inputs: without it the braces could also
  /// build the map below from two "iterators", and the call would be ambiguous.
  std::vector<Tensor> run(std::initializer_list<Tensor> inputs) const {
    return run(std::vector<Tensor>(inputs));
  }
  /// The same with inputs and outputs by name; every input must be given, and no other.
  std::map<std::string, Tensor> run(const std::map<std::string, Tensor> &inputs) const;
  /// Writes the outputs into `outputs`, which must hold one allocated tensor of the declared
  /// type per output. Allocates nothing once there is an arena per concurrent caller (after
  /// each calling thread's first run). Outputs must not share storage with inputs. An output may
  /// share storage with a weight only when the model was built for it (a training step writing
  /// new parameters in place, runtime/TrainingStep.h: codegen::checkInPlaceUpdates checks the
  /// launch order that makes it sound).
  ///
  /// A non-empty `afterLaunch(l)` is called on the calling thread after launch l has finished
  /// (its work on every thread done) and before launch l + 1 starts: a caller may then use
  /// outputs that are final (lastLaunchOfOutput) while the rest of the model runs, or progress
  /// work of its own between kernels. In a profiled run its time is outside the launches' events.
  void runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
               const std::function<void(int64_t launch)> &afterLaunch = {}) const;
  /// The last launch whose buffers include output `output`: once it has run, that output holds
  /// its final value, since no later launch reads or writes it. -1 when no launch touches it.
  /// kiln::Error for an output the model does not have.
  int64_t lastLaunchOfOutput(int64_t output) const;

  /// Turns per-launch timing on or off for the following runs.
  void setProfiling(bool on);
  bool profiling() const;
  /// The events of all profiled runs so far.
  Profiler &profiler() const;

private:
  struct Impl;
  explicit Executable(std::unique_ptr<Impl> impl);
  /// fromDescription; for a description load() read from a file, `file` is what the file maps,
  /// and every table, string and weight range the description points to must lie in it.
  static Executable fromDescription(const kiln_model_desc &desc, std::vector<Tensor> weights, Options options,
                                    const std::string &what, const LoadedObject *file);
  const Impl &impl() const;

  std::unique_ptr<Impl> impl_;
};

} // namespace kiln::runtime
