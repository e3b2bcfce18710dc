// libFuzzer target for the tensor files kiln reads: .npy (runtime/Npy.h), .safetensors
// (runtime/SafeTensors.h) and training checkpoints in both forms (runtime/TrainingCheckpoint.h).
// Every input goes through each reader (FileFuzzTargets.h says what is checked); run with
// `make fuzz-tensors FUZZ_SECONDS=600`. The checkpoint readers take paths, so the bytes are
// written to a scratch folder first.
//
// `fuzz-tensor-files --write-seeds=DIR` writes seeds as kiln writes them (a small tensor of
// every dtype as .npy, several as one .safetensors) and exits; the Makefile adds real files.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>

#include "tests/TempDir.h"
#include "tests/fuzz/FileFuzzTargets.h"

namespace {

std::unique_ptr<kiln::test::TempDir> scratch;

void removeScratch() { scratch.reset(); }

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  const char *flag = "--write-seeds=";
  for (int i = 1; i < *argc; ++i)
    if (std::strncmp((*argv)[i], flag, std::strlen(flag)) == 0) {
      kiln::fuzz::writeTensorFileSeeds((*argv)[i] + std::strlen(flag));
      std::exit(0);
    }
  scratch = std::make_unique<kiln::test::TempDir>("kiln-fuzz-tensors");
  std::atexit(removeScratch);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    kiln::fuzz::fuzzTensorFile(std::string(reinterpret_cast<const char *>(data), size), scratch->path().string());
  } catch (const std::exception &e) {
    std::fprintf(stderr, "finding: %s\n", e.what());
    std::abort();
  }
  return 0;
}
