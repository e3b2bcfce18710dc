#pragma once
// ResNet-18 (torchvision.models.resnet18) written with kiln's nn modules: the model zoo's first
// entry, used by the quickstart, kiln-train-bench and the ResNet-18 training check.
//
// The module tree and therefore the state_dict names follow torchvision exactly ("conv1.weight",
// "layer2.0.downsample.1.running_var", "fc.bias", ...), so torchvision's weights load by name
// with Module::loadStateDict.
#include <cstdint>
#include <memory>

#include "frontend/Frontend.h"

namespace kiln::frontend::models {

namespace nn = kiln::frontend::nn;

/// torchvision's BasicBlock: two 3x3 convolutions (no bias) with batch norm, and a residual
/// connection that goes through a 1x1 convolution + batch norm ("downsample") when the block
/// changes the resolution or the channel count.
class BasicBlock : public nn::Module {
public:
  BasicBlock(int64_t inChannels, int64_t channels, int64_t stride) : Module("BasicBlock") {
    // Registration order is torchvision's, which fixes the state_dict order.
    conv1_ = std::make_shared<nn::Conv2d>(inChannels, channels, Ints{3}, Ints{stride}, Ints{1}, Ints{1}, 1, false);
    bn1_ = std::make_shared<nn::BatchNorm2d>(channels);
    relu_ = std::make_shared<nn::ReLU>();
    conv2_ = std::make_shared<nn::Conv2d>(channels, channels, Ints{3}, Ints{1}, Ints{1}, Ints{1}, 1, false);
    bn2_ = std::make_shared<nn::BatchNorm2d>(channels);
    registerModule("conv1", conv1_);
    registerModule("bn1", bn1_);
    registerModule("relu", relu_);
    registerModule("conv2", conv2_);
    registerModule("bn2", bn2_);
    if (stride != 1 || inChannels != channels) {
      downsample_ = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
          std::make_shared<nn::Conv2d>(inChannels, channels, Ints{1}, Ints{stride}, Ints{0}, Ints{1}, 1, false),
          std::make_shared<nn::BatchNorm2d>(channels)});
      registerModule("downsample", downsample_);
    }
  }

  Var forward(const Var &input) override {
    Var out = (*relu_)((*bn1_)((*conv1_)(input)));
    out = (*bn2_)((*conv2_)(out));
    Var identity = downsample_ ? (*downsample_)(input) : input;
    return (*relu_)(out + identity);
  }

private:
  std::shared_ptr<nn::Module> conv1_, bn1_, relu_, conv2_, bn2_, downsample_;
};

/// torch.nn.AdaptiveAvgPool2d((1, 1)): the mean over H and W, for any input resolution.
class GlobalAvgPool2d : public nn::Module {
public:
  GlobalAvgPool2d() : Module("AdaptiveAvgPool2d") {}
  Var forward(const Var &input) override { return frontend::mean(input, {2, 3}, /*keepdims=*/true); }
};

/// ResNet-18 on [N, 3, H, W] images (224x224 in ImageNet), `numClasses` logits out.
class ResNet18 : public nn::Module {
public:
  explicit ResNet18(int64_t numClasses = 1000) : Module("ResNet") {
    registerModule("conv1", std::make_shared<nn::Conv2d>(3, 64, Ints{7}, Ints{2}, Ints{3}, Ints{1}, 1, false));
    registerModule("bn1", std::make_shared<nn::BatchNorm2d>(64));
    registerModule("relu", std::make_shared<nn::ReLU>());
    registerModule("maxpool", std::make_shared<nn::MaxPool2d>(Ints{3}, Ints{2}, Ints{1}));
    int64_t inChannels = 64;
    const int64_t stageChannels[] = {64, 128, 256, 512};
    for (int stage = 0; stage < 4; ++stage) {
      int64_t channels = stageChannels[stage];
      // The first stage keeps the maxpool's resolution; the others halve it in their first block.
      int64_t stride = stage == 0 ? 1 : 2;
      auto layer = std::make_shared<nn::Sequential>();
      layer->add(std::make_shared<BasicBlock>(inChannels, channels, stride));
      layer->add(std::make_shared<BasicBlock>(channels, channels, 1));
      registerModule("layer" + std::to_string(stage + 1), layer);
      inChannels = channels;
    }
    registerModule("avgpool", std::make_shared<GlobalAvgPool2d>());
    registerModule("flatten", std::make_shared<nn::Flatten>(1));
    registerModule("fc", std::make_shared<nn::Linear>(512, numClasses));
  }

  /// The children in registration order are exactly torchvision's forward order.
  Var forward(const Var &input) override {
    Var x = input;
    for (const auto &[name, module] : namedChildren())
      x = (*module)(x);
    return x;
  }
};

} // namespace kiln::frontend::models
