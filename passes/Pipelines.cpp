// kiln's named pipelines, each readable top to bottom. A step is one registered pass name with a
// comment saying why it runs there; a step for a pass that is not registered yet is a comment
// line at the place it belongs, and becomes one line when the pass is added to
// passes/PassRegistry.def (a test checks that every step names a registered pass).
//
// Codegen runs these lists exactly, plan-memory included, and emits the plan it leaves:
// `inference` (or `inference-unfused`) for a model, `training` (or `training-unfused`) for a
// training step. So `kiln-dump --pipeline=NAME --print-after-all` shows what is compiled.
#include "passes/Pipelines.h"

#include <algorithm>

#include "core/Error.h"

namespace kiln::passes {

namespace {

/// Graph-level simplification, before any lowering: what `inference` starts with, on its own
/// for tools and tests that want a cleaned-up graph in the user's vocabulary.
PipelineInfo simplifyPipeline() {
  return {"simplify",
          "folds constants, merges repeated computations and removes dead nodes",
          {
              // ONNX exports carry shape arithmetic and constant subgraphs: folding them first
              // gives the passes after it constants to match on.
              "constant-fold",
              // Repeated computations (exporters repeat shape and mask arithmetic) merge, so
              // each is simplified and lowered once.
              "cse",
              // Drops what folding and merging left unused.
              "dce",
          }};
}

/// From the graph as imported to primitives grouped into kernels with a memory plan.
PipelineInfo inferencePipeline() {
  return {"inference",
          "simplifies, decomposes into primitives, fuses kernels and plans memory for inference",
          {
              // int8 matmuls and convolutions of a quantized model, while their weights'
              // dequantize_linear is still there to match (constant-fold would turn a constant
              // weight's into f32).
              "quantized-matmul",
              "quantized-conv",
              // Max pools that a quantize reads pool its bytes; after quantized-conv, whose
              // qconvs bound the pools' inputs.
              "quantized-max-pool",
              // Shape arithmetic and constant subgraphs become data first, so that every later
              // pattern sees constants rather than computations.
              "constant-fold",
              // Einsums that are matrix products run on the GEMM; before simplify-algebra,
              // which merges the permutes and reshapes it adds with their neighbours.
              "einsum-to-matmul",
              // After the first fold, so identities such as x*1 see the folded constants;
              // before cse, so rewritten nodes merge.
              "simplify-algebra",
              // Repeated computations merge before anything is lowered, so each is lowered once.
              "cse",
              // Drops what folding and merging left unused before the costlier passes.
              "dce",
              // It matches the batch_norm composite, which decompose removes, and wants its
              // statistics already folded to constants.
              "fold-batch-norm",
              // Fusion and codegen handle primitives only.
              "decompose",
              // Decompositions build constants (epsilons, scales) and subgraphs on constants
              // (rsqrt(var + eps) of a constant variance): fold them too.
              "constant-fold",
              // Decompositions also multiply by one and broadcast scalars: simplify again.
              "simplify-algebra",
              // Decompositions of neighbouring composites repeat subcomputations (two layer
              // norms of one input, softmax and log_softmax of one tensor).
              "cse",
              // Drops the decomposed composites' leftovers before fusion counts uses.
              "dce",
              // Groups the primitives into kernels once nothing else rewrites them.
              "fuse",
              // Last: it needs the final kernels and buffers.
              "plan-memory",
          }};
}

/// A training graph (passes/autodiff/TrainingGraph.h: forward, gradients and optimizer updates)
/// to kernels with a memory plan: the inference pipeline without BN folding, and with the two
/// passes that make writing the new parameter values in place sound.
PipelineInfo trainingPipeline() {
  return {"training",
          "simplifies, decomposes, fuses kernels and plans memory for a training step",
          {
              // Gradient rules build zeros, ones and scale constants: fold them first.
              "constant-fold",
              // The forward pass's and the gradients' einsums that are matrix products.
              "einsum-to-matmul",
              // Gradients multiply by one and add zeros that autodiff could not see were trivial.
              "simplify-algebra",
              // The backward pass recomputes what the forward pass had (transposes, masks).
              "cse",
              // Drops the forward outputs' leftovers the loss does not need.
              "dce",
              // No fold-batch-norm: in training, batch statistics are computed, not constants,
              // and the parameters it would fold change every step.
              // The optimizer updates (and any composite left) become elementwise primitives.
              "decompose",
              // The updates' hyper-parameter constants and bias-correction scalars.
              "constant-fold",
              "simplify-algebra",
              "cse",
              "dce",
              // Groups the primitives into kernels: each parameter's update becomes one
              // kernel, or the epilogue of its gradient's contraction.
              "fuse",
              // The step writes each new value over its parameter in place; a contraction
              // would park its tile in the parameter's storage before its epilogue reads the
              // parameter, so updates fused into a contraction get a kernel of their own.
              "isolate-parameter-writes",
              // In place is sound only when each parameter's writer runs after every other
              // reader of it; after isolation, which creates the writers that move.
              "order-parameter-writes",
              // Last: it needs the final kernels, buffers and order.
              "plan-memory",
          }};
}

/// `pipeline` with `fuse` left out, every primitive its own kernel: what codegen runs for
/// CompileOptions::fuse = false, to tell a fusion bug from a kernel bug. The other steps are
/// the named pipeline's, for the reasons given there.
PipelineInfo withoutFusion(PipelineInfo pipeline, std::string_view name, std::string_view description) {
  pipeline.name = name;
  pipeline.description = description;
  pipeline.passes.erase(std::remove(pipeline.passes.begin(), pipeline.passes.end(), "fuse"), pipeline.passes.end());
  return pipeline;
}

std::vector<PipelineInfo> buildPipelines() {
  std::vector<PipelineInfo> pipelines = {
      inferencePipeline(),
      withoutFusion(inferencePipeline(), "inference-unfused", "the inference pipeline without fuse"),
      simplifyPipeline(),
      trainingPipeline(),
      withoutFusion(trainingPipeline(), "training-unfused", "the training pipeline without fuse"),
  };
  std::sort(pipelines.begin(), pipelines.end(),
            [](const PipelineInfo &a, const PipelineInfo &b) { return a.name < b.name; });
  return pipelines;
}

} // namespace

const std::vector<PipelineInfo> &registeredPipelines() {
  static const std::vector<PipelineInfo> pipelines = buildPipelines();
  return pipelines;
}

const PipelineInfo &findPipeline(std::string_view name) {
  for (const PipelineInfo &pipeline : registeredPipelines())
    if (pipeline.name == name)
      return pipeline;
  std::vector<std::string_view> known;
  for (const PipelineInfo &pipeline : registeredPipelines())
    known.push_back(pipeline.name);
  fail("unknown pipeline '{}' (known pipelines: {})", name, fmt::join(known, ", "));
}

} // namespace kiln::passes
