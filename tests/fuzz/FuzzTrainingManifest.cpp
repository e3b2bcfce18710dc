// libFuzzer target for the training manifest (runtime/TrainingManifest.h): the text a training
// step compiled ahead of time carries about itself. Any bytes must parse or be a kiln::Error;
// what parses must survive writing and reading, and bind to a stand-in model as
// runtime::TrainingStep binds a loaded step's (FileFuzzTargets.h). Run with
// `make fuzz-manifest FUZZ_SECONDS=600`.
//
// `fuzz-training-manifest --print-manifest=STEP.so` prints the manifest of a compiled training
// step and exits: the Makefile's seed, from a real `kiln-compile --train` artifact.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "core/Error.h"
#include "runtime/TrainingStep.h"
#include "tests/fuzz/FileFuzzTargets.h"

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *flag = "--print-manifest=";
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], flag, std::strlen(flag)) == 0) {
      try {
        kiln::runtime::TrainingStep step = kiln::runtime::TrainingStep::load((*argv)[i] + std::strlen(flag));
        std::fputs(step.manifest().toText().c_str(), stdout);
      } catch (const kiln::Error &e) {
        std::fprintf(stderr, "%s\n", e.what());
        std::exit(1);
      }
      std::exit(0);
    }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    (void)kiln::fuzz::fuzzTrainingManifest(std::string(reinterpret_cast<const char *>(data), size));
  } catch (const std::exception &e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
