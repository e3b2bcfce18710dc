// Executable over the hand-written model of TestModel.cpp (y = relu(x + bias + shift), two
// launches through the arena): results with supplied and carried weights, by position, by name
// and into caller-provided outputs; every input, weight and load error; a malformed
// description of each kind; 8 threads x 50 concurrent runs; no heap allocation on a warm
// runInto; and the run() overhead of a one-kernel graph.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <thread>

#include "core/Error.h"
#include "runtime/Executable.h"
#include "runtime/KernelRuntime.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Kernels.h"

using namespace kiln;
using kiln::runtime::Executable;

// --- Counting every heap allocation of the process ------------------------------------------

namespace {
std::atomic<int64_t> gAllocations{0};

void *countedAlloc(std::size_t size, std::size_t alignment) {
  gAllocations.fetch_add(1, std::memory_order_relaxed);
  void *p = nullptr;
  if (alignment <= alignof(std::max_align_t))
    p = std::malloc(size ? size : 1);
  else if (posix_memalign(&p, alignment, size ? size : 1) != 0)
    p = nullptr;
  return p;
}

// Out of line: inlined into the operator deletes below, GCC pairs its free() with the
// operator new it sees at the call site and warns (-Wmismatched-new-delete).
__attribute__((noinline)) void countedFree(void *p) noexcept { std::free(p); }
} // namespace

void *operator new(std::size_t size) {
  if (void *p = countedAlloc(size, 0))
    return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t size) { return operator new(size); }
void *operator new(std::size_t size, std::align_val_t align) {
  if (void *p = countedAlloc(size, static_cast<std::size_t>(align)))
    return p;
  throw std::bad_alloc();
}
void *operator new[](std::size_t size, std::align_val_t align) { return operator new(size, align); }
void *operator new(std::size_t size, const std::nothrow_t &) noexcept {
  return countedAlloc(size, 0);
}
void *operator new[](std::size_t size, const std::nothrow_t &) noexcept {
  return countedAlloc(size, 0);
}
void *operator new(std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
  return countedAlloc(size, static_cast<std::size_t>(align));
}
void *operator new[](std::size_t size, std::align_val_t align, const std::nothrow_t &) noexcept {
  return countedAlloc(size, static_cast<std::size_t>(align));
}
void operator delete(void *p) noexcept { countedFree(p); }
void operator delete[](void *p) noexcept { countedFree(p); }
void operator delete(void *p, std::size_t) noexcept { countedFree(p); }
void operator delete[](void *p, std::size_t) noexcept { countedFree(p); }
void operator delete(void *p, std::align_val_t) noexcept { countedFree(p); }
void operator delete[](void *p, std::align_val_t) noexcept { countedFree(p); }
void operator delete(void *p, std::size_t, std::align_val_t) noexcept { countedFree(p); }
void operator delete[](void *p, std::size_t, std::align_val_t) noexcept { countedFree(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { countedFree(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { countedFree(p); }
void operator delete(void *p, std::align_val_t, const std::nothrow_t &) noexcept { countedFree(p); }
void operator delete[](void *p, std::align_val_t, const std::nothrow_t &) noexcept {
  countedFree(p);
}

namespace {

constexpr int64_t kRows = 8, kCols = 256;
const Shape kMatrix = {kRows, kCols};

/// The bias the model carries: (j % 7 - 3) / 4.
std::vector<float> carriedBias() {
  std::vector<float> bias(kCols);
  for (int64_t j = 0; j < kCols; ++j)
    bias[static_cast<size_t>(j)] = static_cast<float>(j % 7 - 3) * 0.25f;
  return bias;
}

Tensor biasTensor(const std::vector<float> &bias) {
  Tensor t(DType::F32, {kCols});
  std::copy(bias.begin(), bias.end(), t.dataAs<float>());
  return t;
}

/// relu(x + bias + shift), added in the model's order.
Tensor expectedOutput(const Tensor &x, const Tensor &shift, const std::vector<float> &bias) {
  Tensor y(DType::F32, kMatrix);
  const float *in = x.dataAs<float>();
  float s = *shift.dataAs<float>();
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    float t = in[i] + bias[static_cast<size_t>(i % kCols)] + s;
    y.dataAs<float>()[i] = t > 0.0f ? t : 0.0f;
  }
  return y;
}

std::vector<Tensor> randomInputs(uint64_t seed) {
  return {randomTensor(TensorType{DType::F32, kMatrix}, seed),
          Tensor::scalar(DType::F32, static_cast<double>(seed % 5) * 0.125 - 0.25)};
}

/// The message of the kiln::Error that `body` throws ("" if it throws none).
template <typename Body> std::string errorOf(Body body) {
  try {
    body();
  } catch (const Error &error) {
    return error.what();
  }
  return "";
}

Executable loadModel(std::vector<Tensor> weights = {}) {
  return Executable::load(KILN_TEST_MODEL_PATH, std::move(weights));
}

} // namespace

TEST(ExecutableTest, KernelTableReachesThePoolAndTheKernels) {
  runtime::ThreadPool pool(2);
  kiln_rt rt = runtime::makeKernelRuntime(pool);
  EXPECT_EQ(rt.abi_version, KILN_ABI_VERSION);
  EXPECT_EQ(rt.num_threads, 2);
  EXPECT_EQ(rt.impl, &pool);

  std::vector<int> hits(10, 0);
  rt.parallel_for(
      &rt, 10, 1,
      [](void *ctx, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          (*static_cast<std::vector<int> *>(ctx))[static_cast<size_t>(i)] += 1;
      },
      &hits);
  EXPECT_EQ(hits, std::vector<int>(10, 1));

  // Wiring only (the kernels have their own tests): small integer problems, exact in f32.
  // [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
  float a[] = {1, 2, 3, 4, 5, 6}, b[] = {1, 0, 0, 1, 1, 1}, c[4] = {};
  kiln_gemm_args gemm{};
  gemm.m = 2, gemm.n = 2, gemm.k = 3, gemm.batch = 1;
  gemm.a = a, gemm.lda = 3, gemm.b = b, gemm.ldb = 2, gemm.c = c, gemm.ldc = 2;
  rt.gemm(&rt, &gemm);
  EXPECT_EQ(std::vector<float>(c, c + 4), (std::vector<float>{4, 5, 10, 11}));

  // 2x2 max pooling of a 2x2 image.
  float image[] = {3, -1, 7, 2}, pooled[1] = {};
  kiln_pool2d_args pool2d{};
  pool2d.n = 1, pool2d.c = 1, pool2d.h = 2, pool2d.w = 2, pool2d.oh = 1, pool2d.ow = 1;
  pool2d.kernel_h = 2, pool2d.kernel_w = 2, pool2d.stride_h = 1, pool2d.stride_w = 1;
  pool2d.dilation_h = 1, pool2d.dilation_w = 1, pool2d.is_max = 1;
  pool2d.x = image, pool2d.y = pooled;
  rt.pool2d(&rt, &pool2d);
  EXPECT_EQ(pooled[0], 7.0f);

  // A 1x1 convolution of the same image with weight 2: every pixel doubled.
  float weight[] = {2}, convolved[4] = {};
  kiln_conv2d_args conv{};
  conv.n = 1, conv.c = 1, conv.h = 2, conv.w = 2, conv.k = 1, conv.r = 1, conv.s = 1;
  conv.oh = 2, conv.ow = 2, conv.stride_h = 1, conv.stride_w = 1, conv.dilation_h = 1;
  conv.dilation_w = 1, conv.groups = 1, conv.x = image, conv.weights = weight, conv.y = convolved;
  rt.conv2d(&rt, &conv);
  EXPECT_EQ(std::vector<float>(convolved, convolved + 4), (std::vector<float>{6, -2, 14, 4}));
}

TEST(ExecutableTest, DescribesTheModel) {
  Executable exe = loadModel();
  ASSERT_EQ(exe.inputs().size(), 2u);
  EXPECT_EQ(exe.inputs()[0].name, "x");
  EXPECT_EQ(exe.inputs()[0].type.toString(), "f32[8,256]");
  EXPECT_EQ(exe.inputs()[1].name, "shift");
  EXPECT_EQ(exe.inputs()[1].type.toString(), "f32[]");
  ASSERT_EQ(exe.outputs().size(), 1u);
  EXPECT_EQ(exe.outputs()[0].name, "y");
  ASSERT_EQ(exe.weights().size(), 1u);
  EXPECT_EQ(exe.weights()[0].type.toString(), "f32[256]");
  EXPECT_EQ(exe.numLaunches(), 2);
  EXPECT_EQ(exe.launchName(0), "k0_add");
  EXPECT_EQ(exe.launchName(1), "k1_relu");
  EXPECT_EQ(exe.arenaBytes(), 128 + kRows * kCols * 4);
  EXPECT_NE(errorOf([&] { exe.launchName(2); }).find("launch 2 does not exist"), std::string::npos);
}

TEST(ExecutableTest, RunsWithTheWeightsItCarries) {
  Executable exe = loadModel();
  std::vector<Tensor> inputs = randomInputs(1);
  std::vector<Tensor> outputs = exe.run(inputs);
  ASSERT_EQ(outputs.size(), 1u);
  EXPECT_TRUE(outputs[0].identical(expectedOutput(inputs[0], inputs[1], carriedBias())));
}

TEST(ExecutableTest, SuppliedWeightsTakePrecedence) {
  std::vector<float> bias(kCols);
  for (int64_t j = 0; j < kCols; ++j)
    bias[static_cast<size_t>(j)] = static_cast<float>(j) / 64.0f - 2.0f;
  Executable exe = loadModel({biasTensor(bias)});
  std::vector<Tensor> inputs = randomInputs(2);
  EXPECT_TRUE(exe.run(inputs)[0].identical(expectedOutput(inputs[0], inputs[1], bias)));
}

TEST(ExecutableTest, RunsByNameAndIntoGivenOutputs) {
  Executable exe = loadModel();
  std::vector<Tensor> inputs = randomInputs(3);
  Tensor want = expectedOutput(inputs[0], inputs[1], carriedBias());

  std::map<std::string, Tensor> named = exe.run({{"shift", inputs[1]}, {"x", inputs[0]}});
  ASSERT_EQ(named.size(), 1u);
  ASSERT_TRUE(named.count("y"));
  EXPECT_TRUE(named["y"].identical(want));

  Tensor y(DType::F32, kMatrix);
  std::vector<Tensor> outputs = {y};
  exe.runInto(inputs, outputs);
  EXPECT_TRUE(y.identical(want)) << "runInto writes into the caller's storage";
}

TEST(ExecutableTest, CallsBackBetweenLaunchesAndKnowsWhenAnOutputIsFinal) {
  // add writes the arena, relu (launch 1) the output: the output is final after launch 1 and
  // untouched after launch 0 (what a data-parallel caller relies on to send it early).
  Executable exe = loadModel();
  EXPECT_EQ(exe.lastLaunchOfOutput(0), 1);
  EXPECT_NE(errorOf([&] { exe.lastLaunchOfOutput(1); }).find("output 1 does not exist"), std::string::npos);
  std::vector<Tensor> inputs = randomInputs(4);
  Tensor want = expectedOutput(inputs[0], inputs[1], carriedBias());
  Tensor y(DType::F32, kMatrix), sentinel(DType::F32, kMatrix);
  for (int64_t i = 0; i < y.numElements(); ++i)
    sentinel.setDouble(i, -7.0);
  std::memcpy(y.data(), sentinel.data(), y.byteSize());
  std::vector<Tensor> outputs = {y};
  std::vector<int64_t> launches;
  std::vector<bool> final;
  exe.runInto(inputs, outputs, [&](int64_t launch) {
    launches.push_back(launch);
    final.push_back(y.identical(want));
    if (launch == 0)
      EXPECT_TRUE(y.identical(sentinel)) << "the output was written before its launch";
  });
  EXPECT_EQ(launches, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(final, (std::vector<bool>{false, true}));
}

TEST(ExecutableTest, InputErrorsNameTheInput) {
  Executable exe = loadModel();
  std::vector<Tensor> inputs = randomInputs(4);
  EXPECT_EQ(errorOf([&] {
              exe.run({Tensor(DType::F32, {1, kCols}), inputs[1]});
            }),
            "input 'x': expected f32[8,256], got f32[1,256]");
  EXPECT_EQ(errorOf([&] {
              exe.run({Tensor(DType::F64, kMatrix), inputs[1]});
            }),
            "input 'x': expected f32[8,256], got f64[8,256]");
  EXPECT_EQ(errorOf([&] {
              exe.run({inputs[0], Tensor(DType::F32, {1})});
            }),
            "input 'shift': expected f32[], got f32[1]");
  EXPECT_EQ(errorOf([&] {
              exe.run({inputs[0], Tensor()});
            }),
            "input 'shift': expected f32[], got an undefined tensor");
  EXPECT_EQ(errorOf([&] { exe.run({inputs[0]}); }), "the model has 2 inputs ('x', 'shift'), got 1");
  EXPECT_EQ(errorOf([&] {
              exe.run(std::map<std::string, Tensor>{{"x", inputs[0]}});
            }),
            "missing input 'shift' (f32[])");
  EXPECT_EQ(errorOf([&] {
              exe.run(std::map<std::string, Tensor>{
                  {"x", inputs[0]}, {"shift", inputs[1]}, {"scale", inputs[1]}});
            }),
            "unknown input 'scale'; the model's inputs are 'x', 'shift'");

  std::vector<Tensor> wrongOutputs = {Tensor(DType::F32, {kRows})};
  EXPECT_EQ(errorOf([&] { exe.runInto(inputs, wrongOutputs); }),
            "output 'y': expected f32[8,256], got f32[8]");
  std::vector<Tensor> noOutputs;
  EXPECT_EQ(errorOf([&] { exe.runInto(inputs, noOutputs); }),
            "the model has 1 output ('y'), got 0");
}

TEST(ExecutableTest, WeightErrorsNameTheWeight) {
  EXPECT_EQ(errorOf([] { loadModel({Tensor(DType::F32, {kCols + 1})}); }),
            "model '" KILN_TEST_MODEL_PATH "': weight 'bias': expected f32[256], got f32[257]");
  EXPECT_EQ(errorOf([] {
              loadModel({biasTensor(carriedBias()), biasTensor(carriedBias())});
            }),
            "model '" KILN_TEST_MODEL_PATH "': the model has 1 weight ('bias'), got 2");
}

TEST(ExecutableTest, LoadErrorsNameTheFile) {
  std::string missing = errorOf([] { Executable::load("/nonexistent/kiln-model.so"); });
  EXPECT_NE(missing.find("cannot load model '/nonexistent/kiln-model.so'"), std::string::npos)
      << missing;

  std::string textPath = ::testing::TempDir() + "kiln-not-a-model.so";
  std::ofstream(textPath) << "not an ELF file\n";
  std::string notElf = errorOf([&] { Executable::load(textPath); });
  EXPECT_NE(notElf.find("cannot load model '" + textPath + "'"), std::string::npos) << notElf;
  std::remove(textPath.c_str());

  EXPECT_EQ(errorOf([] { Executable::load(KILN_TEST_NOSYM_PATH); }),
            "'" KILN_TEST_NOSYM_PATH "' is not a kiln model: it exports no 'kiln_model' symbol");
  EXPECT_EQ(errorOf([] { Executable::load(KILN_TEST_ABI_PATH); }),
            fmt::format("model '{}' was built for kiln ABI version {}, but this runtime "
                        "implements version {}; recompile the model",
                        KILN_TEST_ABI_PATH, KILN_ABI_VERSION + 1, KILN_ABI_VERSION));
}

// --- Malformed descriptions ---------------------------------------------------------------

namespace {

void copyKernel(const kiln_rt *, void *const *buffers) {
  *static_cast<float *>(buffers[1]) = *static_cast<const float *>(buffers[0]) + 1.0f;
}

/// A one-kernel model, y = x + 1 over f32[1], that each test then damages.
struct TinyModel {
  int64_t shape[1] = {1};
  kiln_tensor_desc input{"x", "f32", 1, shape};
  kiln_tensor_desc output{"y", "f32", 1, shape};
  kiln_tensor_desc weight{"w", "f32", 1, shape};
  kiln_tensor_desc twoInputs[2] = {input, input};
  std::array<kiln_buffer_ref, 2> refs{{{KILN_INPUT, 0, 0}, {KILN_OUTPUT, 0, 0}}};
  kiln_launch launch{copyKernel, "k0_copy", 0, 2};
  kiln_model_desc desc{KILN_ABI_VERSION, 1,       1,       0,           1, &input,
                       &output,          nullptr, &launch, refs.data(), 0, nullptr, 0, nullptr};
  kiln_weight_packing packing{0, KILN_PACK_GEMM_B_PANELS, 1, 64, 64, 1};

  TinyModel() = default;
  TinyModel(const TinyModel &) = delete; // desc points into this object

  std::string error() {
    return errorOf([&] { Executable::fromDescription(desc, {}, {}, "tiny"); });
  }
};

struct Damage {
  void (*apply)(TinyModel &);
  const char *message;
};

const Damage kDamages[] = {
    {[](TinyModel &m) { m.input.dtype = "f31"; }, "tiny: input 'x' has unknown dtype 'f31'"},
    {[](TinyModel &m) { m.output.name = nullptr; }, "tiny: output 0 has no name"},
    {[](TinyModel &m) { m.shape[0] = -2; }, "tiny: input 'x': shape [-2] has a negative dimension -2"},
    {[](TinyModel &m) { m.input.shape = nullptr; },
     "tiny: input 'x' has an invalid shape (rank 1)"},
    {[](TinyModel &m) { m.input.rank = -1; }, "tiny: input 'x' has an invalid shape (rank -1)"},
    {[](TinyModel &m) { m.desc.inputs = m.twoInputs, m.desc.num_inputs = 2; },
     "tiny: two inputs are named 'x'"},
    {[](TinyModel &m) { m.desc.num_outputs = -1; }, "tiny: invalid output list (count -1)"},
    {[](TinyModel &m) { m.launch.fn = nullptr; },
     "tiny: launch 0 ('k0_copy') has no kernel function"},
    {[](TinyModel &m) { m.launch.num_refs = -1; },
     "tiny: launch 0 ('k0_copy') has invalid buffers [0, +-1)"},
    {[](TinyModel &m) { m.desc.launches = nullptr; }, "tiny: invalid launch list (count 1)"},
    {[](TinyModel &m) { m.desc.refs = nullptr; },
     "tiny: the launches use 2 buffer references but the model has none"},
    {[](TinyModel &m) { m.refs[0].index = 5; },
     "tiny: buffer reference 0 names input 5, but the model has 1"},
    {[](TinyModel &m) {
       m.refs[1] = {KILN_WEIGHT, 0, 0};
     },
     "tiny: buffer reference 1 names weight 0, but the model has 0"},
    {[](TinyModel &m) { m.refs[1].kind = 7; }, "tiny: buffer reference 1 has unknown kind 7"},
    {[](TinyModel &m) { m.refs[1].offset = 8; },
     "tiny: buffer reference 1 has offset 8 outside its buffer of 4 bytes"},
    {[](TinyModel &m) {
       m.refs[0] = {KILN_ARENA, 0, 1};
     },
     "tiny: buffer reference 0 has offset 1 outside its buffer of 0 bytes"},
    {[](TinyModel &m) { m.desc.arena_bytes = -1; }, "tiny: negative arena size -1"},
    {[](TinyModel &m) { m.desc.num_weights = 1, m.desc.weights = &m.weight; },
     "tiny: the model has 1 weight ('w') and carries none; pass them when loading"},
    {[](TinyModel &m) { m.desc.num_packings = 1; }, "tiny: invalid weight packing list (count 1)"},
    {[](TinyModel &m) { m.desc.num_packings = 1, m.desc.packings = &m.packing; },
     "tiny: weight packing 0 names weight 0, but the model has 0"},
};

} // namespace

TEST(ExecutableTest, WeightPackingsMustFitTheirWeight) {
  // A packing's reads must stay inside its weight: 1 x 64 elements of a weight of 1, or a stride
  // that walks past the end, are load errors, not reads out of bounds.
  TinyModel model;
  model.desc.num_weights = 1, model.desc.weights = &model.weight;
  model.desc.num_packings = 1, model.desc.packings = &model.packing;
  auto load = [&] { Executable::fromDescription(model.desc, {Tensor(DType::F32, {1})}, {}, "tiny"); };
  EXPECT_EQ(errorOf(load), "tiny: weight packing 0 (1 x 64, strides 64, 1) does not fit weight 'w' (f32[1])");
  int64_t wide[1] = {64};
  model.weight.shape = wide;
  model.packing.stride_n = 2;
  auto loadWide = [&] { Executable::fromDescription(model.desc, {Tensor(DType::F32, {64})}, {}, "tiny"); };
  EXPECT_EQ(errorOf(loadWide), "tiny: weight packing 0 (1 x 64, strides 64, 2) does not fit weight 'w' (f32[64])");
  model.packing.stride_n = 1;
  EXPECT_EQ(errorOf(loadWide), "");
  // In bounds, but with neither stride 1: not a layout the packer reads.
  int64_t twoRows[1] = {128};
  model.weight.shape = twoRows;
  model.packing.k = 2, model.packing.stride_k = 0, model.packing.stride_n = 2;
  auto loadTwoRows = [&] { Executable::fromDescription(model.desc, {Tensor(DType::F32, {128})}, {}, "tiny"); };
  EXPECT_EQ(errorOf(loadTwoRows), "tiny: weight packing 0 (2 x 64, strides 0, 2) does not fit weight 'w' (f32[128])");
  // A convolution's Winograd transform reads exactly a k x n x 3 x 3 weight.
  model.packing = {0, KILN_PACK_CONV_WINOGRAD_F2, 2, 64, 0, 0};
  EXPECT_EQ(errorOf(loadTwoRows),
            "tiny: weight packing 0 (Winograd F(2x2, 3x3), 2 x 64 x 3 x 3) does not fit weight 'w' (f32[128])");
  int64_t convShape[4] = {2, 64, 3, 3};
  model.weight.rank = 4, model.weight.shape = convShape;
  auto loadConv = [&] { Executable::fromDescription(model.desc, {Tensor(DType::F32, {2, 64, 3, 3})}, {}, "tiny"); };
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.kind = KILN_PACK_CONV_WINOGRAD_F4;
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.n = 32;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (Winograd F(4x4, 3x3), 2 x 32 x 3 x 3) does not fit "
                               "weight 'w' (f32[2,64,3,3])");
  // Tap-major convolution weights: exactly k x n x r x s (r, s in the strides).
  model.packing = {0, KILN_PACK_CONV_TAP_MAJOR, 2, 64, 3, 3};
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.stride_n = 5;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (tap-major convolution weights, 2 x 64 x 3 x 5) does not "
                               "fit weight 'w' (f32[2,64,3,3])");
  // Direct convolution panels: exactly k x n weights.
  model.packing = {0, KILN_PACK_CONV_DIRECT_PANELS, 2, 64 * 9, 0, 0};
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.n = 64 * 3;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (direct convolution panels, 2 x 192) does not fit weight "
                               "'w' (f32[2,64,3,3])");
  // bf16 convolution panels: exactly k x n weights, in groups that divide k.
  model.packing = {0, KILN_PACK_CONV_BF16_PANELS, 2, 64 * 9, 1, 0};
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.stride_k = 2;
  EXPECT_EQ(errorOf(loadConv), "");
  model.packing.stride_k = 0;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (bf16 convolution panels, 2 x 576) has 0 groups, not a "
                               "divisor of 2");
  model.packing.stride_k = 3;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (bf16 convolution panels, 2 x 576) has 3 groups, not a "
                               "divisor of 2");
  model.packing = {0, KILN_PACK_CONV_BF16_PANELS, 2, 64, 1, 0};
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (bf16 convolution panels, 2 x 64) does not fit weight 'w' "
                               "(f32[2,64,3,3])");
  model.packing = {0, KILN_PACK_CONV_WINOGRAD_F2_BF16, 2, 64, 0, 0};
  EXPECT_EQ(errorOf(loadConv), "");
  // The int8 GEMM's B: an i8 weight only.
  model.packing = {0, KILN_PACK_QGEMM_B, 2, 64 * 9, 64 * 9, 1};
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 (int8 GEMM, 2 x 576, strides 576, 1) does not fit weight 'w' "
                               "(f32[2,64,3,3])");
  model.packing.kind = 99;
  EXPECT_EQ(errorOf(loadConv), "tiny: weight packing 0 has unknown kind 99");
}

TEST(ExecutableTest, MalformedDescriptionsAreErrors) {
  EXPECT_EQ(TinyModel().error(), "") << "the undamaged model loads";
  for (const Damage &damage : kDamages) {
    TinyModel model;
    damage.apply(model);
    EXPECT_EQ(model.error(), damage.message);
  }
  // Names need to be unique only among inputs, among outputs and among weights.
  TinyModel sameName;
  sameName.output.name = "x";
  EXPECT_EQ(sameName.error(), "");
}

TEST(ExecutableTest, MovedFromExecutableIsAnError) {
  Executable exe = loadModel();
  Executable other = std::move(exe);
  EXPECT_EQ(errorOf([&] { exe.run(randomInputs(5)); }), "use of a moved-from Executable");
  EXPECT_EQ(other.outputs().size(), 1u);
}

TEST(ExecutableTest, ConcurrentRunsEachGetTheirOwnArena) {
  Executable exe = loadModel();
  constexpr int kThreads = 8, kCalls = 50;
  std::atomic<int> wrong{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int call = 0; call < kCalls; ++call) {
        try {
          std::vector<Tensor> inputs = randomInputs(static_cast<uint64_t>(1000 * t + call));
          Tensor want = expectedOutput(inputs[0], inputs[1], carriedBias());
          if (!exe.run(inputs)[0].identical(want))
            wrong.fetch_add(1);
        } catch (const std::exception &) {
          errors.fetch_add(1);
        }
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(ExecutableTest, WarmRunIntoAllocatesNothing) {
  Executable exe = loadModel();
  std::vector<Tensor> inputs = randomInputs(6);
  std::vector<Tensor> outputs = {Tensor(DType::F32, kMatrix)};
  exe.runInto(inputs, outputs); // creates this thread's arena
  int64_t before = gAllocations.load();
  for (int i = 0; i < 20; ++i)
    exe.runInto(inputs, outputs);
  int64_t after = gAllocations.load();
  EXPECT_EQ(after - before, 0);
  EXPECT_TRUE(outputs[0].identical(expectedOutput(inputs[0], inputs[1], carriedBias())));
  // The counter does see allocations: run() allocates its outputs.
  exe.run(inputs);
  EXPECT_GT(gAllocations.load(), after);
}

namespace {

const void *gWeightReadAt = nullptr; // where copyWeightKernel last read its weight

void copyWeightKernel(const kiln_rt *, void *const *buffers) {
  gWeightReadAt = buffers[1];
  std::memcpy(buffers[0], buffers[1], 128 * sizeof(float));
}

/// y = w as its kernel reads it: w, f32[64, 2], stored N x K (a 2 -> 64 nn.Linear weight) and
/// packed at load as gemm's B panels.
struct PackedWeightModel {
  int64_t outputShape[1] = {128}, weightShape[2] = {64, 2};
  kiln_tensor_desc output{"y", "f32", 1, outputShape};
  kiln_tensor_desc weight{"w", "f32", 2, weightShape};
  std::array<kiln_buffer_ref, 2> refs{{{KILN_OUTPUT, 0, 0}, {KILN_WEIGHT, 0, 0}}};
  kiln_launch launch{copyWeightKernel, "k0_copy_weight", 0, 2};
  kiln_weight_packing packing{0, KILN_PACK_GEMM_B_PANELS, 2, 64, 1, 2};
  kiln_model_desc desc{KILN_ABI_VERSION, 0,      1,          1, 1, nullptr,  &output,
                       &weight,          &launch, refs.data(), 0, nullptr, 1, &packing};
};

} // namespace

TEST(ExecutableTest, AWeightHeldAloneIsPackedOverItself) {
  PackedWeightModel model;
  Tensor plain = Tensor::fromDoubles(DType::F32, {64, 2}, std::vector<double>(128, 0));
  for (int i = 0; i < 128; ++i)
    plain.dataAs<float>()[i] = static_cast<float>(i);
  const Tensor original = plain.clone();
  std::vector<float> packed(128);
  runtime::kernels::packGemmB(original.dataAs<float>(), 2, 64, 1, 2, packed.data());
  auto expectPacked = [&](const Tensor &y) {
    ASSERT_EQ(y.numElements(), 128);
    EXPECT_EQ(std::vector<float>(y.dataAs<float>(), y.dataAs<float>() + 128), packed);
  };
  {
    // The caller keeps the weight: it is packed into a copy and stays as it was.
    Executable shared = Executable::fromDescription(model.desc, {plain}, {}, "packed");
    expectPacked(shared.run({})[0]);
    EXPECT_NE(gWeightReadAt, plain.data());
    EXPECT_TRUE(plain.identical(original));
  }
  // Handed over alone (not through an initializer list, whose elements are copied): packed
  // over its own storage, no second copy.
  const void *storage = plain.data();
  std::vector<Tensor> weights;
  weights.push_back(std::move(plain));
  Executable alone = Executable::fromDescription(model.desc, std::move(weights), {}, "packed");
  expectPacked(alone.run({})[0]);
  EXPECT_EQ(gWeightReadAt, storage);
}

TEST(ExecutableTest, RunOverheadOfOneKernelGraph) {
  TinyModel model;
  auto pool = std::make_shared<runtime::ThreadPool>(2);
  Executable exe = Executable::fromDescription(model.desc, {}, {pool, false}, "tiny");
  std::vector<Tensor> inputs = {Tensor::fromDoubles(DType::F32, {1}, {41})};
  std::vector<Tensor> outputs = {Tensor(DType::F32, {1})};

  auto timePerCall = [](int calls, auto &&body) {
    for (int i = 0; i < calls / 10; ++i)
      body();
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i)
      body();
    std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
    return elapsed.count() / calls;
  };
  double intoUs = timePerCall(100000, [&] { exe.runInto(inputs, outputs); });
  double runUs = timePerCall(100000, [&] { exe.run(inputs); });
  EXPECT_EQ(outputs[0].dataAs<float>()[0], 42.0f);
  // Printed, not asserted: speed is judged by the benchmark harness, never by a timed test.
  std::printf("[ overhead ] one-kernel graph: runInto %.3f us/call, run %.3f us/call\n", intoUs,
              runUs);
}
