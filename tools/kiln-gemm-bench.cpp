// kiln-gemm-bench: GFLOP/s of kiln's precompiled kernels (runtime/kernels/).
//
//   kiln-gemm-bench [--threads N] [--reps R] [--cpu-time] [--cold] [--gelu] [SIZES...]
//       SGEMM, default sizes 256 512 1024 2048. A size N is a square product; MxNxK is an
//       M x K by K x N product with B prepacked and a bias per column, as a compiled model runs
//       a linear layer (transformers: 197x3072x768 is ViT-B/16's first FFN product); --gelu
//       adds the GELU post op of such an FFN.
//   kiln-gemm-bench --conv [--threads N] [--reps R] [--cpu-time] [--cold] [--only TEXT]
//       ResNet-50's common convolutions, depthwise and grouped ones, batch 1 (--only: those whose
//       name contains TEXT, e.g. "3x3/2", so that a profiler sees one layer)
//   kiln-gemm-bench --pool [--threads N] [--reps R] [--cpu-time] [--cold] [--only TEXT]
//       max and average pools of ResNet's stem, GoogLeNet's and Inception-v3's, batch 1
//   kiln-gemm-bench --winograd [--threads N] [--reps R] [--cpu-time] [--cold] [--only TEXT]
//       the 3x3 stride-1 layers of ResNet-18/50 (batch 1 and 8) and VGG16 by Winograd F(2x2, 3x3)
//       and F(4x4, 3x3), weights transformed ahead as compiled models have them, which of the
//       two conv2d's gate picks, and conv2d with plain weights (the GEMM where the gate says
//       F0): the data behind the gate's tables in Conv2dWinogradPlan.cpp
//
// --int8 runs qgemm instead of SGEMM on the square sizes: u8 x s8 products summed in int32
// (AVX-512 VNNI) and dequantized to f32, B prepacked as at load; GOP/s count 2 per product.
//
// --precision bf16 runs the GEMMs and GEMM-computed convolutions with bf16 operands
// (KILN_PRECISION_BF16), as models compiled with kiln-run --precision bf16 do.
//
// Each figure is the median of R timed runs (default: as many as fit in ~0.6 s, at least 5)
// after one warm-up run. --cold evicts the caches before each run. --cpu-time times the
// calling thread's CPU time instead of wall time: on a machine shared with other jobs it
// discounts the time slices they take (1 thread only).
// Threads come from kiln's own ThreadPool, as compiled models run them. (A pool of this tool's
// own, one fixed chunk per thread, made the 2-thread stride-2 convolutions look no faster than
// 1-thread ones: 1.3-1.4 ms where models, and now this tool, see 0.95-1.0 ms.)
#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "runtime/KernelRuntime.h"
#include "runtime/ThreadPool.h"
#include "runtime/kernels/Kernels.h"

namespace {

std::vector<float> randomVector(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size);
  for (float &x : v)
    x = dist(rng);
  return v;
}

bool useCpuTime = false;
int32_t precision = KILN_PRECISION_F32; // --precision
// --cold: before each timed run, write a buffer larger than the caches, so that the operands
// come from DRAM as a large model's weights do (ResNet-50's are 100 MB; in this tool they
// would otherwise stay in L2/L3 from one repetition to the next).
bool coldCaches = false;
std::vector<float> evictionBuffer;

void evictCaches() {
  if (!coldCaches)
    return;
  evictionBuffer.resize(size_t{64} << 20 >> 2); // 64 MiB: twice a Zen 4 CCD's L3
  for (float &x : evictionBuffer)
    x += 1.0f;
}
std::string onlyLayers; // --only: run the layers whose name contains this

double now() {
  if (useCpuTime) {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Median seconds of `run` over reps timed runs (reps <= 0: as many as fit in ~0.6 s, >= 5).
template <typename Fn> double medianSeconds(Fn &&run, int reps) {
  auto time = [&] {
    evictCaches();
    const double start = now();
    run();
    return now() - start;
  };
  const double first = time(); // warm-up: page faults, packing buffers
  if (reps <= 0)
    reps = std::clamp(static_cast<int>(0.6 / std::max(first, 1e-6)), 5, 200);
  std::vector<double> times;
  for (int r = 0; r < reps; ++r)
    times.push_back(time());
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void benchGemm(const kiln_rt &rt, int64_t size, int reps) {
  const size_t elements = static_cast<size_t>(size * size);
  std::vector<float> a = randomVector(elements, 1), b = randomVector(elements, 2), c(elements);
  kiln_gemm_args args{};
  args.m = args.n = args.k = size;
  args.batch = 1;
  args.a = a.data(), args.lda = size;
  args.b = b.data(), args.ldb = size;
  args.c = c.data(), args.ldc = size;
  args.precision = precision;
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::gemm(&rt, &args); }, reps);
  std::printf("sgemm %5lld  threads %d  %8.3f ms  %7.1f GFLOP/s\n", static_cast<long long>(size),
              rt.num_threads, seconds * 1e3, 2.0 * size * size * size / seconds * 1e-9);
}

/// A linear layer's product: M x K activations by a K x N weight prepacked as at load
/// (KILN_GEMM_B_PANELS, where N allows), plus a bias and, with `gelu`, GELU as post ops.
void benchLinear(const kiln_rt &rt, int64_t m, int64_t n, int64_t k, bool gelu, int reps) {
  std::vector<float> a = randomVector(static_cast<size_t>(m * k), 1), b = randomVector(static_cast<size_t>(k * n), 2);
  std::vector<float> bias = randomVector(static_cast<size_t>(n), 3), c(static_cast<size_t>(m * n));
  kiln_gemm_args args{};
  args.m = m, args.n = n, args.k = k, args.batch = 1;
  args.a = a.data(), args.lda = k;
  args.ldb = n;
  const bool panels = n % kiln::runtime::kernels::kGemmBPanelWidth == 0;
  std::vector<float> packed;
  if (panels) {
    packed.resize(b.size());
    kiln::runtime::kernels::packGemmB(b.data(), k, n, n, 1, packed.data());
    args.b_layout = KILN_GEMM_B_PANELS;
  }
  args.b = panels ? packed.data() : b.data();
  args.c = c.data(), args.ldc = n;
  args.precision = precision;
  args.post.bias = bias.data();
  args.post.activation = gelu ? KILN_ACTIVATION_GELU : KILN_ACTIVATION_NONE;
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::gemm(&rt, &args); }, reps);
  std::printf("sgemm %lldx%lldx%lld%s%s  threads %d  %8.3f ms  %7.1f GFLOP/s\n", static_cast<long long>(m),
              static_cast<long long>(n), static_cast<long long>(k), panels ? " packed" : "", gelu ? " gelu" : "",
              rt.num_threads, seconds * 1e3, 2.0 * m * n * k / seconds * 1e-9);
}

void benchQGemm(const kiln_rt &rt, int64_t size, int reps) {
  const size_t elements = static_cast<size_t>(size * size);
  std::vector<uint8_t> a(elements);
  std::vector<int8_t> b(elements);
  std::mt19937 rng(3);
  for (uint8_t &x : a)
    x = static_cast<uint8_t>(rng() & 0xFF);
  for (int8_t &x : b)
    x = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<int8_t> packed(static_cast<size_t>(kiln::runtime::kernels::qgemmPackedBytes(size, size)));
  kiln::runtime::kernels::packQGemmB(b.data(), size, size, size, 1, packed.data());
  std::vector<float> scales(static_cast<size_t>(size), 0.01f), c(elements);
  kiln_qgemm_args args{};
  args.m = args.n = args.k = size;
  args.a = a.data(), args.lda = size, args.a_zero = 128, args.a_scale = 0.02f;
  args.b = packed.data(), args.b_packed = 1, args.b_scales = scales.data(), args.b_per_column = 1;
  args.c = c.data(), args.ldc = size;
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::qgemm(&rt, &args); }, reps);
  std::printf("qgemm %5lld  threads %d  %8.3f ms  %7.1f GOP/s\n", static_cast<long long>(size), rt.num_threads,
              seconds * 1e3, 2.0 * size * size * size / seconds * 1e-9);
}

/// A square r x r convolution of n images, padded r/2 on every side (pointers unset).
kiln_conv2d_args convShape(int64_t n, int64_t c, int64_t hw, int64_t k, int64_t r, int64_t stride, int64_t groups) {
  kiln_conv2d_args args{};
  args.n = n, args.c = c, args.h = args.w = hw;
  args.k = k, args.r = args.s = r;
  args.stride_h = args.stride_w = stride;
  args.pad_top = args.pad_left = r / 2;
  args.dilation_h = args.dilation_w = 1;
  args.groups = groups;
  args.oh = args.ow = (hw + 2 * (r / 2) - r) / stride + 1;
  return args;
}

void benchConv(const kiln_rt &rt, const char *name, int64_t c, int64_t hw, int64_t k, int64_t r,
               int64_t stride, int reps, int64_t groups = 1, int64_t batch = 1) {
  if (std::string(name).find(onlyLayers) == std::string::npos)
    return;
  kiln_conv2d_args args = convShape(batch, c, hw, k, r, stride, groups);
  std::vector<float> x = randomVector(static_cast<size_t>(batch * c * hw * hw), 1);
  std::vector<float> w = randomVector(static_cast<size_t>(k * (c / groups) * r * r), 2);
  std::vector<float> y(static_cast<size_t>(batch * k * args.oh * args.ow));
  args.x = x.data(), args.weights = w.data(), args.y = y.data();
  args.precision = precision;
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::conv2d(&rt, &args); }, reps);
  const double flops = 2.0 * batch * k * (c / groups) * r * r * args.oh * args.ow;
  std::printf("conv %-28s threads %d  %8.3f ms  %7.1f GFLOP/s\n", name, rt.num_threads, seconds * 1e3,
              flops / seconds * 1e-9);
}

/// One 3x3 stride-1 pad-1 layer by each Winograd variant, its weights transformed ahead.
void benchWinograd(const kiln_rt &rt, int64_t n, int64_t c, int64_t hw, int64_t k, int reps) {
  char name[64];
  std::snprintf(name, sizeof name, "3x3 %lld->%lld %lldx%lld b%lld", static_cast<long long>(c),
                static_cast<long long>(k), static_cast<long long>(hw), static_cast<long long>(hw),
                static_cast<long long>(n));
  if (std::string(name).find(onlyLayers) == std::string::npos)
    return;
  kiln_conv2d_args args = convShape(n, c, hw, k, 3, 1, 1);
  std::vector<float> x = randomVector(static_cast<size_t>(n * c * hw * hw), 1);
  std::vector<float> w = randomVector(static_cast<size_t>(k * c * 9), 2);
  std::vector<float> y(static_cast<size_t>(n * k * hw * hw));
  args.x = x.data(), args.y = y.data();
  const double flops = 2.0 * static_cast<double>(n * k * c * 9 * hw * hw);
  std::printf("winograd %-26s threads %d", name, rt.num_threads);
  double seconds[2] = {};
  for (int tile : {2, 4}) {
    std::vector<float> u(static_cast<size_t>(kiln::runtime::kernels::winogradWeightFloats(k, c, tile)));
    kiln::runtime::kernels::packWinogradWeights(w.data(), k, c, tile, u.data());
    args.weights = u.data();
    args.weights_layout = tile == 4 ? KILN_CONV_WEIGHTS_WINOGRAD_F4 : KILN_CONV_WEIGHTS_WINOGRAD_F2;
    seconds[tile / 4] = medianSeconds([&] { kiln::runtime::kernels::conv2d(&rt, &args); }, reps);
    std::printf("  F%d %7.3f ms %6.1f GFLOP/s", tile, seconds[tile / 4] * 1e3, flops / seconds[tile / 4] * 1e-9);
  }
  // The plain weights take the path the gate picks for them: the GEMM when it says F0.
  args.weights = w.data(), args.weights_layout = KILN_CONV_WEIGHTS_PLAIN;
  const double plain = medianSeconds([&] { kiln::runtime::kernels::conv2d(&rt, &args); }, reps);
  std::printf("  F2/F4 %.2f  gate F%d (stored F%d)  plain %7.3f ms\n", seconds[0] / seconds[1],
              kiln::runtime::kernels::convWinogradTile(args, false), kiln::runtime::kernels::convWinogradTile(args, true),
              plain * 1e3);
}

void benchPool(const kiln_rt &rt, const char *name, int64_t c, int64_t h, int64_t kernel, int64_t stride, int64_t pad,
               bool ceilMode, bool isMax, int reps, int64_t batch = 1) {
  if (!onlyLayers.empty() && std::string(name).find(onlyLayers) == std::string::npos)
    return;
  auto outputSize = [&](int64_t in) {
    const int64_t excess = in + 2 * pad - kernel;
    int64_t out = (ceilMode ? (excess + stride - 1) / stride : excess / stride) + 1;
    if (ceilMode && (out - 1) * stride >= in + pad)
      --out;
    return out;
  };
  const int64_t oh = outputSize(h);
  std::vector<float> x = randomVector(static_cast<size_t>(batch * c * h * h), 1);
  std::vector<float> y(static_cast<size_t>(batch * c * oh * oh));
  kiln_pool2d_args args{};
  args.n = batch, args.c = c, args.h = args.w = h, args.oh = args.ow = oh;
  args.kernel_h = args.kernel_w = kernel, args.stride_h = args.stride_w = stride;
  args.pad_top = args.pad_left = pad, args.dilation_h = args.dilation_w = 1;
  args.is_max = isMax, args.count_include_pad = 1;
  args.x = x.data(), args.y = y.data();
  const double seconds = medianSeconds([&] { kiln::runtime::kernels::pool2d(&rt, &args); }, reps);
  const double bytes = 4.0 * static_cast<double>(x.size() + y.size());
  std::printf("%-34s threads %d  %8.4f ms  %6.1f GB/s\n", name, rt.num_threads, seconds * 1e3, bytes / seconds * 1e-9);
}

int usage() {
  std::fprintf(stderr, "usage: kiln-gemm-bench [--threads N] [--reps R] [--cpu-time] [--cold] [--precision f32|bf16] "
                       "[--gelu] [--int8 | --conv | --pool | --winograd [--only TEXT]] [SIZES...]\n"
                       "  SIZES: N (square) or MxNxK (B prepacked, with a bias, as a linear layer)\n");
  return 2;
}

} // namespace

int main(int argc, char **argv) {
  int threads = 1, reps = 0;
  bool conv = false, winograd = false, int8 = false, pools = false;
  bool gelu = false;
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, 3>> products; // MxNxK
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--threads" || arg == "--reps") && i + 1 < argc) {
      const int value = std::atoi(argv[++i]);
      if (value < (arg == "--threads" ? 1 : 0))
        return usage();
      (arg == "--threads" ? threads : reps) = value;
    } else if (arg == "--only" && i + 1 < argc) {
      onlyLayers = argv[++i];
    } else if (arg == "--precision" && i + 1 < argc) {
      const std::string name = argv[++i];
      if (name != "f32" && name != "bf16")
        return usage();
      precision = name == "bf16" ? KILN_PRECISION_BF16 : KILN_PRECISION_F32;
    } else if (arg == "--gelu") {
      gelu = true;
    } else if (arg == "--int8") {
      int8 = true;
    } else if (arg == "--conv") {
      conv = true;
    } else if (arg == "--pool") {
      pools = true;
    } else if (arg == "--winograd") {
      winograd = true;
    } else if (arg == "--cold") {
      coldCaches = true;
    } else if (arg == "--cpu-time") {
      useCpuTime = true;
    } else {
      std::array<int64_t, 3> dims{};
      size_t count = 0;
      const char *at = arg.c_str();
      for (;;) {
        char *end = nullptr;
        const long long size = std::strtoll(at, &end, 10);
        if (end == at || size < 1 || size > 16384 || count == dims.size())
          return usage();
        dims[count++] = size;
        if (*end == '\0')
          break;
        if (*end != 'x')
          return usage();
        at = end + 1;
      }
      if (count == 1)
        sizes.push_back(dims[0]);
      else if (count == 3)
        products.push_back(dims);
      else
        return usage();
    }
  }
  if (sizes.empty() && products.empty())
    sizes = {256, 512, 1024, 2048};
  if (!products.empty() && (int8 || conv || winograd || pools)) {
    std::fprintf(stderr, "kiln-gemm-bench: MxNxK sizes are f32 or bf16 GEMMs only\n");
    return 2;
  }
  if (useCpuTime && threads != 1) {
    std::fprintf(stderr, "kiln-gemm-bench: --cpu-time needs --threads 1\n");
    return 2;
  }

  kiln::runtime::ThreadPool pool(threads);
  const kiln_rt rt = kiln::runtime::makeKernelRuntime(pool);

  if (winograd) {
    for (int64_t n : {1, 8}) { // ResNet-18/50 stages 1-4
      benchWinograd(rt, n, 64, 56, 64, reps);
      benchWinograd(rt, n, 128, 28, 128, reps);
      benchWinograd(rt, n, 256, 14, 256, reps);
      benchWinograd(rt, n, 512, 7, 512, reps);
    }
    benchWinograd(rt, 1, 64, 224, 64, reps); // VGG16
    benchWinograd(rt, 1, 128, 112, 128, reps);
    benchWinograd(rt, 1, 256, 56, 256, reps);
    benchWinograd(rt, 1, 512, 28, 512, reps);
    benchWinograd(rt, 1, 512, 14, 512, reps);
    benchWinograd(rt, 1, 256, 7, 256, reps); // deep layers on small images
    benchWinograd(rt, 1, 128, 7, 128, reps);
    benchWinograd(rt, 1, 512, 8, 512, reps);
    benchWinograd(rt, 1, 64, 8, 64, reps);
    // SqueezeNet's expand layers: few input channels on 55x55 to 13x13 maps.
    benchWinograd(rt, 1, 16, 55, 64, reps);
    benchWinograd(rt, 1, 32, 27, 128, reps);
    benchWinograd(rt, 1, 48, 13, 192, reps);
    benchWinograd(rt, 1, 64, 13, 256, reps);
    // Wider than 512 x 512: FCN/DeepLab heads and deep layers on small maps.
    benchWinograd(rt, 1, 2048, 32, 512, reps);
    benchWinograd(rt, 1, 1024, 14, 1024, reps);
    benchWinograd(rt, 1, 1024, 7, 1024, reps);
    benchWinograd(rt, 1, 2048, 7, 1024, reps);
    return 0;
  }
  if (pools) {
    benchPool(rt, "max 3x3/2 64ch 112x112 (stem)", 64, 112, 3, 2, 1, false, true, reps);
    benchPool(rt, "max 3x3/2 ceil 64ch 112x112", 64, 112, 3, 2, 0, true, true, reps);
    benchPool(rt, "max 3x3/2 ceil 64ch 111x111 (SqueezeNet)", 64, 111, 3, 2, 0, true, true, reps);
    benchPool(rt, "max 3x3/2 ceil 192ch 56x56", 192, 56, 3, 2, 0, true, true, reps);
    benchPool(rt, "max 3x3/2 ceil 480ch 28x28", 480, 28, 3, 2, 0, true, true, reps);
    benchPool(rt, "max 3x3/1 192ch 28x28", 192, 28, 3, 1, 1, false, true, reps);
    benchPool(rt, "max 3x3/1 480ch 14x14", 480, 14, 3, 1, 1, false, true, reps);
    benchPool(rt, "max 3x3/1 832ch 7x7", 832, 7, 3, 1, 1, false, true, reps);
    benchPool(rt, "avg 3x3/1 192ch 35x35", 192, 35, 3, 1, 1, false, false, reps);
    benchPool(rt, "avg 3x3/1 768ch 17x17", 768, 17, 3, 1, 1, false, false, reps);
    benchPool(rt, "avg 3x3/1 2048ch 8x8", 2048, 8, 3, 1, 1, false, false, reps);
    benchPool(rt, "max 2x2/2 256ch 56x56", 256, 56, 2, 2, 0, false, true, reps);
    // SqueezeNet's at batch 8 (the zoo's squeezenet_b8), whose planes outgrow the caches.
    benchPool(rt, "max 3x3/2 ceil 64ch 111x111 b8", 64, 111, 3, 2, 0, true, true, reps, 8);
    benchPool(rt, "max 3x3/2 ceil 128ch 55x55 b8", 128, 55, 3, 2, 0, true, true, reps, 8);
    benchPool(rt, "max 3x3/2 ceil 256ch 27x27 b8", 256, 27, 3, 2, 0, true, true, reps, 8);
    return 0;
  }
  if (conv) {
    benchConv(rt, "3x3 64->64 56x56", 64, 56, 64, 3, 1, reps);
    benchConv(rt, "1x1 256->64 56x56", 256, 56, 64, 1, 1, reps);
    benchConv(rt, "1x1 64->256 56x56", 64, 56, 256, 1, 1, reps);
    benchConv(rt, "3x3 128->128 28x28", 128, 28, 128, 3, 1, reps);
    benchConv(rt, "3x3 256->256 14x14", 256, 14, 256, 3, 1, reps);
    benchConv(rt, "3x3 512->512 7x7", 512, 7, 512, 3, 1, reps);
    benchConv(rt, "1x1 1024->256 14x14", 1024, 14, 256, 1, 1, reps);
    benchConv(rt, "1x1 256->1024 14x14", 256, 14, 1024, 1, 1, reps);
    benchConv(rt, "1x1 2048->512 7x7", 2048, 7, 512, 1, 1, reps);
    benchConv(rt, "1x1 512->2048 7x7", 512, 7, 2048, 1, 1, reps);
    // MobileNetV2's pointwise layers: few input channels, or 7x7 outputs.
    benchConv(rt, "1x1 16->96 112x112", 16, 112, 96, 1, 1, reps);
    benchConv(rt, "1x1 24->144 56x56", 24, 56, 144, 1, 1, reps);
    benchConv(rt, "1x1 144->24 56x56", 144, 56, 24, 1, 1, reps);
    benchConv(rt, "1x1 96->576 14x14", 96, 14, 576, 1, 1, reps);
    benchConv(rt, "1x1 160->960 7x7", 160, 7, 960, 1, 1, reps);
    benchConv(rt, "1x1 960->160 7x7", 960, 7, 160, 1, 1, reps);
    benchConv(rt, "1x1 320->1280 7x7", 320, 7, 1280, 1, 1, reps);
    benchConv(rt, "3x3/2 128->128 56x56", 128, 56, 128, 3, 2, reps);
    benchConv(rt, "3x3/2 256->256 28x28", 256, 28, 256, 3, 2, reps);
    benchConv(rt, "3x3/2 512->512 14x14", 512, 14, 512, 3, 2, reps);
    benchConv(rt, "1x1/2 512->1024 28x28", 512, 28, 1024, 1, 2, reps);
    benchConv(rt, "7x7/2 3->64 224x224", 3, 224, 64, 7, 2, reps);
    benchConv(rt, "depthwise 3x3 256 28x28", 256, 28, 256, 3, 1, reps, 256); // MobileNet-like
    benchConv(rt, "depthwise 3x3/2 512 14x14", 512, 14, 512, 3, 2, reps, 512);
    // MobileNetV2's depthwise layers at 224x224 (the zoo's mobilenet_v2_b1), and 5x5 ones.
    benchConv(rt, "depthwise 3x3 32 112x112", 32, 112, 32, 3, 1, reps, 32);
    benchConv(rt, "depthwise 3x3/2 96 112x112", 96, 112, 96, 3, 2, reps, 96);
    benchConv(rt, "depthwise 3x3 144 56x56", 144, 56, 144, 3, 1, reps, 144);
    benchConv(rt, "depthwise 3x3 960 7x7", 960, 7, 960, 3, 1, reps, 960);
    benchConv(rt, "depthwise 5x5 672 14x14", 672, 14, 672, 5, 1, reps, 672);
    // MnasNet's and EfficientNet's: 5x5, stride 2, planes from 56x56 down to 7x7.
    benchConv(rt, "depthwise 3x3/2 144 56x56", 144, 56, 144, 3, 2, reps, 144);
    benchConv(rt, "depthwise 3x3 384 14x14", 384, 14, 384, 3, 1, reps, 384);
    benchConv(rt, "depthwise 5x5/2 72 56x56", 72, 56, 72, 5, 2, reps, 72);
    benchConv(rt, "depthwise 5x5/2 240 28x28", 240, 28, 240, 5, 2, reps, 240);
    benchConv(rt, "depthwise 5x5 120 28x28", 120, 28, 120, 5, 1, reps, 120);
    benchConv(rt, "depthwise 5x5 1152 7x7", 1152, 7, 1152, 5, 1, reps, 1152);
    // At batch 8 the planes of a layer outgrow L2 (MobileNetV2's, the zoo's mobilenet_v2_b8).
    benchConv(rt, "depthwise 3x3/2 96 112x112 b8", 96, 112, 96, 3, 2, reps, 96, 8);
    benchConv(rt, "depthwise 3x3 192 28x28 b8", 192, 28, 192, 3, 1, reps, 192, 8);
    benchConv(rt, "depthwise 3x3 576 14x14 b8", 576, 14, 576, 3, 1, reps, 576, 8);
    benchConv(rt, "1x1 32->16 112x112 b8", 32, 112, 16, 1, 1, reps, 1, 8);
    // MobileNetV2's 64 -> 384 pointwise layer (its others are listed above).
    benchConv(rt, "1x1 64->384 14x14", 64, 14, 384, 1, 1, reps);
    // ResNeXt-50 32x4d's grouped layers: 4, 8, 16 and 32 channels per group.
    benchConv(rt, "grouped 3x3 128 56x56 g32", 128, 56, 128, 3, 1, reps, 32);
    benchConv(rt, "grouped 3x3/2 256 56x56 g32", 256, 56, 256, 3, 2, reps, 32);
    benchConv(rt, "grouped 3x3 256 28x28 g32", 256, 28, 256, 3, 1, reps, 32);
    benchConv(rt, "grouped 3x3 512 14x14 g32", 512, 14, 512, 3, 1, reps, 32);
    benchConv(rt, "grouped 3x3 1024 7x7 g32", 1024, 7, 1024, 3, 1, reps, 32);
    // The same at batch 8 (the zoo's resnext50_b8), whose inputs outgrow the caches.
    benchConv(rt, "grouped 3x3 128 56x56 g32 b8", 128, 56, 128, 3, 1, reps, 32, 8);
    benchConv(rt, "grouped 3x3/2 256 56x56 g32 b8", 256, 56, 256, 3, 2, reps, 32, 8);
    benchConv(rt, "grouped 3x3 256 28x28 g32 b8", 256, 28, 256, 3, 1, reps, 32, 8);
    benchConv(rt, "grouped 3x3 512 14x14 g32 b8", 512, 14, 512, 3, 1, reps, 32, 8);
    benchConv(rt, "grouped 3x3 1024 7x7 g32 b8", 1024, 7, 1024, 3, 1, reps, 32, 8);
    return 0;
  }
  for (int64_t size : sizes)
    int8 ? benchQGemm(rt, size, reps) : benchGemm(rt, size, reps);
  for (const std::array<int64_t, 3> &mnk : products)
    benchLinear(rt, mnk[0], mnk[1], mnk[2], gelu, reps);
  return 0;
}
