// kiln train_classifier: training with compiled steps, end to end.
//
// It makes two learnable synthetic datasets, trains a model on each with
// kiln::compile_training_step (forward, cross-entropy loss, backward and the optimizer update
// compiled into one executable that updates the parameters in place), then compiles the
// trained model for inference and measures its accuracy on a held-out set:
//   - Gaussian blobs: 10 classes in 1024 dimensions (each class a random centre, each sample
//     the centre plus unit Gaussian noise), learnt by the seed MLP 1024-512-256-10;
//   - glyphs: the ten digits drawn as seven-segment glyphs on 28x28 images, each sample shifted,
//     with its own stroke width and brightness, plus noise, learnt by LeNet-5.
// A one-line progress bar shows the step, the loss (mean of the last steps) and samples/s.
// The exit status is 1 when a model's held-out accuracy is below its stated threshold.
//
// With --write-data DIR it trains nothing and writes the MLP's experiment for the command
// line instead (the dataset training of kiln-run, tools/DatasetTraining.h): the blobs as
// train_x.npy, train_labels.npy, val_x.npy and val_labels.npy, the model at batch 64 as mlp.kir
// (parameters without values) and its initial parameters as the checkpoint folder init/:
//   kiln-run DIR/mlp.kir --train cross-entropy --optimizer sgd --lr 0.05 --momentum 0.9
//     --data x=DIR/train_x.npy --labels DIR/train_labels.npy --epochs 3 --shuffle
//     --val x=DIR/val_x.npy --val-labels DIR/val_labels.npy --load DIR/init
//
// usage: train_classifier [--steps N] [--model mlp|lenet|both]   (default: both, short runs)
//        train_classifier --write-data DIR
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "codegen/CompileModel.h"
#include "codegen/CompileTraining.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "ir/Printer.h"
#include "runtime/Npy.h"

using namespace kiln;
namespace nn = kiln::frontend::nn;

namespace {

/// Images (or feature vectors) [N, ...] and their classes [N] (i64).
struct Dataset {
  Tensor samples, labels;
  int64_t size() const { return labels.numElements(); }
  int64_t sampleElements() const { return samples.numElements() / std::max<int64_t>(1, size()); }
};

constexpr int64_t kClasses = 10;

/// Blobs: class c is centre[c] + N(0, 1) noise per dimension. Centres are N(0, spread^2) per
/// dimension, so two centres are about spread * sqrt(2 * dims) apart: with spread 0.18 and
/// 1024 dims that is 8 noise standard deviations, while any single dimension separates two
/// classes by only 0.25 of one: the model must combine many features (with spread 0.12 the
/// MLP overfits 4096 samples and holds out at about 84%).
Dataset makeBlobs(int64_t count, int64_t dims, uint64_t centreSeed, uint64_t sampleSeed) {
  std::mt19937_64 centreEngine(centreSeed), engine(sampleSeed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  constexpr float kSpread = 0.18f;
  std::vector<float> centres(static_cast<size_t>(kClasses * dims));
  for (float &value : centres)
    value = kSpread * normal(centreEngine);
  Dataset data{Tensor(DType::F32, {count, dims}), Tensor(DType::I64, {count})};
  float *samples = data.samples.dataAs<float>();
  int64_t *labels = data.labels.dataAs<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    int64_t label = static_cast<int64_t>(engine() % kClasses);
    labels[i] = label;
    for (int64_t d = 0; d < dims; ++d)
      samples[i * dims + d] = centres[static_cast<size_t>(label * dims + d)] + normal(engine);
  }
  return data;
}

// Seven segments per digit (a top, b top right, c bottom right, d bottom, e bottom left,
// f top left, g middle), as on a calculator.
constexpr const char *kDigitSegments[kClasses] = {"abcdef", "bc",     "abdeg", "abcdg",  "bcfg",
                                                  "acdfg",  "acdefg", "abc",   "abcdefg", "abcdfg"};

/// A glyph of `digit` into a 28x28 image: segments as filled rectangles of the given stroke
/// width, in a 10x16 box whose top-left corner is (left, top), at `brightness`.
void drawGlyph(float *image, int digit, int left, int top, int stroke, float brightness) {
  constexpr int kSize = 28, kWidth = 10, kHeight = 16;
  auto fill = [&](int x0, int y0, int x1, int y1) { // [x0, x1) x [y0, y1), clipped
    for (int y = std::max(0, top + y0); y < std::min(kSize, top + y1); ++y)
      for (int x = std::max(0, left + x0); x < std::min(kSize, left + x1); ++x)
        image[y * kSize + x] = brightness;
  };
  int half = kHeight / 2;
  for (const char *segment = kDigitSegments[digit]; *segment; ++segment) {
    switch (*segment) {
    case 'a': fill(0, 0, kWidth, stroke); break;
    case 'b': fill(kWidth - stroke, 0, kWidth, half + 1); break;
    case 'c': fill(kWidth - stroke, half, kWidth, kHeight); break;
    case 'd': fill(0, kHeight - stroke, kWidth, kHeight); break;
    case 'e': fill(0, half, stroke, kHeight); break;
    case 'f': fill(0, 0, stroke, half + 1); break;
    case 'g': fill(0, half - stroke / 2, kWidth, half - stroke / 2 + stroke); break;
    }
  }
}

/// Glyphs [N, 1, 28, 28]: a digit anywhere within +-4 pixels of the centre, stroke 2 or 3,
/// brightness in [0.6, 1.4], plus N(0, 0.3^2) noise on every pixel.
Dataset makeGlyphs(int64_t count, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> noise(0.0f, 0.3f);
  std::uniform_int_distribution<int> shift(-4, 4), stroke(2, 3);
  std::uniform_real_distribution<float> brightness(0.6f, 1.4f);
  Dataset data{Tensor(DType::F32, {count, 1, 28, 28}), Tensor(DType::I64, {count})};
  float *images = data.samples.dataAs<float>();
  int64_t *labels = data.labels.dataAs<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    int digit = static_cast<int>(engine() % kClasses);
    labels[i] = digit;
    float *image = images + i * 28 * 28;
    std::fill(image, image + 28 * 28, 0.0f);
    drawGlyph(image, digit, 9 + shift(engine), 6 + shift(engine), stroke(engine), brightness(engine));
    for (int p = 0; p < 28 * 28; ++p)
      image[p] += noise(engine);
  }
  return data;
}

/// Copies the samples at `indices` into a batch.
void gather(const Dataset &data, const std::vector<int64_t> &indices, Tensor &samples, Tensor &labels) {
  int64_t elements = data.sampleElements();
  for (size_t b = 0; b < indices.size(); ++b) {
    std::memcpy(samples.dataAs<float>() + static_cast<int64_t>(b) * elements,
                data.samples.dataAs<float>() + indices[b] * elements, sizeof(float) * static_cast<size_t>(elements));
    labels.dataAs<int64_t>()[b] = data.labels.dataAs<int64_t>()[indices[b]];
  }
}

/// The progress bar: redrawn in place on a terminal; elsewhere (a log) only its last state.
class ProgressBar {
public:
  explicit ProgressBar(int64_t total) : total_(total), interactive_(isatty(STDOUT_FILENO) != 0) {}
  void update(int64_t done, double loss, double samplesPerSecond) {
    if (!interactive_ && done < total_)
      return;
    constexpr int kWidth = 30;
    int filled = static_cast<int>(kWidth * done / std::max<int64_t>(1, total_));
    std::cout << fmt::format("{}  [{}{}] {:>4}/{} loss {:.4f} {:>8.0f} samples/s", interactive_ ? "\r" : "",
                             std::string(static_cast<size_t>(filled), '#'),
                             std::string(static_cast<size_t>(kWidth - filled), '.'), done, total_, loss,
                             samplesPerSecond);
    if (done >= total_)
      std::cout << "\n";
    std::cout << std::flush;
  }

private:
  int64_t total_;
  bool interactive_;
};

struct Experiment {
  std::string title;
  std::shared_ptr<nn::Module> model;
  Dataset train, test;
  codegen::OptimizerSpec optimizer;
  int64_t batch, steps;
  double threshold; // the held-out accuracy it must reach
};

/// Trains, evaluates and reports; returns whether the accuracy reached the threshold.
bool run(Experiment &experiment) {
  using Clock = std::chrono::steady_clock;
  std::cout << fmt::format("== {} ==\n", experiment.title);
  nn::Module &model = *experiment.model;
  Shape sampleShape = experiment.train.samples.shape();
  auto shapeWithBatch = [&](int64_t batch) {
    Shape shape = sampleShape;
    shape[0] = batch;
    return shape;
  };

  frontend::GraphBuilder builder("train_" + model.typeName());
  frontend::Var x = builder.input("x", DType::F32, shapeWithBatch(experiment.batch));
  std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", model(x)}});
  codegen::LossSpec loss;
  loss.kind = codegen::LossKind::CrossEntropy;
  loss.targetName = "labels";
  auto start = Clock::now();
  TrainingStep step = compile_training_step(*graph, loss, experiment.optimizer);
  std::cout << fmt::format("  {} parameters, {} training samples, batch {}; training step compiled in {:.1f} s\n",
                           model.numParameters(), experiment.train.size(), experiment.batch,
                           std::chrono::duration<double>(Clock::now() - start).count());

  Tensor samples(DType::F32, shapeWithBatch(experiment.batch)), labels(DType::I64, {experiment.batch});
  std::vector<int64_t> order(static_cast<size_t>(experiment.train.size()));
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 shuffler(7);
  size_t next = order.size(); // reshuffle at the first step
  ProgressBar bar(experiment.steps);
  double recentLoss = 0;
  start = Clock::now();
  for (int64_t s = 1; s <= experiment.steps; ++s) {
    if (next + static_cast<size_t>(experiment.batch) > order.size()) {
      std::shuffle(order.begin(), order.end(), shuffler);
      next = 0;
    }
    std::vector<int64_t> indices(order.begin() + static_cast<std::ptrdiff_t>(next),
                                 order.begin() + static_cast<std::ptrdiff_t>(next + experiment.batch));
    next += static_cast<size_t>(experiment.batch);
    gather(experiment.train, indices, samples, labels);
    float value = step.run({samples, labels});
    if (!std::isfinite(value))
      fail("{}: the loss is not finite at step {}", experiment.title, s);
    recentLoss = s == 1 ? value : 0.9 * recentLoss + 0.1 * value; // smoothed for display
    double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    bar.update(s, recentLoss, static_cast<double>(s * experiment.batch) / std::max(seconds, 1e-9));
  }

  // The held-out set in one inference run of the same model with the trained parameters.
  const Dataset &test = experiment.test;
  frontend::GraphBuilder evalBuilder("eval_" + model.typeName());
  frontend::Var evalInput = evalBuilder.input("x", DType::F32, test.samples.shape());
  std::unique_ptr<ir::Graph> evalGraph = evalBuilder.finish({{"logits", model(evalInput)}});
  codegen::CompileOptions options;
  for (const auto &[name, value] : step.parameters())
    options.params[name] = value;
  Tensor logits = codegen::compile(*evalGraph, options).run({test.samples})[0];
  int64_t correct = 0;
  for (int64_t i = 0; i < test.size(); ++i) {
    const float *row = logits.dataAs<float>() + i * kClasses;
    int64_t predicted = std::max_element(row, row + kClasses) - row;
    correct += predicted == test.labels.dataAs<int64_t>()[i];
  }
  double accuracy = static_cast<double>(correct) / static_cast<double>(std::max<int64_t>(1, test.size()));
  bool ok = accuracy >= experiment.threshold;
  std::cout << fmt::format("  held-out accuracy {:.1f}% ({} of {}), threshold {:.0f}%: {}\n\n", 100 * accuracy, correct,
                           test.size(), 100 * experiment.threshold, ok ? "ok" : "BELOW THRESHOLD");
  return ok;
}

/// The seed MLP 1024-512-256-10, with PyTorch's initialisation from seed 0.
std::shared_ptr<nn::Module> seedMlp() {
  nn::manualSeed(0);
  return std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(1024, 512), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(512, 256),
      std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10)});
}

/// The blobs, train and held out.
Dataset mlpTrainingSet() { return makeBlobs(4096, 1024, 1, 2); }
Dataset mlpHeldOutSet() { return makeBlobs(1000, 1024, 1, 3); }

/// --write-data: the MLP experiment as files (see the top of this file).
void writeMlpExperiment(const std::string &dir) {
  std::filesystem::create_directories(dir + "/init");
  Dataset train = mlpTrainingSet(), held = mlpHeldOutSet();
  runtime::writeNpy(dir + "/train_x.npy", train.samples);
  runtime::writeNpy(dir + "/train_labels.npy", train.labels);
  runtime::writeNpy(dir + "/val_x.npy", held.samples);
  runtime::writeNpy(dir + "/val_labels.npy", held.labels);
  std::shared_ptr<nn::Module> model = seedMlp();
  frontend::GraphBuilder builder("mlp");
  frontend::Var x = builder.input("x", DType::F32, {64, 1024});
  std::unique_ptr<ir::Graph> graph = builder.finish({{"logits", (*model)(x)}});
  for (const ir::Node *param : graph->params())
    runtime::writeNpy(dir + "/init/" + param->attrString("name") + ".npy", param->attrTensor("value"));
  std::ofstream(dir + "/mlp.kir") << ir::printGraph(*graph); // large values print as `elided`
  std::cout << fmt::format("wrote the seed MLP's blobs (4096 to train, 1000 held out), mlp.kir and init/ to {}\n",
                           dir);
}

} // namespace

int main(int argc, char **argv) {
  try {
    int64_t steps = 0; // 0: each experiment's default
    std::string which = "both";
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--write-data" && i + 1 < argc) {
        writeMlpExperiment(argv[i + 1]);
        return 0;
      }
      if ((arg == "--steps" || arg == "--model") && i + 1 < argc) {
        std::string value = argv[++i];
        if (arg == "--model") {
          if (value != "mlp" && value != "lenet" && value != "both")
            fail("--model expects mlp, lenet or both, got '{}'", value);
          which = value;
        } else {
          steps = std::atoll(value.c_str());
          if (steps <= 0 || steps > 1000000)
            fail("--steps expects a positive integer, got '{}'", value);
        }
      } else {
        std::cerr << "usage: train_classifier [--steps N] [--model mlp|lenet|both] | --write-data DIR\n";
        return 2;
      }
    }

    bool ok = true;
    if (which != "lenet") {
      Experiment mlp{"seed MLP 1024-512-256-10 on Gaussian blobs (10 classes, 1024 dims)",
                     seedMlp(),
                     mlpTrainingSet(),
                     mlpHeldOutSet(),
                     codegen::OptimizerSpec::sgd(0.05, /*momentum=*/0.9),
                     64,
                     steps > 0 ? steps : 100,
                     0.95};
      ok &= run(mlp);
    }
    if (which != "mlp") {
      nn::manualSeed(0);
      Experiment lenet{"LeNet-5 on seven-segment glyphs (10 digits, 28x28)",
                       std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                           std::make_shared<nn::Conv2d>(1, 6, frontend::Ints{5}, frontend::Ints{1}, frontend::Ints{2}),
                           std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(frontend::Ints{2}),
                           std::make_shared<nn::Conv2d>(6, 16, frontend::Ints{5}), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::MaxPool2d>(frontend::Ints{2}), std::make_shared<nn::Flatten>(1),
                           std::make_shared<nn::Linear>(400, 120), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(120, 84), std::make_shared<nn::ReLU>(),
                           std::make_shared<nn::Linear>(84, 10)}),
                       makeGlyphs(4096, 4),
                       makeGlyphs(1000, 5),
                       codegen::OptimizerSpec::adam(5e-3),
                       64,
                       steps > 0 ? steps : 300,
                       0.90};
      ok &= run(lenet);
    }
    if (!ok) {
      std::cerr << "train_classifier: a model's held-out accuracy is below its threshold\n";
      return 1;
    }
    return 0;
  } catch (const std::exception &e) {
    std::cerr << "train_classifier: " << e.what() << "\n";
    return 1;
  }
}
