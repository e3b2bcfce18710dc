// Loading, in stages: open the shared object and find its description; check the ABI version
// before reading anything else (another version may lay the structs out differently); read the
// input, output and weight declarations; check every buffer reference against the buffer it
// points into; bind the weights. Running: check the inputs (and outputs), borrow a run context
// (arena + buffer-address table), compute every buffer address of the launch list into it,
// call the launches in order, give the context back.
#include "runtime/Executable.h"
#include "runtime/kernels/Kernels.h"

#include <dlfcn.h>
#include <elf.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <mutex>
#include <cstdlib>
#include <new>
#include <set>

#include "core/Allocation.h"
#include "core/Error.h"
#include "core/SymbolicDim.h"
#include "runtime/BatchTiles.h"
#include "runtime/KernelRuntime.h"
#include "runtime/LoadedObject.h"
#include "runtime/Profiler.h"
#include "runtime/ThreadPool.h"

namespace kiln::runtime {

namespace {

// Weights a model carries are laid out one after another, each 64-byte aligned (KernelAbi.h).
constexpr int64_t kWeightAlignment = 64;

// Arenas come from allocateBlock: at least cache-line aligned, so that an offset the memory
// planner aligned (for the vector units) gives an address just as aligned, and on huge pages
// once they reach 2 MiB (core/Allocation.h says why that matters).
struct ArenaDelete {
  void operator()(unsigned char *arena) const { std::free(arena); }
};

/// What one run needs for itself; reused by later runs.
struct RunContext {
  std::unique_ptr<unsigned char, ArenaDelete> arena;
  std::vector<void *> buffers;         // one address per buffer reference
  std::vector<Profiler::Event> events; // used only when profiling
};


// A description read from a file (Executable::load) is data a damaged file can change: a count
// or a rank that grew points past its table, a string may have lost its end. So before each
// table, string or weight range is read, it is checked to lie in what the file maps
// (runtime/LoadedObject.h); `file` is null for a description built in memory, which is trusted.
void checkInFile(const LoadedObject *file, const void *address, uint64_t bytes, const std::string &what,
                 const std::string &part) {
  if (file && !file->contains(address, bytes))
    fail("{}: its {} lies outside the file; is it corrupted?", what, part);
}

void checkStringInFile(const LoadedObject *file, const char *text, const std::string &what, const std::string &part) {
  if (file && text && !file->containsString(text))
    fail("{}: its {} does not end inside the file; is it corrupted?", what, part);
}

TensorSpec readSpec(const kiln_tensor_desc &desc, const char *role, int32_t index,
                    const std::string &what, const LoadedObject *file) {
  if (!desc.name)
    fail("{}: {} {} has no name", what, role, index);
  checkStringInFile(file, desc.name, what, fmt::format("name of {} {}", role, index));
  TensorSpec spec;
  spec.name = desc.name;
  checkStringInFile(file, desc.dtype, what, fmt::format("dtype of {} '{}'", role, spec.name));
  std::optional<DType> dtype = desc.dtype ? parseDType(desc.dtype) : std::nullopt;
  if (!dtype)
    fail("{}: {} '{}' has unknown dtype '{}'", what, role, spec.name,
         desc.dtype ? desc.dtype : "(null)");
  spec.type.dtype = *dtype;
  if (desc.rank < 0 || (desc.rank > 0 && !desc.shape))
    fail("{}: {} '{}' has an invalid shape (rank {})", what, role, spec.name, desc.rank);
  checkInFile(file, desc.shape, sizeof(int64_t) * static_cast<uint64_t>(desc.rank), what,
              fmt::format("shape of {} '{}' (rank {})", role, spec.name, desc.rank));
  spec.type.shape.assign(desc.shape, desc.shape + desc.rank);
  try {
    spec.type.numElements(); // rejects negative dims and shapes past kiln's size limit
  } catch (const Error &error) {
    fail("{}: {} '{}': {}", what, role, spec.name, error.what());
  }
  return spec;
}

std::vector<TensorSpec> readSpecs(const kiln_tensor_desc *descs, int32_t count, const char *role,
                                  const std::string &what, const LoadedObject *file) {
  if (count < 0 || (count > 0 && !descs))
    fail("{}: invalid {} list (count {})", what, role, count);
  checkInFile(file, descs, sizeof(kiln_tensor_desc) * static_cast<uint64_t>(count), what,
              fmt::format("{} table ({} entries)", role, count));
  std::vector<TensorSpec> specs;
  std::set<std::string> names;
  for (int32_t i = 0; i < count; ++i) {
    specs.push_back(readSpec(descs[i], role, i, what, file));
    if (!names.insert(specs.back().name).second)
      fail("{}: two {}s are named '{}'", what, role, specs.back().name);
  }
  return specs;
}


/// dlopen maps a shared object's segments where its program headers say, and touching a
/// mapped page past the end of the file is a SIGBUS, not an error: a model file cut short (an
/// interrupted copy) would crash the loader. So every segment is checked against the file's
/// size first. Files that are not 64-bit ELF are left to dlopen, whose message says why.
void checkSegmentsInFile(const std::string &path, const std::string &shown) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    return;
  auto size = static_cast<uint64_t>(static_cast<std::streamoff>(file.tellg()));
  Elf64_Ehdr header{};
  file.seekg(0);
  if (!file.read(reinterpret_cast<char *>(&header), sizeof header) ||
      std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64)
    return;
  uint64_t headersEnd = header.e_phoff + uint64_t(header.e_phnum) * sizeof(Elf64_Phdr);
  if (header.e_phentsize != sizeof(Elf64_Phdr) || header.e_phoff > size || headersEnd > size)
    fail("cannot load model '{}': its program headers lie outside the file ({} bytes); is it truncated or "
         "corrupted?",
         shown, size);
  file.seekg(static_cast<std::streamoff>(header.e_phoff));
  for (int i = 0; i < header.e_phnum; ++i) {
    Elf64_Phdr segment{};
    if (!file.read(reinterpret_cast<char *>(&segment), sizeof segment))
      fail("cannot load model '{}': cannot read its program header {}", shown, i);
    if (segment.p_type == PT_NULL)
      continue;
    if (segment.p_offset > size || segment.p_filesz > size - segment.p_offset)
      fail("cannot load model '{}': its segment {} ends at byte {}, past the end of the file ({} bytes); is it "
           "truncated?",
           shown, i, segment.p_offset + segment.p_filesz, size);
  }
}

} // namespace

struct Executable::Impl {
  std::string what;              // the file (or description) named in load errors
  std::shared_ptr<void> library; // declared first: unloaded after everything else
  const kiln_model_desc *desc = nullptr;
  const LoadedObject *file = nullptr; // while loading from a file: what it maps (checkInFile)
  /// As the kernels see them: one batch tile's shapes for a batch-tiled model.
  std::vector<TensorSpec> inputs, outputs, weights;
  /// As callers see them (Executable::inputs): the served batch on axis 0 where tiled.
  std::vector<TensorSpec> declaredInputs, declaredOutputs;
  BatchTiles tiles;
  std::vector<std::string> launchNames;
  std::vector<Tensor> weightTensors;       // loader-supplied weights, kept alive
  std::vector<Tensor> packedWeights;       // weights repacked at load (kiln_weight_packing)
  std::vector<unsigned char *> weightData; // weight i's bytes (kernels only read them)
  int64_t numRefs = 0;
  std::shared_ptr<ThreadPool> pool;
  kiln_rt rt{};
  kiln_rt serialRt{}; // for batch tiles run side by side, one per thread
  std::unique_ptr<Profiler> profiler;
  std::atomic<bool> profiling{false};
  std::mutex contextsMutex;
  std::vector<std::unique_ptr<RunContext>> contexts;
  std::vector<RunContext *> idleContexts; // capacity >= contexts.size(): release never allocates

  void readDescription(std::vector<Tensor> suppliedWeights);
  void readBatchTiling();
  void checkRefs();
  void bindWeights(std::vector<Tensor> supplied);
  void packWeights();
  RunContext *acquireContext();
  void releaseContext(RunContext *context);
  /// Runs the model on inputs of `rows` rows (BatchTiles::rowsOf; 0 when not tiled).
  void execute(const std::vector<Tensor> &inputValues, std::vector<Tensor> &outputValues, int64_t rows,
               const std::function<void(int64_t)> *afterLaunch = nullptr);
  /// Runs the launch list once, on `runtime`: over the whole tensors, or (tile >= 0) over the
  /// rows of batch tile `tile`.
  void runLaunches(const std::vector<Tensor> &inputValues, std::vector<Tensor> &outputValues, int64_t tile,
                   const kiln_rt &runtime, const std::function<void(int64_t)> *afterLaunch);
};

void Executable::Impl::readDescription(std::vector<Tensor> suppliedWeights) {
  if (desc->abi_version != KILN_ABI_VERSION)
    fail("{} was built for kiln ABI version {}, but this runtime implements version {}; "
         "recompile the model",
         what, desc->abi_version, KILN_ABI_VERSION);
  inputs = readSpecs(desc->inputs, desc->num_inputs, "input", what, file);
  outputs = readSpecs(desc->outputs, desc->num_outputs, "output", what, file);
  weights = readSpecs(desc->weights, desc->num_weights, "weight", what, file);
  if (desc->arena_bytes < 0)
    fail("{}: negative arena size {}", what, desc->arena_bytes);
  readBatchTiling();
  checkRefs();
  bindWeights(std::move(suppliedWeights));
  packWeights();
}

void Executable::Impl::readBatchTiling() {
  tiles = BatchTiles{};
  if (desc->batch_tile < 0)
    fail("{}: negative batch tile {}", what, desc->batch_tile);
  if (desc->batch_tile > 0) {
    tiles.tile = desc->batch_tile;
    tiles.extent = desc->batch_extent;
    if (tiles.extent < 0 || tiles.extent % tiles.tile != 0)
      fail("{}: it serves a batch of {}, not a multiple of its tile of {}", what, tiles.extent, tiles.tile);
    if (tiles.extent == 0) {
      if (!desc->batch_symbol)
        fail("{}: it serves any batch but names no symbol for it", what);
      checkStringInFile(file, desc->batch_symbol, what, "batch symbol");
      tiles.symbol = desc->batch_symbol;
      if (!isValidSymbolName(tiles.symbol))
        fail("{}: its batch symbol '{}' is not a symbol name", what, tiles.symbol);
    }
    if (desc->num_inputs > 0 && !desc->batched_inputs)
      fail("{}: it is batch-tiled but does not say which inputs carry the batch", what);
    checkInFile(file, desc->batched_inputs, sizeof(int32_t) * static_cast<uint64_t>(desc->num_inputs), what,
                "batched-input flags");
    auto checkRows = [&](const TensorSpec &spec, const char *role) {
      if (spec.type.rank() == 0 || spec.type.shape[0] != tiles.tile)
        fail("{}: {} '{}' is {}, but a batch tile holds {} rows on axis 0", what, role, spec.name,
             spec.type.toString(), tiles.tile);
    };
    for (int32_t i = 0; i < desc->num_inputs; ++i) {
      tiles.batched.push_back(desc->batched_inputs[i] != 0);
      if (tiles.batched.back())
        checkRows(inputs[static_cast<size_t>(i)], "input");
    }
    for (const TensorSpec &spec : outputs)
      checkRows(spec, "output");
  }
  declaredInputs.clear();
  declaredOutputs.clear();
  for (size_t i = 0; i < inputs.size(); ++i)
    declaredInputs.push_back(tiles.declared(inputs[i], tiles.tiled() && tiles.batched[i]));
  for (const TensorSpec &spec : outputs)
    declaredOutputs.push_back(tiles.declared(spec, true));
}

void Executable::Impl::packWeights() {
  if (desc->num_packings < 0 || (desc->num_packings > 0 && !desc->packings))
    fail("{}: invalid weight packing list (count {})", what, desc->num_packings);
  checkInFile(file, desc->packings, sizeof(kiln_weight_packing) * static_cast<uint64_t>(desc->num_packings), what,
              fmt::format("weight packing table ({} entries)", desc->num_packings));
  // Largest weights first. While a weight is packed, its plain copy and its packed form are
  // both alive; packed forms larger than the plain weights (Winograd's, 16/9 and 36/9 of
  // them) make the resident set grow pack by pack, so a large plain copy alive near the end
  // added to the largest set: Wide-ResNet-50's peak RSS went 453.5 -> 435.3 MB (it runs at
  // about the latter).
  std::vector<int32_t> order(static_cast<size_t>(desc->num_packings));
  for (int32_t p = 0; p < desc->num_packings; ++p)
    order[static_cast<size_t>(p)] = p;
  auto plainBytes = [&](int32_t p) -> uint64_t {
    const int32_t weight = desc->packings[p].weight;
    return weight >= 0 && static_cast<size_t>(weight) < weights.size()
               ? weights[static_cast<size_t>(weight)].type.byteSize()
               : 0;
  };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return plainBytes(a) > plainBytes(b); });
  for (int32_t p : order) {
    const kiln_weight_packing &packing = desc->packings[p];
    if (packing.weight < 0 || static_cast<size_t>(packing.weight) >= weights.size())
      fail("{}: weight packing {} names weight {}, but the model has {}", what, p, packing.weight, weights.size());
    const TensorSpec &spec = weights[static_cast<size_t>(packing.weight)];
    const auto *plain = reinterpret_cast<const float *>(weightData[static_cast<size_t>(packing.weight)]);
    const int64_t elements = spec.type.numElements();
    Tensor packed;
    // A k x n matrix read as plain[i*stride_k + j*stride_n]: every element read must lie inside
    // the weight, and the matrix must fill it exactly; one of the strides is 1 (the packers'
    // reads). The products are checked: the fields come from the file, and one that wrapped
    // would pass. `label` names the packing in the error ("" for gemm's f32 panels).
    auto checkMatrix = [&](DType dtype, int64_t columnMultiple, const char *label) {
      int64_t size = 0, lastRow = 0, lastColumn = 0, last = 0;
      const bool shapeOk = spec.type.dtype == dtype && packing.k > 0 && packing.n > 0 &&
                           packing.n % columnMultiple == 0 && packing.stride_k >= 0 &&
                           packing.stride_n >= 0 && (packing.stride_k == 1 || packing.stride_n == 1) &&
                           !__builtin_mul_overflow(packing.k, packing.n, &size) && size == elements &&
                           !__builtin_mul_overflow(packing.k - 1, packing.stride_k, &lastRow) &&
                           !__builtin_mul_overflow(packing.n - 1, packing.stride_n, &lastColumn) &&
                           !__builtin_add_overflow(lastRow, lastColumn, &last) && last < elements;
      if (!shapeOk)
        fail("{}: weight packing {} ({}{} x {}, strides {}, {}) does not fit weight '{}' ({})", what, p, label,
             packing.k, packing.n, packing.stride_k, packing.stride_n, spec.name, spec.type.toString());
    };
    // The weight must hold exactly k rows of n weights (k output channels of a convolution).
    auto checkRows = [&](DType dtype, const char *label) {
      int64_t size = 0;
      if (spec.type.dtype != dtype || packing.k <= 0 || packing.n <= 0 ||
          __builtin_mul_overflow(packing.k, packing.n, &size) || size != elements)
        fail("{}: weight packing {} ({}, {} x {}) does not fit weight '{}' ({})", what, p, label, packing.k,
             packing.n, spec.name, spec.type.toString());
    };
    auto checkGemmB = [&] { checkMatrix(DType::F32, kernels::kGemmBPanelWidth, ""); };
    // A weight the executable alone holds, stored N x K, is packed over itself (each panel
    // is the rows it is made of): no second copy of it is alive even for a moment.
    Tensor *alone = weightTensors.empty() ? nullptr : &weightTensors[static_cast<size_t>(packing.weight)];
    const bool packsOverItself = alone && alone->ownsStorageAlone() && alone->data() == plain &&
                                 packing.stride_k == 1 && packing.stride_n == packing.k;
    if (packing.kind == KILN_PACK_GEMM_B_PAIR_PANELS_BF16) {
      checkGemmB();
      if (packsOverItself) { // the bf16 pairs take the first half of the f32 storage
        packed = std::move(*alone);
        kernels::packGemmBPairsBf16InPlace(static_cast<float *>(packed.data()), packing.k, packing.n);
      } else {
        packed = Tensor(DType::BF16, {(packing.k + 1) / 2 * 2 * packing.n});
        kernels::packGemmBPairsBf16(plain, packing.k, packing.n, packing.stride_k, packing.stride_n,
                                    static_cast<uint16_t *>(packed.data()));
      }
    } else if (packing.kind == KILN_PACK_GEMM_B_PANELS) {
      checkGemmB();
      if (packsOverItself) {
        packed = std::move(*alone);
        kernels::packGemmBInPlace(static_cast<float *>(packed.data()), packing.k, packing.n);
      } else {
        packed = Tensor(spec.type);
        kernels::packGemmB(plain, packing.k, packing.n, packing.stride_k, packing.stride_n,
                           static_cast<float *>(packed.data()));
      }
    } else if (packing.kind == KILN_PACK_CONV_WINOGRAD_F2 || packing.kind == KILN_PACK_CONV_WINOGRAD_F4 ||
               packing.kind == KILN_PACK_CONV_WINOGRAD_F2_BF16) {
      // The weight must be exactly the k x n x 3 x 3 convolution weight the transform reads.
      const int tile = packing.kind == KILN_PACK_CONV_WINOGRAD_F4 ? 4 : 2;
      const bool bf16 = packing.kind == KILN_PACK_CONV_WINOGRAD_F2_BF16;
      const Shape expected{packing.k, packing.n, 3, 3};
      if (spec.type.dtype != DType::F32 || packing.k <= 0 || packing.n <= 0 || spec.type.shape != expected)
        fail("{}: weight packing {} (Winograd F({}x{}, 3x3), {} x {} x 3 x 3) does not fit weight '{}' ({})", what, p,
             tile, tile, packing.k, packing.n, spec.name, spec.type.toString());
      if (bf16) {
        packed = Tensor(DType::BF16, {kernels::winogradWeightsBf16Elements(packing.k, packing.n, tile)});
        kernels::packWinogradWeightsBf16(plain, packing.k, packing.n, tile, static_cast<uint16_t *>(packed.data()));
      } else {
        packed = Tensor(DType::F32, {kernels::winogradWeightFloats(packing.k, packing.n, tile)});
        kernels::packWinogradWeights(plain, packing.k, packing.n, tile, static_cast<float *>(packed.data()));
      }
    } else if (packing.kind == KILN_PACK_CONV_TAP_MAJOR) {
      // The weight must be exactly the k x n x r x s one-group convolution weight.
      const Shape expected{packing.k, packing.n, packing.stride_k, packing.stride_n};
      if (spec.type.dtype != DType::F32 || packing.k <= 0 || packing.n <= 0 || packing.stride_k <= 0 ||
          packing.stride_n <= 0 || spec.type.shape != expected)
        fail("{}: weight packing {} (tap-major convolution weights, {} x {} x {} x {}) does not fit weight '{}' ({})",
             what, p, packing.k, packing.n, packing.stride_k, packing.stride_n, spec.name, spec.type.toString());
      packed = Tensor(spec.type);
      kernels::packConvTapMajor(plain, packing.k, packing.n, packing.stride_k, packing.stride_n,
                                static_cast<float *>(packed.data()));
    } else if (packing.kind == KILN_PACK_CONV_BF16_PANELS) {
      checkRows(DType::F32, "bf16 convolution panels");
      const int64_t groups = packing.stride_k;
      if (groups < 1 || packing.k % groups != 0)
        fail("{}: weight packing {} (bf16 convolution panels, {} x {}) has {} groups, not a divisor of {}", what, p,
             packing.k, packing.n, groups, packing.k);
      packed = Tensor(DType::BF16, {kernels::convBf16PanelElements(packing.k, packing.n, groups)});
      kernels::packConvBf16Panels(plain, packing.k, packing.n, groups, static_cast<uint16_t *>(packed.data()));
    } else if (packing.kind == KILN_PACK_CONV_DIRECT_PANELS) {
      checkRows(DType::F32, "direct convolution panels");
      packed = Tensor(DType::F32, {kernels::convDirectPanelFloats(packing.k, packing.n)});
      kernels::packConvDirectPanels(plain, packing.k, packing.n, static_cast<float *>(packed.data()));
    } else if (packing.kind == KILN_PACK_QGEMM_B) {
      checkMatrix(DType::I8, 1, "int8 GEMM, ");
      packed = Tensor(DType::I8, {kernels::qgemmPackedBytes(packing.k, packing.n)});
      kernels::packQGemmB(reinterpret_cast<const int8_t *>(plain), packing.k, packing.n, packing.stride_k,
                          packing.stride_n, static_cast<int8_t *>(packed.data()));
    } else if (packing.kind == KILN_PACK_QCONV_WEIGHTS) {
      // The weight must hold exactly k x n x stride_k s8 weights.
      int64_t taps = 0, size = 0;
      if (spec.type.dtype != DType::I8 || packing.k <= 0 || packing.n <= 0 || packing.stride_k <= 0 ||
          (packing.stride_n != 0 && packing.stride_n != 1) ||
          __builtin_mul_overflow(packing.n, packing.stride_k, &taps) ||
          __builtin_mul_overflow(packing.k, taps, &size) || size != elements)
        fail("{}: weight packing {} (int8 convolution rows, {} x {} x {}, order {}) does not fit weight '{}' ({})",
             what, p, packing.k, packing.n, packing.stride_k, packing.stride_n, spec.name, spec.type.toString());
      const bool channelQuads = packing.stride_n == 1;
      packed = Tensor(DType::I8, {kernels::qconvPackedBytes(packing.k, packing.n, packing.stride_k, channelQuads)});
      kernels::packQConvWeights(reinterpret_cast<const int8_t *>(plain), packing.k, packing.n, packing.stride_k,
                                channelQuads, static_cast<int8_t *>(packed.data()));
    } else if (packing.kind == KILN_PACK_RECURRENT_GATES) {
      // The weight must be exactly the k directions x (gates * n) x n recurrent weights (its
      // dims are within kiln's limit, so gates * n is compared without overflow).
      const int64_t gates = packing.stride_k;
      const Shape &shape = spec.type.shape;
      const bool fits = spec.type.dtype == DType::F32 && (packing.k == 1 || packing.k == 2) &&
                        (gates == 1 || gates == 3 || gates == 4) && packing.n > 0 && shape.size() == 3 &&
                        shape[0] == packing.k && shape[2] == packing.n && shape[1] == gates * shape[2];
      if (!fits)
        fail("{}: weight packing {} (recurrent gates, {} direction(s) of {} gate(s), hidden {}) does not fit weight "
             "'{}' ({})",
             what, p, packing.k, gates, packing.n, spec.name, spec.type.toString());
      packed = Tensor(DType::F32, {kernels::recurrentWeightFloats(packing.k, gates, packing.n)});
      kernels::packRecurrentWeights(plain, packing.k, gates, packing.n, static_cast<float *>(packed.data()));
    } else {
      fail("{}: weight packing {} has unknown kind {}", what, p, packing.kind);
    }
    weightData[static_cast<size_t>(packing.weight)] = static_cast<unsigned char *>(packed.data());
    packedWeights.push_back(std::move(packed));
    if (!weightTensors.empty()) // the plain copy the loader gave (if not packed over) is no longer read
      weightTensors[static_cast<size_t>(packing.weight)] = Tensor();
  }
}

void Executable::Impl::checkRefs() {
  if (desc->num_launches < 0 || (desc->num_launches > 0 && !desc->launches))
    fail("{}: invalid launch list (count {})", what, desc->num_launches);
  checkInFile(file, desc->launches, sizeof(kiln_launch) * static_cast<uint64_t>(desc->num_launches), what,
              fmt::format("launch table ({} entries)", desc->num_launches));
  for (int32_t l = 0; l < desc->num_launches; ++l) {
    const kiln_launch &launch = desc->launches[l];
    checkStringInFile(file, launch.name, what, fmt::format("name of launch {}", l));
    launchNames.push_back(launch.name ? launch.name : "launch" + std::to_string(l));
    if (!launch.fn)
      fail("{}: launch {} ('{}') has no kernel function", what, l, launchNames.back());
    if (launch.first_ref < 0 || launch.num_refs < 0)
      fail("{}: launch {} ('{}') has invalid buffers [{}, +{})", what, l, launchNames.back(),
           launch.first_ref, launch.num_refs);
    numRefs = std::max(numRefs, int64_t(launch.first_ref) + launch.num_refs);
  }
  if (numRefs > 0 && !desc->refs)
    fail("{}: the launches use {} buffer references but the model has none", what, numRefs);
  checkInFile(file, desc->refs, sizeof(kiln_buffer_ref) * static_cast<uint64_t>(numRefs), what,
              fmt::format("buffer reference table ({} entries)", numRefs));

  // Every reference up to the last one used, gaps included, since each run computes them all.
  auto sizeOf = [&](const std::vector<TensorSpec> &specs, int32_t index, const char *role,
                    int64_t r) -> int64_t {
    if (index < 0 || static_cast<size_t>(index) >= specs.size())
      fail("{}: buffer reference {} names {} {}, but the model has {}", what, r, role, index,
           specs.size());
    return static_cast<int64_t>(specs[static_cast<size_t>(index)].type.byteSize());
  };
  for (int64_t r = 0; r < numRefs; ++r) {
    const kiln_buffer_ref &ref = desc->refs[r];
    int64_t size = 0;
    switch (ref.kind) {
    case KILN_ARENA:
      size = desc->arena_bytes;
      break;
    case KILN_INPUT:
      size = sizeOf(inputs, ref.index, "input", r);
      break;
    case KILN_OUTPUT:
      size = sizeOf(outputs, ref.index, "output", r);
      break;
    case KILN_WEIGHT:
      size = sizeOf(weights, ref.index, "weight", r);
      break;
    default:
      fail("{}: buffer reference {} has unknown kind {}", what, r, ref.kind);
    }
    if (ref.offset < 0 || ref.offset > size)
      fail("{}: buffer reference {} has offset {} outside its buffer of {} bytes", what, r,
           ref.offset, size);
  }
}

void Executable::Impl::bindWeights(std::vector<Tensor> supplied) {
  if (!supplied.empty() || weights.empty()) {
    // Weights given by the loader take precedence over any the model carries.
    if (supplied.size() != weights.size())
      fail("{}: the model has {} ({}), got {}", what, countOf(weights.size(), "weight"),
           namesOf(weights), supplied.size());
    for (size_t i = 0; i < weights.size(); ++i) {
      try {
        checkType("weight", weights[i], weights[i].type, supplied[i]);
      } catch (const Error &error) {
        fail("{}: {}", what, error.what()); // load errors name the file
      }
      weightData.push_back(static_cast<unsigned char *>(supplied[i].data()));
    }
    weightTensors = std::move(supplied);
    return;
  }
  if (!desc->weight_data)
    fail("{}: the model has {} ({}) and carries none; pass them when loading", what,
         countOf(weights.size(), "weight"), namesOf(weights));
  if (reinterpret_cast<uintptr_t>(desc->weight_data) % kWeightAlignment != 0)
    fail("{}: the weights it carries are not {}-byte aligned", what, kWeightAlignment);
  auto *base = static_cast<unsigned char *>(const_cast<void *>(desc->weight_data));
  uint64_t offset = 0, end = 0;
  for (const TensorSpec &spec : weights) {
    weightData.push_back(base + offset);
    // Each weight is under 2^63 bytes (readSpec checked its count), but not their sum.
    if (__builtin_add_overflow(offset, static_cast<uint64_t>(spec.type.byteSize()), &end))
      fail("{}: the weights it carries add up to more than 2^64 bytes", what);
    offset = (end + kWeightAlignment - 1) / kWeightAlignment * kWeightAlignment;
  }
  // The shapes decide how many bytes the kernels (and a training step's copies) read from here.
  checkInFile(file, base, end, what,
              fmt::format("weights' bytes ({}, {} bytes)", countOf(weights.size(), "weight"), end));
}

RunContext *Executable::Impl::acquireContext() {
  {
    std::lock_guard<std::mutex> lock(contextsMutex);
    if (!idleContexts.empty()) {
      RunContext *context = idleContexts.back();
      idleContexts.pop_back();
      return context;
    }
  }
  // First run on this many threads at once: a new context, allocated outside the lock.
  auto context = std::make_unique<RunContext>();
  if (desc->arena_bytes > 0) {
    context->arena.reset(static_cast<unsigned char *>(allocateBlock(static_cast<size_t>(desc->arena_bytes))));
    if (!context->arena)
      throw std::bad_alloc();
  }
  context->buffers.resize(static_cast<size_t>(numRefs));
  context->events.reserve(static_cast<size_t>(desc->num_launches));
  std::lock_guard<std::mutex> lock(contextsMutex);
  contexts.push_back(std::move(context));
  idleContexts.reserve(contexts.size());
  return contexts.back().get();
}

void Executable::Impl::releaseContext(RunContext *context) {
  std::lock_guard<std::mutex> lock(contextsMutex);
  idleContexts.push_back(context);
}

void Executable::Impl::execute(const std::vector<Tensor> &inputValues, std::vector<Tensor> &outputValues,
                               int64_t rows, const std::function<void(int64_t)> *afterLaunch) {
  if (!tiles.tiled()) {
    runLaunches(inputValues, outputValues, -1, rt, afterLaunch);
    return;
  }
  // Whole rounds of tiles run side by side, one per thread on the serial table, so that each
  // tile's working set stays in its core's caches and no kernel pays for a fork and join (a
  // thread come free takes over another's unstarted tiles). What is left runs one tile after
  // another with the whole pool. A caller that watches launches (afterLaunch) gets every tile
  // in order, and its calls during the last one, when each launch's outputs are complete.
  const int64_t count = rows / tiles.tile;
  const int threads = pool->numThreads();
  const int64_t sideBySide = afterLaunch || threads <= 1 ? 0 : count / threads * threads;
  if (sideBySide > 0) {
    std::exception_ptr error;
    std::mutex errorMutex;
    auto chunk = [&](int64_t begin, int64_t end) {
      try {
        for (int64_t t = begin; t < end; ++t)
          runLaunches(inputValues, outputValues, t, serialRt, nullptr);
      } catch (...) { // a run context's allocation; chunks must not throw
        std::lock_guard<std::mutex> lock(errorMutex);
        error = std::current_exception();
      }
    };
    pool->parallelForBalanced(
        sideBySide, 1, [](void *ctx, int64_t begin, int64_t end) { (*static_cast<decltype(chunk) *>(ctx))(begin, end); },
        &chunk);
    if (error)
      std::rethrow_exception(error);
  }
  for (int64_t t = sideBySide; t < count; ++t)
    runLaunches(inputValues, outputValues, t, rt, t + 1 == count ? afterLaunch : nullptr);
}

void Executable::Impl::runLaunches(const std::vector<Tensor> &inputValues, std::vector<Tensor> &outputValues,
                                   int64_t tile, const kiln_rt &runtime,
                                   const std::function<void(int64_t)> *afterLaunch) {
  RunContext *context = acquireContext();
  // Kernels are C functions and cannot throw, but a guard keeps the context from leaking if
  // anything above them ever does.
  struct Release {
    Impl &impl;
    RunContext *context;
    ~Release() { impl.releaseContext(context); }
  } release{*this, context};

  // Tile t reads and writes rows [t*T, (t+1)*T): one contiguous run of each batched input and
  // of each output, since the batch is axis 0 and the buffers' specs are one tile's.
  void **buffers = context->buffers.data();
  for (int64_t r = 0; r < numRefs; ++r) {
    const kiln_buffer_ref &ref = desc->refs[r];
    unsigned char *base = nullptr;
    switch (ref.kind) {
    case KILN_ARENA:
      base = context->arena.get();
      break;
    case KILN_INPUT:
      // Kernels never write their inputs; the ABI's one pointer type is not const.
      base = static_cast<unsigned char *>(const_cast<void *>(inputValues[ref.index].data()));
      if (base && tile > 0 && tiles.batched[ref.index])
        base += tile * static_cast<int64_t>(inputs[ref.index].type.byteSize());
      break;
    case KILN_OUTPUT:
      base = static_cast<unsigned char *>(outputValues[ref.index].data());
      if (base && tile > 0)
        base += tile * static_cast<int64_t>(outputs[ref.index].type.byteSize());
      break;
    case KILN_WEIGHT:
      base = weightData[static_cast<size_t>(ref.index)];
      break;
    }
    // A zero-byte buffer may have no storage at all; its kernels never dereference it.
    buffers[r] = base ? base + ref.offset : nullptr;
  }

  const kiln_rt *table = &runtime;
  const kiln_launch *launches = desc->launches;
  int32_t numLaunches = desc->num_launches;
  if (!profiling.load(std::memory_order_relaxed)) {
    if (afterLaunch == nullptr) {
      for (int32_t l = 0; l < numLaunches; ++l)
        launches[l].fn(table, buffers + launches[l].first_ref);
      return;
    }
    for (int32_t l = 0; l < numLaunches; ++l) {
      launches[l].fn(table, buffers + launches[l].first_ref);
      (*afterLaunch)(l);
    }
    return;
  }
  context->events.clear();
  uint32_t thread = Profiler::threadIndex();
  for (int32_t l = 0; l < numLaunches; ++l) {
    int64_t start = Profiler::nowNs();
    launches[l].fn(table, buffers + launches[l].first_ref);
    context->events.push_back(Profiler::Event{l, thread, start, Profiler::nowNs() - start});
    if (afterLaunch != nullptr)
      (*afterLaunch)(l);
  }
  profiler->record(context->events.data(), context->events.size());
}

// --- Executable --------------------------------------------------------------------------

bool isSharedObjectFile(const std::string &path) {
  if (path.size() >= 3 && path.compare(path.size() - 3, 3, ".so") == 0)
    return true;
  char magic[4] = {};
  std::ifstream file(path, std::ios::binary);
  return file.read(magic, sizeof magic) && magic[0] == 0x7f && magic[1] == 'E' && magic[2] == 'L' && magic[3] == 'F';
}

Executable::Executable(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;

const Executable::Impl &Executable::impl() const {
  if (!impl_)
    fail("use of a moved-from Executable");
  return *impl_;
}

Executable Executable::load(const std::string &soPath, std::vector<Tensor> weights,
                            Options options, const std::string &symbol) {
  // Without a slash dlopen searches the library path instead of opening the file meant.
  std::string path = soPath.find('/') == std::string::npos ? "./" + soPath : soPath;
  checkSegmentsInFile(path, soPath);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *reason = dlerror();
    fail("cannot load model '{}': {}", soPath, reason ? reason : "unknown error");
  }
  std::shared_ptr<void> library(handle, [](void *h) { dlclose(h); });
  dlerror();
  auto entry = reinterpret_cast<kiln_model_fn>(dlsym(handle, symbol.c_str()));
  if (!entry)
    fail("'{}' is not a kiln model: it exports no '{}' symbol", soPath, symbol);
  const kiln_model_desc *desc = entry();
  if (!desc)
    fail("'{}': {}() returned no model description", soPath, symbol);
  const std::string what = "model '" + soPath + "'";
  LoadedObject file = LoadedObject::of(handle, what);
  checkInFile(&file, desc, sizeof *desc, what, "model description");
  Executable executable = fromDescription(*desc, std::move(weights), std::move(options), what, &file);
  executable.impl_->library = std::move(library);
  return executable;
}

Executable Executable::fromDescription(const kiln_model_desc &desc, std::vector<Tensor> weights,
                                       Options options, const std::string &what) {
  return fromDescription(desc, std::move(weights), std::move(options), what, nullptr);
}

Executable Executable::fromDescription(const kiln_model_desc &desc, std::vector<Tensor> weights, Options options,
                                       const std::string &what, const LoadedObject *file) {
  auto impl = std::make_unique<Impl>();
  impl->what = what;
  impl->desc = &desc;
  impl->file = file;
  impl->readDescription(std::move(weights));
  impl->file = nullptr; // only loading reads the description's tables
  impl->pool = options.pool ? std::move(options.pool) : defaultThreadPool();
  impl->rt = makeKernelRuntime(*impl->pool);
  impl->serialRt = makeSerialKernelRuntime();
  impl->profiler = std::make_unique<Profiler>(impl->launchNames);
  impl->profiling.store(options.profile);
  return Executable(std::move(impl));
}

const std::vector<TensorSpec> &Executable::inputs() const { return impl().declaredInputs; }
const std::vector<TensorSpec> &Executable::outputs() const { return impl().declaredOutputs; }
const std::vector<TensorSpec> &Executable::weights() const { return impl().weights; }
int64_t Executable::numLaunches() const { return impl().desc->num_launches; }
int64_t Executable::arenaBytes() const {
  const Impl &im = impl();
  return im.desc->arena_bytes * (im.tiles.tiled() ? im.pool->numThreads() : 1);
}
int64_t Executable::batchTile() const { return impl().tiles.tile; }
int Executable::numThreads() const { return impl().pool->numThreads(); }

const std::string &Executable::launchName(int64_t launch) const {
  const Impl &im = impl();
  if (launch < 0 || launch >= static_cast<int64_t>(im.launchNames.size()))
    fail("launch {} does not exist; the model has {}", launch, im.launchNames.size());
  return im.launchNames[static_cast<size_t>(launch)];
}

std::vector<Tensor> Executable::run(const std::vector<Tensor> &inputs) const {
  impl(); // a moved-from executable fails before anything is allocated
  int64_t rows = impl_->tiles.rowsOf(impl_->inputs, inputs);
  std::vector<Tensor> outputs;
  outputs.reserve(impl_->outputs.size());
  for (const TensorSpec &spec : impl_->outputs)
    outputs.emplace_back(impl_->tiles.outputType(spec, rows));
  impl_->execute(inputs, outputs, rows);
  return outputs;
}

std::map<std::string, Tensor> Executable::run(const std::map<std::string, Tensor> &inputs) const {
  const Impl &im = impl();
  for (const auto &entry : inputs) {
    const std::string &name = entry.first;
    auto known = std::find_if(im.declaredInputs.begin(), im.declaredInputs.end(),
                              [&](const TensorSpec &spec) { return spec.name == name; });
    if (known == im.declaredInputs.end())
      fail("unknown input '{}'; the model's inputs are {}", name, namesOf(im.declaredInputs));
  }
  std::vector<Tensor> ordered;
  for (const TensorSpec &spec : im.declaredInputs) {
    auto found = inputs.find(spec.name);
    if (found == inputs.end())
      fail("missing input '{}' ({})", spec.name, spec.type.toString());
    ordered.push_back(found->second);
  }
  std::vector<Tensor> results = run(ordered);
  std::map<std::string, Tensor> named;
  for (size_t i = 0; i < results.size(); ++i)
    named.emplace(im.outputs[i].name, std::move(results[i]));
  return named;
}

void Executable::runInto(const std::vector<Tensor> &inputs, std::vector<Tensor> &outputs,
                         const std::function<void(int64_t)> &afterLaunch) const {
  impl();
  int64_t rows = impl_->tiles.rowsOf(impl_->inputs, inputs);
  impl_->tiles.checkOutputs(impl_->outputs, outputs, rows);
  impl_->execute(inputs, outputs, rows, afterLaunch ? &afterLaunch : nullptr);
}

int64_t Executable::lastLaunchOfOutput(int64_t output) const {
  const Impl &im = impl();
  if (output < 0 || output >= static_cast<int64_t>(im.outputs.size()))
    fail("output {} does not exist; the model has {}", output, countOf(im.outputs.size(), "output"));
  for (int32_t l = im.desc->num_launches; l-- > 0;) {
    const kiln_launch &launch = im.desc->launches[l];
    for (int32_t r = launch.first_ref; r < launch.first_ref + launch.num_refs; ++r)
      if (im.desc->refs[r].kind == KILN_OUTPUT && im.desc->refs[r].index == output)
        return l;
  }
  return -1;
}

void Executable::setProfiling(bool on) {
  impl();
  impl_->profiling.store(on, std::memory_order_relaxed);
}

bool Executable::profiling() const { return impl().profiling.load(std::memory_order_relaxed); }

Profiler &Executable::profiler() const { return *impl().profiler; }

} // namespace kiln::runtime
