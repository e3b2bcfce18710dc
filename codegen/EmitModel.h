#pragma once
// Lowering a graph to one C++ translation unit: one `extern "C"` kiln_kernel_fn per kernel
// node or remaining primitive node, and the `kiln_model` function returning the model's
// description (runtime/KernelAbi.h): its launch list and where each launch's buffers live.
//
// Requires: a verified graph of primitives and kernel nodes (after the inference pipeline:
// decompose, fuse) and its memory plan (passes/memory/PlanMemory.h) in the graph's node order.
// Provides:
//  - graph inputs and outputs are refs by index; parameters, then constants of more than
//    ir::kMaxInlinedConstantElements elements, are weights in that order; smaller constants
//    are literals in the source; every other value is an arena offset from the plan;
//  - a reshape the plan aliases to its operand costs no launch; graph outputs that are inputs,
//    weights, constants or repeats of another output get a copy launch;
//  - the generated code computes in the value's own dtype (f32 in f32).
// An unsupported op or dtype is a kiln::Error "codegen: op X on dtype Y is not supported yet
// (node %n)", so a caller can fall back to the reference evaluator.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "codegen/LoopNest.h"
#include "ir/Graph.h"
#include "passes/memory/PlanMemory.h"

namespace kiln::codegen {

/// One kernel function's source.
struct KernelSource {
  std::string symbol;   // the extern "C" function
  std::string text;     // constants, context type, static functions and the function
  std::string strategy; // elementwise, rows, contraction, per-op
  std::vector<PackedWeight> packedOperands; // operands it reads repacked
};

/// Lowers one unit to the kernel function `symbol`, with private names starting with
/// `prefix`. `restrictPointers` must be false when the launch's buffers may overlap.
KernelSource emitKernel(const Unit &unit, const std::string &prefix, const std::string &symbol,
                        bool restrictPointers);

struct WeightInfo {
  std::string name;            // the parameter's name, or "constant.N"
  const ir::Value *value = nullptr; // the param or constant it holds
  /// Its one kernel reads it repacked (gemm's prepacked B, or a convolution's Winograd
  /// transform): the runtime packs it at load (kiln_weight_packing); it is handed over plain.
  std::optional<PackedWeight> packing;
};

struct LaunchInfo {
  std::string name;     // "k3_matmul_add_relu"
  std::string strategy; // how its kernel was lowered; "" for a launch-free view
  const ir::Node *node = nullptr; // nullptr for an output copy
};

struct ModelSource {
  std::string source; // sourcePrelude()-like header + body: a complete translation unit
  std::string body;   // the kernels and the model description, without the shared header
  std::string modelSymbol = "kiln_model"; // the exported description function
  std::string symbolPrefix;
  std::vector<WeightInfo> weights;
  std::vector<LaunchInfo> launches;
  int64_t arenaBytes = 0;
  /// Launches that run an earlier launch's function: their kernels' code was the same but for
  /// its names, so it is emitted (and compiled) once.
  int64_t sharedKernels = 0;
};

/// `symbolPrefix` (a C identifier prefix, "" by default) starts every name the model's source
/// defines: kernel functions, tables and `<prefix>kiln_model`, so that the bodies of several
/// models can share one translation unit after one sourcePrelude() (see compileBatch).
///
/// `outputsOverParams` names graph outputs (by index) that the caller will bind to the storage
/// of a parameter (by name) - a training step writing new weights in place. A launch that
/// reads the parameter and writes such an output then gets no `__restrict` pointers, since
/// the two buffers are one.
///
/// How a model's executable will be used.
struct EmitOptions {
  /// The caller changes the parameters' values between runs, in their own storage (a training
  /// step's parameters that another executable updates, or a checkpoint loads into): no
  /// parameter is read repacked (WeightInfo::packing), since the runtime's packed copy would
  /// keep the values it was made from.
  bool paramsChange = false;
  /// Convolutions compute each output as the plain sum of its products, never by Winograd
  /// (kiln_conv2d_args::exact): training steps, whose gradients Winograd's rounding skews.
  bool exactConvolutions = false;
  /// GEMMs and the convolutions the runtime computes as GEMMs multiply in this precision
  /// (kiln_gemm_args::precision); exact convolutions stay f32.
  ContractionPrecision precision = ContractionPrecision::F32;
  /// The graph computes one tile of a batch (ir::retileBatch): kiln_model_desc's batch_tile,
  /// batch_extent, batch_symbol and batched_inputs. tile 0: the model runs whole.
  struct BatchTiling {
    int64_t tile = 0;
    int64_t extent = 0;  // the batch served: a constant, or 0 for any multiple of tile
    std::string symbol;  // with extent 0: the symbolic dim's name
    std::vector<bool> batchedInputs; // per graph input
  } batchTiling;
};

ModelSource emitModel(const ir::Graph &graph, const passes::MemoryPlan &plan, const std::string &symbolPrefix = "",
                      const std::vector<std::pair<size_t, std::string>> &outputsOverParams = {},
                      const EmitOptions &options = {});

/// `text` in double quotes, with quotes, backslashes and bytes outside printable ASCII escaped
/// (octal), so that both a C++ string literal and a GNU assembler string read it back as `text`.
std::string cString(const std::string &text);

/// What every generated translation unit starts with: includes, runtime/KernelAbi.h and the
/// scalar helpers; model bodies follow it.
std::string sourcePrelude();

/// The text of runtime/KernelAbi.h, which every generated source embeds so that compiling it
/// needs no kiln source tree. Built into the library, so it needs none either.
const std::string &kernelAbiText();

} // namespace kiln::codegen
