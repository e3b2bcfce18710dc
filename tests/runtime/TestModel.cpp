// A tiny compiled model written by hand, the way codegen emits one: plain C ABI, no kiln
// library. It computes
//     t = x + bias + shift   (bias f32[256] broadcast over the rows, shift a scalar input)
//     y = relu(t)
// as two launches, "k0_add" writing t into the arena and "k1_relu" reading it back, so a run
// goes through every kind of buffer reference: input, weight, arena (at a non-zero offset),
// output. Both kernels split their rows over rt->parallel_for, so concurrent runs exercise the
// thread pool too. The model also carries its weights (weight_data), as an ahead-of-time
// compiled one does: bias[j] = (j % 7 - 3) * 0.25.
//
// tests/CMakeLists.txt builds it as shared objects (MODULE libraries) in variants chosen by
// KILN_TEST_MODEL_VARIANT: 1 the model, 2 the same declaring ABI version KILN_ABI_VERSION + 1,
// 3 the same exporting its description under another name. The runtime tests' glob also
// compiles this file into kiln_runtime_tests, where the variant is undefined and it is empty.
#ifdef KILN_TEST_MODEL_VARIANT

#include <array>
#include <cstddef>

#include "runtime/KernelAbi.h"

namespace {

constexpr int64_t kRows = 8, kCols = 256;
// t lives at this arena offset, after a gap the kernels must not touch.
constexpr int64_t kArenaOffset = 128;
constexpr int64_t kArenaBytes = kArenaOffset + kRows * kCols * 4;

struct AddArgs {
  const float *x, *bias, *shift;
  float *t;
};

void addRows(void *ctx, int64_t begin, int64_t end) {
  const AddArgs &args = *static_cast<const AddArgs *>(ctx);
  for (int64_t row = begin; row < end; ++row)
    for (int64_t col = 0; col < kCols; ++col)
      args.t[row * kCols + col] = args.x[row * kCols + col] + args.bias[col] + *args.shift;
}

// Buffers: x, shift, bias, then the result t.
void addKernel(const kiln_rt *rt, void *const *buffers) {
  AddArgs args{static_cast<const float *>(buffers[0]), static_cast<const float *>(buffers[2]),
               static_cast<const float *>(buffers[1]), static_cast<float *>(buffers[3])};
  rt->parallel_for(rt, kRows, 1, addRows, &args);
}

struct ReluArgs {
  const float *t;
  float *y;
};

void reluRows(void *ctx, int64_t begin, int64_t end) {
  const ReluArgs &args = *static_cast<const ReluArgs *>(ctx);
  for (int64_t i = begin * kCols; i < end * kCols; ++i)
    args.y[i] = args.t[i] > 0.0f ? args.t[i] : 0.0f;
}

// Buffers: t, then the result y.
void reluKernel(const kiln_rt *rt, void *const *buffers) {
  ReluArgs args{static_cast<const float *>(buffers[0]), static_cast<float *>(buffers[1])};
  rt->parallel_for(rt, kRows, 1, reluRows, &args);
}

const int64_t kMatrixShape[] = {kRows, kCols};
const int64_t kBiasShape[] = {kCols};
const kiln_tensor_desc kInputs[] = {{"x", "f32", 2, kMatrixShape}, {"shift", "f32", 0, nullptr}};
const kiln_tensor_desc kOutputs[] = {{"y", "f32", 2, kMatrixShape}};
const kiln_tensor_desc kWeights[] = {{"bias", "f32", 1, kBiasShape}};

const kiln_buffer_ref kRefs[] = {
    {KILN_INPUT, 0, 0},            // k0_add: x
    {KILN_INPUT, 1, 0},            //         shift
    {KILN_WEIGHT, 0, 0},           //         bias
    {KILN_ARENA, 0, kArenaOffset}, //         t
    {KILN_ARENA, 0, kArenaOffset}, // k1_relu: t
    {KILN_OUTPUT, 0, 0},           //          y
};
const kiln_launch kLaunches[] = {{addKernel, "k0_add", 0, 4}, {reluKernel, "k1_relu", 4, 2}};

// Computed at compile time: a model's data must need no static constructor.
constexpr std::array<float, kCols> makeBias() {
  std::array<float, kCols> bias{};
  for (size_t j = 0; j < bias.size(); ++j)
    bias[j] = static_cast<float>(static_cast<int>(j % 7) - 3) * 0.25f;
  return bias;
}
alignas(64) constexpr std::array<float, kCols> kBiasData = makeBias();

#if KILN_TEST_MODEL_VARIANT == 2
constexpr int32_t kAbiVersion = KILN_ABI_VERSION + 1;
#else
constexpr int32_t kAbiVersion = KILN_ABI_VERSION;
#endif

const kiln_model_desc kModel = {
    kAbiVersion, 2,        1,         1,     2,           kInputs,
    kOutputs,    kWeights, kLaunches, kRefs, kArenaBytes, kBiasData.data(),
    0,           nullptr, // no weight packings
};

} // namespace

#if KILN_TEST_MODEL_VARIANT == 3
extern "C" const kiln_model_desc *kiln_model_renamed(void) { return &kModel; }
#else
extern "C" const kiln_model_desc *kiln_model(void) { return &kModel; }
#endif

#endif // KILN_TEST_MODEL_VARIANT
