#pragma once
// The C ABI between generated code and kiln's runtime. Generated kernels (codegen/, compiled
// into a shared object per model) and the runtime (runtime/, which loads them) meet only here:
// plain C structs and function pointers, so that a model compiled ahead of time runs with any
// build of the runtime of the same ABI version, and generated code never links against kiln.
//
//  - The runtime hands every kernel a `kiln_rt` table: its thread pool (parallel_for) and the
//    precompiled heavy kernels (GEMM, convolution and its weight gradient, pooling, recurrences)
//    in runtime/kernels/.
//  - Heavy kernels take an *epilogue*: a function the generated code defines for its fusion
//    group (bias, activation, residual add, scale), called on each output tile while it is in
//    cache, with the tile's coordinates so that it can index its own operands.
//  - A compiled model describes itself with `kiln_model_desc` (exported by the generated shared
//    object as `kiln_model`): its launch list, where each kernel's buffers live (arena offset,
//    graph input or output, weight), its inputs, outputs and weights.
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_ABI_VERSION 17

typedef struct kiln_rt kiln_rt;

/// Work item of parallel_for: handles [begin, end) of the iteration space.
typedef void (*kiln_range_fn)(void *ctx, int64_t begin, int64_t end);

/// Called on a finished tile of a contraction's output, before anything else reads it:
/// `tile` points at element (row0, col0) of output matrix `batch` (row-major, leading
/// dimension `ld`); the tile is `rows` x `cols`. It rewrites the tile in place (and may also
/// write other buffers of its group at the same coordinates). Runs on worker threads; tiles
/// never overlap.
typedef void (*kiln_epilogue_fn)(void *ctx, float *tile, int64_t ld, int64_t batch, int64_t row0,
                                 int64_t col0, int64_t rows, int64_t cols);

/// How a GEMM's B is laid out (kiln_gemm_args::b_layout).
enum kiln_gemm_b_layout {
  /// B[k*ldb + n], or B[n*ldb + k] when trans_b
  KILN_GEMM_B_PLAIN = 0,
  /// op(B) as the kernel's B panels: B[(n/64)*64*K + k*64 + n%64], N a multiple of 64; ldb
  /// and trans_b are unused. Matmul weights that only one kernel reads are packed so at load
  /// (kiln_weight_packing).
  KILN_GEMM_B_PANELS = 1,
  /// op(B) as the bf16 kernel's pair panels, b pointing at bf16 patterns (uint16): for each
  /// 64-column panel q, K rounded up to even rows taken in pairs (a last odd row paired with
  /// zeros), b16[((q*K2 + p)*64 + j%64)*2 + t] = bf16(op(B)(2p + t, j)), K2 = ceil(K/2). N a
  /// multiple of 64, stride_b 0 (one B), precision KILN_PRECISION_BF16. Matmul weights that
  /// only one kernel reads are stored so at load when the model asks for bf16: half the bytes,
  /// and no call rounds them again.
  KILN_GEMM_B_PAIR_PANELS_BF16 = 2
};

/// The precision a contraction multiplies in (kiln_gemm_args::precision,
/// kiln_conv2d_args::precision). Inputs, outputs and accumulation stay f32 either way.
enum kiln_precision {
  KILN_PRECISION_F32 = 0,
  /// Both operands rounded to bfloat16 (to nearest, ties to even) and their products summed
  /// in f32: AVX-512 BF16's vdpbf16ps, two products per lane per instruction. Opt-in only
  /// (kiln-run --precision bf16): it rounds off ~3 significant digits of every operand. The
  /// runtime uses it where it pays: GEMMs, and convolutions it computes as GEMMs (im2col and
  /// pointwise), of at least 16 rows and 16 columns (runtime/kernels/GemmDriver.h,
  /// bf16Pays); narrower products, Winograd, depthwise and direct convolutions stay f32.
  KILN_PRECISION_BF16 = 1
};

/// The activation of kiln_post_ops, as the reference evaluator computes it.
enum kiln_activation {
  KILN_ACTIVATION_NONE = 0,
  /// x > 0 ? x : 0, NaN kept (kiln's relu)
  KILN_ACTIVATION_RELU = 1,
  /// min(max(x, lo), hi), NaN kept (kiln's clip; ReLU6 is [0, 6])
  KILN_ACTIVATION_CLIP = 2,
  /// x * sigmoid(x) (SiLU, swish: EfficientNet's), with generated code's exp (within 2 ulp)
  KILN_ACTIVATION_SILU = 3,
  /// g = clip(x * alpha + beta, 0, 1) (kiln's hard_sigmoid, MobileNetV3's gates)
  KILN_ACTIVATION_HARD_SIGMOID = 4,
  /// g == 0 ? 0 : x * g, g the hard sigmoid of x (kiln's hard_swish: alpha 1/6, beta 1/2)
  KILN_ACTIVATION_HARD_SWISH = 5,
  /// (x / 2) (1 + erf(x / sqrt 2)), with generated code's erf (GELU: transformers' FFNs)
  KILN_ACTIVATION_GELU = 6
};

/// What gemm and conv2d apply to every output before the epilogue sees it:
///   y = activation(y + bias[channel])
/// where y already holds the addend of an accumulating convolution, and channel is a
/// convolution's output channel, a GEMM's output column (the bias of a linear layer); ReLU,
/// ReLU6 and other clips, SiLU, hard sigmoid, hard swish and GELU. Bias and
/// activation are each optional (all zero: nothing). The kernels apply them in registers as
/// they store a tile where they can (the blocked GEMM behind GEMMs and pointwise and im2col
/// convolutions), on the finished tile otherwise: codegen hands over an epilogue that is only
/// these, and then passes no epilogue at all. (A separate pass of a generated epilogue over
/// each tile cost ~10% of MobileNetV2, whose pointwise layers are short in K.)
typedef struct kiln_post_ops {
  const float *bias; /* may be NULL */
  int32_t activation; /* kiln_activation */
  float lo, hi;       /* KILN_ACTIVATION_CLIP's bounds */
  float alpha, beta;  /* the hard sigmoid's line (KILN_ACTIVATION_HARD_SIGMOID, _HARD_SWISH) */
} kiln_post_ops;

/// C[b] = op(A[b]) * op(B[b]) for b in [0, batch), f32, then the epilogue on every tile.
/// op(A) is M x K: A[m*lda + k], or A[k*lda + m] when trans_a. op(B) is K x N, laid out as
/// b_layout says. C[m*ldc + n]. A stride of 0 broadcasts one matrix over the batch.
typedef struct kiln_gemm_args {
  int64_t m, n, k, batch;
  const float *a;
  int64_t lda, stride_a;
  int32_t trans_a;
  const float *b;
  int64_t ldb, stride_b;
  int32_t trans_b;
  float *c;
  int64_t ldc, stride_c;
  kiln_epilogue_fn epilogue; /* may be NULL */
  void *epilogue_ctx;
  int32_t b_layout; /* kiln_gemm_b_layout */
  int32_t precision; /* kiln_precision */
  kiln_post_ops post; /* bias per column of C */
} kiln_gemm_args;

/// Where an int8 product writes its output quantized (the next layer's QuantizeLinear fused
/// into it): every output v, after the post ops, is stored as
///   q = saturate(round_half_even(v / scale) + zero)
/// saturate clamping to u8 (s8 when is_signed) and taking NaN to 0, exactly as generated code's
/// div, round, add and saturating cast compute it. q has the layout the f32 output would have;
/// with q set the kernel calls no epilogue and writes the f32 values (after the post ops) to c
/// or y only when keep_f32 (a layer whose float value a residual connection reads as well).
/// (As a generated epilogue on each f32 tile, this step took 0.40 of MobileNetV2's 0.54 ms
/// 16 -> 96 expand layer.)
typedef struct kiln_quantized_output {
  void *q; /* NULL: the output is f32, through c or y and the epilogue */
  int32_t is_signed;
  float scale, zero;
  int32_t keep_f32;
} kiln_quantized_output;

/// A residual an int8 product reads as the bytes of a quantized tensor (a QDQ model's
/// DequantizeLinear on its skip connection): q has the layout the f32 output would have, and
/// each output adds (q - zero) * scale, that product rounded to f32 on its own, exactly as
/// generated code's cast, sub and mul compute it, where kiln_qgemm_args::addend adds its f32.
/// A residual read so is a quarter of the bytes of an f32 one, and the layer that wrote it need
/// not keep its f32 value (ResNet-50's 1x1 expand layers on 28 x 28 and 14 x 14 moved 3 MB of
/// f32 per call and ran as slowly on two threads as on one).
typedef struct kiln_quantized_addend {
  const void *q; /* NULL: none */
  int32_t is_signed;
  float scale, zero;
} kiln_quantized_addend;

/// An int8 GEMM whose output is dequantized to f32 (ONNX's DequantizeLinear -> MatMul with
/// int8 operands, kiln's qmatmul): for m < M, n < N
///   acc = sum over k < K of (a[m*lda + k] - a_zero) * B[k][n]   (int32, exact)
///   c[m*ldc + n] = (float)acc * (a_scale * b_scales[b_per_column ? n : 0])
/// then the post ops (bias per column), then the epilogue on every tile, or, with
/// quantized.q, the requantisation instead. A is u8, or s8 when a_signed; B is s8, row-major
/// (B[k][n] = b[k*ldb + n]) or, with b_packed, prepacked as kiln::runtime::kernels::packQGemmB
/// writes it, which the runtime does at load for weights one kernel reads (KILN_PACK_QGEMM_B).
/// The products run on AVX-512 VNNI's vpdpbusd, four u8 x s8 products per int32 lane.
typedef struct kiln_qgemm_args {
  int64_t m, n, k;
  const void *a;
  int64_t lda;
  int32_t a_signed, a_zero;
  float a_scale;
  int32_t b_packed;
  int64_t ldb; /* row-major B only */
  const int8_t *b;
  const float *b_scales;
  int32_t b_per_column;
  float *c;
  int64_t ldc;
  kiln_epilogue_fn epilogue; /* may be NULL */
  void *epilogue_ctx;
  /* Nonzero (with an epilogue): C is only the epilogue's input; each tile goes to a small
     buffer of the calling thread (ld 64) instead of c, which is not written. */
  int32_t tile_in_scratch;
  kiln_post_ops post;
  /* NULL, or an f32 tensor laid out as the f32 output, added to every output after the bias
     and before the activation (a residual connection; no epilogue may be given with it). */
  const float *addend;
  /* The same residual as bytes (addend NULL then; no epilogue may be given with it). */
  kiln_quantized_addend addend_q;
  kiln_quantized_output quantized;
} kiln_qgemm_args;

/// An int8 2-D convolution whose output is dequantized to f32 (ONNX's DequantizeLinear ->
/// Conv with int8 operands, kiln's qconv): geometry as kiln_conv2d_args's (NCHW x
/// [n][c][h][w], weights [k][c/groups][r][s], output y [n][k][oh][ow]); for every output
///   acc = sum over taps of (x - x_zero) * w   (int32, exact; taps reading padding add 0)
///   y = (float)acc * (x_scale * w_scales[w_per_channel ? k : 0])
/// then the post ops (bias per output channel), then the epilogue on every tile, which sees
/// image `batch` as a K x (OH*OW) matrix, as conv2d's does, or, with quantized.q, the
/// requantisation instead. x is u8, or s8 when x_signed; weights are s8, plain
/// (weights_packed 0) or as kiln::runtime::kernels::packQConvWeights writes them, in tap order
/// (1) or channel-quad order (2), which the runtime does at load for weights one kernel reads
/// (KILN_PACK_QCONV_WEIGHTS); packed in the other order than the one the call reads
/// (qconvChannelQuadRows), they are repacked on every call. vpdpbusd products.
typedef struct kiln_qconv2d_args {
  int64_t n, c, h, w;
  int64_t k, r, s;
  int64_t oh, ow;
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, groups;
  const void *x;
  int32_t x_signed, x_zero;
  float x_scale;
  const int8_t *weights;
  int32_t weights_packed;
  int32_t w_per_channel;
  const float *w_scales;
  float *y;
  kiln_epilogue_fn epilogue; /* may be NULL */
  void *epilogue_ctx;
  /* Nonzero (with an epilogue): y is only the epilogue's input; each tile goes to a small
     buffer of the calling thread where qconv2d can (its product tiles), to y otherwise. */
  int32_t tile_in_scratch;
  kiln_post_ops post;
  /* NULL, or an f32 tensor laid out as the f32 output, added to every output after the bias
     and before the activation (a residual connection; no epilogue may be given with it). */
  const float *addend;
  /* The same residual as bytes (addend NULL then; no epilogue may be given with it). */
  kiln_quantized_addend addend_q;
  kiln_quantized_output quantized;
} kiln_qconv2d_args;

/// How a convolution's weights are laid out (kiln_conv2d_args::weights_layout).
enum kiln_conv_weights_layout {
  /// w[k][c/groups][r][s]
  KILN_CONV_WEIGHTS_PLAIN = 0,
  /// The Winograd F(2x2, 3x3) transform of a 3x3, stride-1, undilated, one-group
  /// convolution's weights, as the runtime's conv2d reads them: the weights of convolutions
  /// that conv2d computes with Winograd (kiln::runtime::kernels::convWinogradTile) and that
  /// only one kernel reads are transformed so once, at load (kiln_weight_packing), instead of
  /// on every call.
  KILN_CONV_WEIGHTS_WINOGRAD_F2 = 1,
  /// The same for Winograd F(4x4, 3x3).
  KILN_CONV_WEIGHTS_WINOGRAD_F4 = 2,
  /// Tap-major w[r][s][k][c]: each tap's K x C matrix contiguous, as the sparse-tap path
  /// (convolutions most of whose taps read padding, kiln::runtime::kernels::convSparseTaps)
  /// multiplies them; transformed so at load for one-group convolutions that only one kernel
  /// reads.
  KILN_CONV_WEIGHTS_TAP_MAJOR = 3,
  /// bf16 patterns (uint16) of w[o][d], the D = c/groups*r*s weights of each output channel
  /// o, each group's output channels as the GEMM driver's row panels (kiln::runtime::kernels::
  /// packConvBf16Panels). For the convolutions conv2d computes as GEMMs in bf16 (kiln::
  /// runtime::kernels::convBf16Panels); stored so at load for weights only that kernel reads.
  KILN_CONV_WEIGHTS_BF16_PANELS = 4,
  /// WINOGRAD_F2's transform as bf16 patterns (uint16), for the same convolutions in bf16
  /// (precision KILN_PRECISION_BF16, not exact): each of the 16 points' K x C matrices as rows
  /// of C rounded up to even (kiln::runtime::kernels::packWinogradWeightsBf16). F(4x4, 3x3)
  /// has none: its transforms amplify bf16's rounding to ~4% of the output (F2's: ~0.2%).
  KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16 = 5,
  /// W^T as the direct pixel-tile path streams it (kiln::runtime::kernels::convDirectPanels,
  /// packConvDirectPanels): panels of 64 output channels, each taps x its width, from plain
  /// one-group weights; stored so at load for weights only that convolution reads.
  KILN_CONV_WEIGHTS_DIRECT_PANELS = 6
};

/// 2-D convolution, NCHW input x[n][c][h][w], weights w[k][c/groups][r][s], output
/// y[n][k][oh][ow], f32. The epilogue sees output image `batch` = n as a K x (OH*OW) matrix
/// (row = output channel, col = oh*OW + ow, ld = OH*OW).
typedef struct kiln_conv2d_args {
  int64_t n, c, h, w;       /* input */
  int64_t k, r, s;          /* output channels, kernel height, width */
  int64_t oh, ow;           /* output spatial size (the caller computed it) */
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w, groups;
  const float *x, *weights;
  float *y;
  kiln_epilogue_fn epilogue; /* may be NULL */
  void *epilogue_ctx;
  int32_t weights_layout; /* kiln_conv_weights_layout */
  /* Nonzero: y holds an addend on entry, and the convolution is added to it before the
     epilogue sees it (a residual the output was planned over). Pointwise convolutions only
     (1x1 kernel, strides 1, pads 0); conv2d leaves y alone for any other. */
  int32_t accumulate;
  /* Nonzero: every output is the plain sum of its products, never a Winograd transform's
     (weights_layout must then be plain). Training steps ask for it: Winograd F(4x4, 3x3)
     rounds ~1e-5 off relative, which BatchNorm over a small batch and ReLU's kinks turn into
     gradients percent off (ResNet-18 at 4x3x64x64: layer4's up to 6%). */
  int32_t exact;
  int32_t precision; /* kiln_precision; with exact, f32 */
  kiln_post_ops post; /* bias per output channel */
} kiln_conv2d_args;

/// What kiln_pool2d_args pools: f32 through x and y, or u8 or s8 (max pooling only) through
/// x_bytes and y_bytes.
enum kiln_pool_element { KILN_POOL_F32 = 0, KILN_POOL_U8 = 1, KILN_POOL_S8 = 2 };

/// 2-D max or average pooling over NCHW f32 (pads count as -inf for max; for average they
/// count in the divisor when count_include_pad), or max pooling over NCHW bytes (pads and
/// empty windows give the type's lowest value, as -inf does in f32).
typedef struct kiln_pool2d_args {
  int64_t n, c, h, w, oh, ow;
  int64_t kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int32_t is_max, count_include_pad;
  const float *x;
  float *y;
  int32_t element; /* kiln_pool_element */
  const void *x_bytes;
  void *y_bytes;
} kiln_pool2d_args;

/// The weight gradient of a 2-D convolution with one group, f32, NCHW x and dy:
///   dw[k][c][r][s] = sum over n, oh, ow of dy[n][k][oh][ow] * x[n][c][ih][iw],
///   ih = oh*stride_h + r*dilation_h - pad_top, iw = ow*stride_w + s*dilation_w - pad_left,
/// a term being 0 where (ih, iw) lies in the padding. dw (k x c x r x s) is overwritten.
typedef struct kiln_conv2d_weight_grad_args {
  int64_t n, c, h, w;  /* x */
  int64_t k, r, s;     /* dy's channels, kernel height, width */
  int64_t oh, ow;      /* dy's spatial size */
  int64_t stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  const float *x, *dy;
  float *dw;
} kiln_conv2d_weight_grad_args;

/// The cell of a recurrence (kiln_recurrence_args::cell), with its gates in ONNX's order.
enum kiln_recurrence_cell {
  KILN_CELL_RNN = 0,  /* 1 gate */
  KILN_CELL_GRU = 1,  /* z, r, h */
  KILN_CELL_LSTM = 2  /* i, o, f, c */
};

/// The activations a recurrent cell may apply (ONNX's list for RNN, GRU and LSTM).
enum kiln_cell_activation {
  KILN_ACT_SIGMOID = 0,
  KILN_ACT_TANH = 1,
  KILN_ACT_RELU = 2,
  KILN_ACT_LEAKY_RELU = 3,       /* x >= 0 ? x : alpha x */
  KILN_ACT_THRESHOLDED_RELU = 4, /* x > alpha ? x : 0 */
  KILN_ACT_ELU = 5,              /* x >= 0 ? x : alpha (e^x - 1) */
  KILN_ACT_SOFTSIGN = 6,
  KILN_ACT_SOFTPLUS = 7,
  KILN_ACT_HARD_SIGMOID = 8,     /* clamp(alpha x + beta, 0, 1) */
  KILN_ACT_AFFINE = 9,           /* alpha x + beta */
  KILN_ACT_SCALED_TANH = 10      /* alpha tanh(beta x) */
};

typedef struct kiln_cell_function {
  int32_t kind; /* kiln_cell_activation */
  float alpha, beta;
} kiln_cell_function;

/// How a recurrence's recurrent weights are laid out (kiln_recurrence_args::r_layout).
enum kiln_recurrence_r_layout {
  /// r[d][g*hidden + j][k], ONNX's R
  KILN_RECURRENCE_R_PLAIN = 0,
  /// The kernel's gate blocks, as kiln::runtime::kernels::packRecurrentWeights writes them:
  /// recurrent weights that only one kernel reads are packed so once, at load
  /// (KILN_PACK_RECURRENT_GATES).
  KILN_RECURRENCE_R_GATE_BLOCKS = 1
};

/// A recurrent cell run over a whole sequence in one or two directions, f32: ONNX's RNN, GRU
/// and LSTM after the input projection (ir/ops/Recurrent.h). For direction d, batch entry b and
/// step t (run from the last step to the first when the direction is backwards), with
/// pre = xw[t][b][d*G*H + ...] + h(t-1) r[d]^T + rb[d] per gate, the cell's formulas give h(t),
/// written to y[t][b][d]; h_n[d][b] and c_n[d][b] get the last states. A batch entry past its
/// length keeps its state and writes zeros to y.
typedef struct kiln_recurrence_args {
  int32_t cell;       /* kiln_recurrence_cell */
  int32_t directions; /* 1 or 2; the second direction runs backwards */
  int32_t reverse;    /* with one direction: it runs backwards */
  int32_t linear_before_reset, input_forget; /* GRU's and LSTM's flags */
  int32_t r_layout;   /* kiln_recurrence_r_layout */
  int64_t steps, batch, hidden;
  float clip;         /* > 0: pre-activations clamped to [-clip, clip] */
  /* Per direction: f, g (GRU, LSTM), h (LSTM), as many as the cell has. */
  kiln_cell_function functions[2][3];
  const float *xw;        /* [steps][batch][directions * gates * hidden] */
  const float *r;         /* [directions][gates * hidden][hidden], laid out as r_layout says */
  const float *rb;        /* [directions][gates * hidden] */
  const float *h0, *c0;   /* [directions][batch][hidden]; c0 LSTM only */
  const float *peepholes; /* LSTM's [directions][3 * hidden] (i, o, f), or NULL */
  const int64_t *lengths; /* [batch], or NULL: every entry runs every step */
  float *y;               /* [steps][batch][directions][hidden] */
  float *h_n, *c_n;       /* [directions][batch][hidden]; c_n LSTM only */
} kiln_recurrence_args;

struct kiln_rt {
  int32_t abi_version; /* KILN_ABI_VERSION */
  int32_t num_threads;
  /// Runs fn over [0, n) split into chunks of at least `grain` iterations on the runtime's
  /// pool, and returns when all are done. Called from inside a worker it runs inline (no
  /// nested parallelism).
  void (*parallel_for)(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx);
  void (*gemm)(const kiln_rt *rt, const kiln_gemm_args *args);
  void (*conv2d)(const kiln_rt *rt, const kiln_conv2d_args *args);
  void (*pool2d)(const kiln_rt *rt, const kiln_pool2d_args *args);
  void (*conv2d_weight_grad)(const kiln_rt *rt, const kiln_conv2d_weight_grad_args *args);
  void *impl; /* the runtime's own state */
  /// parallel_for with more chunks than threads (a few per thread), claimed as threads come
  /// free, each thread starting with its own run of consecutive chunks: for loops whose chunks
  /// cost nothing extra to cut finer, so that a core running slower for a while does not hold
  /// the other up at the join. May be NULL (then use parallel_for).
  void (*parallel_for_balanced)(const kiln_rt *rt, int64_t n, int64_t grain, kiln_range_fn fn, void *ctx);
  void (*recurrence)(const kiln_rt *rt, const kiln_recurrence_args *args);
  void (*qgemm)(const kiln_rt *rt, const kiln_qgemm_args *args);
  void (*qconv2d)(const kiln_rt *rt, const kiln_qconv2d_args *args);
};

/// A generated kernel: `buffers[i]` is the address of its i-th buffer (operands first, then
/// results, in the order of the kernel node's operands and results).
typedef void (*kiln_kernel_fn)(const kiln_rt *rt, void *const *buffers);

/// Where one buffer of a launch lives.
enum kiln_buffer_kind { KILN_ARENA = 0, KILN_INPUT = 1, KILN_OUTPUT = 2, KILN_WEIGHT = 3 };
typedef struct kiln_buffer_ref {
  int32_t kind;   /* kiln_buffer_kind */
  int32_t index;  /* input, output or weight number (unused for the arena) */
  int64_t offset; /* byte offset into the arena, or into the input/output/weight */
} kiln_buffer_ref;

typedef struct kiln_launch {
  kiln_kernel_fn fn;
  const char *name;  /* for the profiler: "k3_matmul_add_relu" */
  int32_t first_ref; /* its buffers are refs[first_ref .. first_ref + num_refs) */
  int32_t num_refs;
} kiln_launch;

/// A graph input, output or weight: name, dtype (the name of kiln's DType: "f32", "i64", ...)
/// and shape.
typedef struct kiln_tensor_desc {
  const char *name;
  const char *dtype;
  int32_t rank;
  const int64_t *shape;
} kiln_tensor_desc;

/// What the runtime repacks a weight into at load (kiln_weight_packing::kind).
enum kiln_weight_packing_kind {
  /// gemm's prepacked B (KILN_GEMM_B_PANELS):
  /// packed[(j/64)*64*k + i*64 + j%64] = plain[i*stride_k + j*stride_n], n a multiple of 64.
  KILN_PACK_GEMM_B_PANELS = 0,
  /// conv2d's KILN_CONV_WEIGHTS_WINOGRAD_F2, from plain weights w[k][n][3][3] (k output
  /// channels, n input channels; the strides are unused).
  KILN_PACK_CONV_WINOGRAD_F2 = 1,
  /// conv2d's KILN_CONV_WEIGHTS_WINOGRAD_F4, likewise.
  KILN_PACK_CONV_WINOGRAD_F4 = 2,
  /// A recurrence's KILN_RECURRENCE_R_GATE_BLOCKS, from plain r[k][g*n + j][i]: k directions,
  /// hidden size n, stride_k the gates per direction (1, 3 or 4); stride_n is unused.
  KILN_PACK_RECURRENT_GATES = 3,
  /// conv2d's KILN_CONV_WEIGHTS_TAP_MAJOR, from plain one-group weights w[k][n][r][s]:
  /// stride_k = r, stride_n = s (the kernel's height and width).
  KILN_PACK_CONV_TAP_MAJOR = 4,
  /// gemm's KILN_GEMM_B_PAIR_PANELS_BF16 (a bf16 weight of ceil(k/2)*2*n elements), from
  /// plain[i*stride_k + j*stride_n] as for KILN_PACK_GEMM_B_PANELS.
  KILN_PACK_GEMM_B_PAIR_PANELS_BF16 = 5,
  /// conv2d's KILN_CONV_WEIGHTS_BF16_PANELS, from plain weights of k output channels of n
  /// (= c/groups*r*s) weights each, in stride_k groups (stride_n is unused).
  KILN_PACK_CONV_BF16_PANELS = 6,
  /// conv2d's KILN_CONV_WEIGHTS_WINOGRAD_F2_BF16, from plain w[k][n][3][3].
  KILN_PACK_CONV_WINOGRAD_F2_BF16 = 7,
  /// qgemm's prepacked B, from an s8 weight plain[i*stride_k + j*stride_n], k x n
  /// (kiln::runtime::kernels::qgemmPackedBytes bytes).
  KILN_PACK_QGEMM_B = 8,
  /// qconv2d's packed weights, from s8 plain weights of k output channels, n = c/groups input
  /// channels and stride_k = r*s taps each, in channel-quad order when stride_n is 1, tap order
  /// when 0 (kiln::runtime::kernels::qconvPackedBytes bytes).
  KILN_PACK_QCONV_WEIGHTS = 9,
  /// conv2d's KILN_CONV_WEIGHTS_DIRECT_PANELS, from plain one-group weights of k output
  /// channels of n = c*r*s weights each (kiln::runtime::kernels::convDirectPanelFloats floats;
  /// the strides are unused).
  KILN_PACK_CONV_DIRECT_PANELS = 10
};

/// A weight that a kernel reads in another layout than the plain one. Weights are handed over
/// plain (loader-supplied or carried); the runtime packs this one once, at load.
typedef struct kiln_weight_packing {
  int32_t weight; /* index into kiln_model_desc::weights */
  int32_t kind;   /* kiln_weight_packing_kind */
  int64_t k, n, stride_k, stride_n;
} kiln_weight_packing;

typedef struct kiln_model_desc {
  int32_t abi_version;
  int32_t num_inputs, num_outputs, num_weights, num_launches;
  const kiln_tensor_desc *inputs, *outputs, *weights;
  const kiln_launch *launches;
  const kiln_buffer_ref *refs;
  int64_t arena_bytes;
  /// For a model compiled ahead of time, the weights' bytes (each weight 64-byte aligned, in
  /// order); NULL when the loader supplies the weights.
  const void *weight_data;
  /// Weights the runtime repacks at load for the kernels that read them so.
  int32_t num_packings;
  const kiln_weight_packing *packings;
  /// Batch tiling (ir/BatchTiling.h). 0: the model runs whole, on inputs of exactly the
  /// declared shapes. Else the kernels compute `batch_tile` rows of axis 0 of the inputs that
  /// carry the batch (batched_inputs[i] nonzero) and of every output, whose declared shapes
  /// above are those of one tile, and the runtime runs a batch of any multiple of it as tiles,
  /// each with its own arena.
  int64_t batch_tile;
  /// The batch the model serves: a constant (> 0, a multiple of batch_tile) that every batched
  /// input's axis 0 must have, or 0 for any multiple of batch_tile: the symbolic dim named
  /// batch_symbol ("N" of f32[N,3,224,224]).
  int64_t batch_extent;
  const char *batch_symbol; /* NULL unless batch_extent is 0 */
  const int32_t *batched_inputs; /* num_inputs flags; NULL unless batch_tile > 0 */
} kiln_model_desc;

/// The symbol a compiled model exports.
typedef const kiln_model_desc *(*kiln_model_fn)(void);
#define KILN_MODEL_SYMBOL "kiln_model"

#ifdef __cplusplus
}
#endif
