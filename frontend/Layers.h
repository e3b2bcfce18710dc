#pragma once
// The standard layers, with PyTorch's constructor arguments (in torch's order), parameter
// names, shapes and default initialisation.
#include <optional>
#include <string>

#include "frontend/Functional.h"
#include "frontend/Module.h"

namespace kiln::frontend::nn {

/// y = x @ weight^T + bias; weight [out, in], bias [out], both U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
public:
  Linear(int64_t inFeatures, int64_t outFeatures, bool bias = true, DType dtype = DType::F32);
  Var forward(const Var &input) override;
  int64_t inFeatures() const { return inFeatures_; }
  int64_t outFeatures() const { return outFeatures_; }

private:
  int64_t inFeatures_, outFeatures_;
};

/// 2-d convolution of [N, C, H, W]; weight [out, in/groups, kh, kw] and bias [out], both
/// U(-1/sqrt(fanIn), 1/sqrt(fanIn)) with fanIn = in/groups * kh * kw.
class Conv2d : public Module {
public:
  Conv2d(int64_t inChannels, int64_t outChannels, Ints kernelSize, Ints stride = {1}, Ints padding = {0},
         Ints dilation = {1}, int64_t groups = 1, bool bias = true, DType dtype = DType::F32);
  Var forward(const Var &input) override;

private:
  Ints stride_, padding_, dilation_;
  int64_t groups_;
};

/// Batch norm over the channels of [N, C, H, W]: weight 1, bias 0 (parameters, when affine),
/// running_mean 0, running_var 1 and num_batches_tracked (buffers). In eval mode it uses the
/// running statistics; in training mode the batch's own (biased) statistics, and, when it
/// tracks running statistics, records their update as buffer writes (GraphBuilder::writeBuffer;
/// pass GraphBuilder::bufferWrites() to TrainingOptions::buffers), as torch does:
///   running_mean' = (1 - momentum) running_mean + momentum mean
///   running_var'  = (1 - momentum) running_var + momentum var * n / (n - 1)   (unbiased)
///   num_batches_tracked' = num_batches_tracked + 1
/// with n = N*H*W (torch refuses n = 1 in training mode; kiln then uses the biased variance, 0).
/// A momentum of std::nullopt is torch's momentum=None: the cumulative average, momentum
/// 1 / num_batches_tracked' at each update.
class BatchNorm2d : public Module {
public:
  explicit BatchNorm2d(int64_t numFeatures, double epsilon = 1e-5, std::optional<double> momentum = 0.1,
                       bool affine = true, bool trackRunningStats = true, DType dtype = DType::F32);
  Var forward(const Var &input) override;

private:
  void updateRunningStats(const Var &input, const Var &batchMean, const Var &batchVar) const;

  int64_t numFeatures_;
  double epsilon_;
  std::optional<double> momentum_;
  bool affine_, trackRunningStats_;
  DType dtype_;
};

/// Layer norm over the trailing dims `normalizedShape`; weight 1 and bias 0 of that shape.
class LayerNorm : public Module {
public:
  explicit LayerNorm(Shape normalizedShape, double epsilon = 1e-5, bool elementwiseAffine = true, bool bias = true,
                     DType dtype = DType::F32);
  Var forward(const Var &input) override;

private:
  Shape normalizedShape_;
  double epsilon_;
};

class ReLU : public Module {
public:
  ReLU() : Module("ReLU") {}
  Var forward(const Var &input) override;
};

class GELU : public Module {
public:
  explicit GELU(std::string approximate = "none") : Module("GELU"), approximate_(std::move(approximate)) {}
  Var forward(const Var &input) override;

private:
  std::string approximate_;
};

/// An empty `stride` means the kernel size, as in torch.
class MaxPool2d : public Module {
public:
  explicit MaxPool2d(Ints kernelSize, Ints stride = {}, Ints padding = {0}, Ints dilation = {1},
                     bool ceilMode = false);
  Var forward(const Var &input) override;

private:
  Ints kernel_, stride_, padding_, dilation_;
  bool ceilMode_;
};

class AvgPool2d : public Module {
public:
  explicit AvgPool2d(Ints kernelSize, Ints stride = {}, Ints padding = {0}, bool ceilMode = false,
                     bool countIncludePad = true);
  Var forward(const Var &input) override;

private:
  Ints kernel_, stride_, padding_;
  bool ceilMode_, countIncludePad_;
};

/// The identity in eval mode (and for p = 0). In training mode, with u = random_uniform of the
/// input's shape (GraphBuilder::randomUniform: a counter-based stream of this module's seed and
/// the graph's random offset, which a training step advances on every step):
///   y = where(u >= p, x / (1 - p), 0)   (p = 1: y = x * 0)
/// The seed comes from the default generator's streamSeed() when not given, so manualSeed makes
/// the masks reproducible; the numbers differ from torch's, their distribution does not.
class Dropout : public Module {
public:
  explicit Dropout(double p = 0.5);
  Dropout(double p, int64_t seed);
  Var forward(const Var &input) override;
  int64_t seed() const { return seed_; }

private:
  double p_;
  int64_t seed_;
};

/// Merges dims startDim..endDim (torch.nn.Flatten: from dim 1, keeping the batch dim).
class Flatten : public Module {
public:
  explicit Flatten(int64_t startDim = 1, int64_t endDim = -1)
      : Module("Flatten"), startDim_(startDim), endDim_(endDim) {}
  Var forward(const Var &input) override;

private:
  int64_t startDim_, endDim_;
};

} // namespace kiln::frontend::nn
