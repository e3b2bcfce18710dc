// kiln-run: runs a .kir graph or an .onnx model on .npy / ONNX .pb inputs (or random ones),
// compiled by kiln's codegen (or, with --reference, on the reference evaluator), prints a
// summary of each output, writes outputs to .npy files and checks them against expected ones;
// --bench times repeated runs and --profile times every kernel; --pipeline/--passes run passes
// on the graph first, and --bisect-passes compares the outputs after every pass with the input
// graph's to find the first pass that changes them. It also runs a MODEL.so that kiln-compile
// wrote (no compiler, no graph), trains a model with --train, and with --onnx-test runs ONNX
// backend conformance test folders. Every error is one line "kiln-run: MESSAGE" and exit
// status 1; a failed --check, a pass that leaves tolerance under --bisect-passes and a failing
// conformance test are exit status 1 too.
//
// This file only dispatches: the options are tools/RunOptions.*, each mode one function of
// tools/RunCommands.h in its own file; --train (tools/TrainCommand.*) parses its own flags.
#include <iostream>

#include "tools/RunCommands.h"
#include "tools/TrainCommand.h"

using namespace kiln::tools;

int main(int argc, char **argv) {
  return runTool("kiln-run", [&] {
    if (isTrainCommand(argc, argv))
      return runTrainCommand(argc, argv);
    RunOptions options = parseRunOptions(argc, argv);
    if (options.help) {
      std::cout << kRunUsage << "\n" << kTrainUsage;
      return 0;
    }
    switch (options.mode) {
    case RunMode::Graph:
      return runGraphCommand(options);
    case RunMode::Model:
      return runModelCommand(options);
    case RunMode::Conformance:
      return runConformanceCommand(options);
    }
    return 1;
  });
}
