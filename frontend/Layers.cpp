#include "frontend/Layers.h"

#include "core/Error.h"
#include "frontend/Math.h"
#include "frontend/Movement.h"

namespace kiln::frontend::nn {

namespace {

/// PyTorch's default init of a weight and its bias: both U(-bound, bound), bound from the
/// weight's fan-in; drawn weight first, then bias, from the default generator.
Tensor defaultInit(const TensorType &type, double bound) { return uniformTensor(type, -bound, bound); }

Ints pairOf(const Ints &values, std::string_view what, std::string_view name) {
  if (values.size() == 1)
    return {values[0], values[0]};
  if (values.size() != 2)
    fail("{}: {} needs 1 or 2 entries, got {}", what, name, values.size());
  return values;
}

} // namespace

Linear::Linear(int64_t inFeatures, int64_t outFeatures, bool bias, DType dtype)
    : Module("Linear"), inFeatures_(inFeatures), outFeatures_(outFeatures) {
  if (inFeatures < 0 || outFeatures < 0)
    fail("Linear({}, {}): feature counts must not be negative", inFeatures, outFeatures);
  Shape weightShape{outFeatures, inFeatures};
  double bound = defaultInitBound(weightShape);
  registerParameter("weight", defaultInit({dtype, weightShape}, bound));
  if (bias)
    registerParameter("bias", defaultInit({dtype, {outFeatures}}, bound));
}

Var Linear::forward(const Var &input) {
  Var weight = tensorVar(input, "weight"); // weight first: params appear in state_dict order
  Var bias = hasTensor("bias") ? tensorVar(input, "bias") : Var();
  return linear(input, weight, bias);
}

Conv2d::Conv2d(int64_t inChannels, int64_t outChannels, Ints kernelSize, Ints stride, Ints padding, Ints dilation,
               int64_t groups, bool bias, DType dtype)
    : Module("Conv2d"), stride_(pairOf(stride, "Conv2d", "stride")), padding_(pairOf(padding, "Conv2d", "padding")),
      dilation_(pairOf(dilation, "Conv2d", "dilation")), groups_(groups) {
  Ints kernel = pairOf(kernelSize, "Conv2d", "kernel size");
  if (groups <= 0 || inChannels <= 0 || outChannels <= 0 || inChannels % groups || outChannels % groups)
    fail("Conv2d({}, {}, groups {}): channel counts must be positive multiples of groups", inChannels,
         outChannels, groups);
  if (kernel[0] <= 0 || kernel[1] <= 0)
    fail("Conv2d: kernel size {} must be positive", shapeToString(kernel));
  Shape weightShape{outChannels, inChannels / groups, kernel[0], kernel[1]};
  double bound = defaultInitBound(weightShape);
  registerParameter("weight", defaultInit({dtype, weightShape}, bound));
  if (bias)
    registerParameter("bias", defaultInit({dtype, {outChannels}}, bound));
}

Var Conv2d::forward(const Var &input) {
  Var weight = tensorVar(input, "weight");
  Var bias = hasTensor("bias") ? tensorVar(input, "bias") : Var();
  return conv2d(input, weight, bias, stride_, padding_, dilation_, groups_);
}

BatchNorm2d::BatchNorm2d(int64_t numFeatures, double epsilon, std::optional<double> momentum, bool affine,
                         bool trackRunningStats, DType dtype)
    : Module("BatchNorm2d"), numFeatures_(numFeatures), epsilon_(epsilon), momentum_(momentum), affine_(affine),
      trackRunningStats_(trackRunningStats), dtype_(dtype) {
  if (numFeatures <= 0)
    fail("BatchNorm2d({}): the number of features must be positive", numFeatures);
  if (momentum && !(*momentum >= 0.0 && *momentum <= 1.0))
    fail("BatchNorm2d({}): momentum {} is not in [0, 1]", numFeatures, *momentum);
  TensorType perChannel{dtype, {numFeatures}};
  if (affine) {
    registerParameter("weight", fullTensor(perChannel, 1.0));
    registerParameter("bias", fullTensor(perChannel, 0.0));
  }
  if (trackRunningStats) {
    registerBuffer("running_mean", fullTensor(perChannel, 0.0));
    registerBuffer("running_var", fullTensor(perChannel, 1.0));
    registerBuffer("num_batches_tracked", Tensor::scalar(DType::I64, 0));
  }
}

Var BatchNorm2d::forward(const Var &input) {
  if (input.rank() != 4 || input.dim(1) != numFeatures_)
    fail("BatchNorm2d({}): expects an input [N,{},H,W], got {}", numFeatures_, numFeatures_,
         input.type().toString());
  GraphBuilder &builder = input.builder();
  TensorType perChannel{dtype_, {numFeatures_}};
  Var scale = affine_ ? tensorVar(input, "weight") : builder.constant(fullTensor(perChannel, 1.0));
  Var shift = affine_ ? tensorVar(input, "bias") : builder.constant(fullTensor(perChannel, 0.0));
  if (!isTraining() && trackRunningStats_)
    return batchNorm(input, scale, shift, tensorVar(input, "running_mean"), tensorVar(input, "running_var"),
                     epsilon_);
  // Batch statistics over N, H and W; the biased variance, as PyTorch normalises with.
  Var batchMean = mean(input, {0, 2, 3});
  Var centered = input - reshape(batchMean, {1, numFeatures_, 1, 1});
  Var batchVar = mean(centered * centered, {0, 2, 3});
  if (trackRunningStats_)
    updateRunningStats(input, batchMean, batchVar);
  return batchNorm(input, scale, shift, batchMean, batchVar, epsilon_);
}

void BatchNorm2d::updateRunningStats(const Var &input, const Var &batchMean, const Var &batchVar) const {
  GraphBuilder &builder = input.builder();
  int64_t count = input.dim(0) * input.dim(2) * input.dim(3);
  // Bessel's correction, as torch applies to the running variance only.
  double unbiased = count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1) : 1.0;
  Var runningMean = tensorVar(input, "running_mean");
  Var runningVar = tensorVar(input, "running_var");
  Var batches = tensorVar(input, "num_batches_tracked");
  // From the pending values, so that a module called twice in one trace updates twice.
  Var counted = builder.currentValue(batches) + 1;
  auto average = [&](const Var &running, const Var &batch) {
    if (momentum_)
      return builder.currentValue(running) * (1.0 - *momentum_) + batch * *momentum_;
    // momentum=None: the cumulative average, weight 1/count on this batch (a graph value, since
    // the count lives in a buffer).
    Var weight = reciprocal(cast(counted, dtype_));
    return builder.currentValue(running) * (1.0 - weight) + batch * weight;
  };
  builder.writeBuffer(runningMean, average(runningMean, batchMean));
  builder.writeBuffer(runningVar, average(runningVar, batchVar * unbiased));
  builder.writeBuffer(batches, counted);
}

LayerNorm::LayerNorm(Shape normalizedShape, double epsilon, bool elementwiseAffine, bool bias, DType dtype)
    : Module("LayerNorm"), normalizedShape_(std::move(normalizedShape)), epsilon_(epsilon) {
  if (normalizedShape_.empty())
    fail("LayerNorm: the normalized shape must not be empty");
  for (int64_t d : normalizedShape_)
    if (d <= 0)
      fail("LayerNorm: normalized shape {} must have positive dims", shapeToString(normalizedShape_));
  if (elementwiseAffine) {
    registerParameter("weight", fullTensor({dtype, normalizedShape_}, 1.0));
    if (bias)
      registerParameter("bias", fullTensor({dtype, normalizedShape_}, 0.0));
  }
}

Var LayerNorm::forward(const Var &input) {
  auto trailing = static_cast<int64_t>(normalizedShape_.size());
  if (input.rank() < trailing || !std::equal(normalizedShape_.begin(), normalizedShape_.end(),
                                             input.shape().end() - trailing))
    fail("LayerNorm({}): expects an input ending in those dims, got {}", shapeToString(normalizedShape_),
         input.type().toString());
  Var weight = hasTensor("weight") ? tensorVar(input, "weight") : Var();
  Var bias = hasTensor("bias") ? tensorVar(input, "bias") : Var();
  return layerNorm(input, input.rank() - trailing, weight, bias, epsilon_);
}

Var ReLU::forward(const Var &input) { return relu(input); }

Var GELU::forward(const Var &input) { return gelu(input, approximate_); }

MaxPool2d::MaxPool2d(Ints kernelSize, Ints stride, Ints padding, Ints dilation, bool ceilMode)
    : Module("MaxPool2d"), kernel_(pairOf(kernelSize, "MaxPool2d", "kernel size")),
      stride_(stride.empty() ? kernel_ : pairOf(stride, "MaxPool2d", "stride")),
      padding_(pairOf(padding, "MaxPool2d", "padding")), dilation_(pairOf(dilation, "MaxPool2d", "dilation")),
      ceilMode_(ceilMode) {}

Var MaxPool2d::forward(const Var &input) {
  return maxPool2d(input, kernel_, stride_, padding_, dilation_, ceilMode_);
}

AvgPool2d::AvgPool2d(Ints kernelSize, Ints stride, Ints padding, bool ceilMode, bool countIncludePad)
    : Module("AvgPool2d"), kernel_(pairOf(kernelSize, "AvgPool2d", "kernel size")),
      stride_(stride.empty() ? kernel_ : pairOf(stride, "AvgPool2d", "stride")),
      padding_(pairOf(padding, "AvgPool2d", "padding")), ceilMode_(ceilMode), countIncludePad_(countIncludePad) {}

Var AvgPool2d::forward(const Var &input) {
  return avgPool2d(input, kernel_, stride_, padding_, ceilMode_, countIncludePad_);
}

Dropout::Dropout(double p) : Dropout(p, defaultGenerator().streamSeed()) {}

Dropout::Dropout(double p, int64_t seed) : Module("Dropout"), p_(p), seed_(seed) {
  if (!(p >= 0.0 && p <= 1.0))
    fail("Dropout: probability {} is not in [0, 1]", p);
}

Var Dropout::forward(const Var &input) {
  if (!isTraining() || p_ == 0.0)
    return input;
  if (!isFloat(input.dtype()))
    fail("Dropout: expects a float input, got {}", input.type().toString());
  if (p_ == 1.0) // torch: every element dropped; x * 0 keeps NaN and the gradient finite
    return input * 0.0;
  // Compared in f64 for an f64 input, else in f32 (random_uniform's dtypes).
  DType uniformType = input.dtype() == DType::F64 ? DType::F64 : DType::F32;
  Var u = input.builder().randomUniform(input.shape(), seed_, uniformType);
  return where(u >= p_, input / (1.0 - p_), 0.0);
}

Var Flatten::forward(const Var &input) { return flatten(input, startDim_, endDim_); }

} // namespace kiln::frontend::nn
