// libFuzzer target for the loaders of compiled artifacts: runtime::Executable::load and
// runtime::TrainingStep::load on a model or training step that kiln-compile wrote, cut short
// or with its description tampered with (ArtifactTampering.h says what is covered and what is
// not, and the input's format). Run with `make fuzz-artifact FUZZ_SECONDS=600`, which compiles
// the bases (tests/fuzz/artifacts/*.kir) and sweeps every truncation and single-byte change
// first.
//
//   fuzz-artifact --artifact=STEP.so --artifact=MODEL.so [--sweep] [libFuzzer flags] [corpus]
//
// The bases in the order given (a script's byte 0 picks one): the regression test replays
// scripts against tests/CMakeLists.txt's step.so then model.so, so give them in that order.
// --sweep loads every truncation and every single-byte change of each base's description
// (0x00, 0xff, lowest or highest bit flipped) once, prints how many, and exits.
// --list-regions prints each base's regions by number (for writing a script by hand) and exits.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "tests/TempDir.h"
#include "tests/fuzz/ArtifactTampering.h"
#include "tests/fuzz/FileFuzzTargets.h"

namespace {

std::vector<kiln::fuzz::ArtifactTampering> bases;
std::unique_ptr<kiln::test::TempDir> scratch;

void removeScratch() { scratch.reset(); }

[[noreturn]] void finding(const std::string &what, const std::exception &e) {
  std::fprintf(stderr, "finding: %s: %s\n", what.c_str(), e.what());
  std::abort();
}

void sweep() {
  for (const kiln::fuzz::ArtifactTampering &base : bases) {
    size_t count = 0;
    base.sweep([&](const std::string &bytes, const std::string &change) {
      try {
        kiln::fuzz::loadTamperedArtifact(bytes, scratch->path().string());
      } catch (const std::exception &e) {
        finding(base.path() + ", " + change, e);
      }
      ++count;
    });
    std::printf("%s: %zu bytes, %zu description regions: %zu tampered files loaded or refused\n", base.path().c_str(),
                base.bytes().size(), base.regions().size(), count);
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  bool sweepOnly = false, listOnly = false;
  const char *flag = "--artifact=";
  try {
    for (int i = 1; i < *argc; ++i) {
      if (std::strncmp((*argv)[i], flag, std::strlen(flag)) == 0)
        bases.emplace_back((*argv)[i] + std::strlen(flag));
      else if (std::strcmp((*argv)[i], "--sweep") == 0)
        sweepOnly = true;
      else if (std::strcmp((*argv)[i], "--list-regions") == 0)
        listOnly = true;
    }
  } catch (const std::exception &e) {
    std::fprintf(stderr, "fuzz-artifact: %s\n", e.what());
    std::exit(1);
  }
  if (bases.empty()) {
    std::fprintf(stderr, "usage: fuzz-artifact --artifact=STEP.so [--artifact=MODEL.so ...] [--sweep] ...\n");
    std::exit(1);
  }
  if (listOnly) {
    for (size_t b = 0; b < bases.size(); ++b)
      for (size_t r = 0; r < bases[b].regions().size(); ++r)
        std::printf("base %zu (%s) region %zu: %s, %zu bytes at %zu\n", b, bases[b].path().c_str(), r,
                    bases[b].regions()[r].name.c_str(), bases[b].regions()[r].size, bases[b].regions()[r].offset);
    std::exit(0);
  }
  scratch = std::make_unique<kiln::test::TempDir>("kiln-fuzz-artifact");
  std::atexit(removeScratch);
  if (sweepOnly) {
    sweep();
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    kiln::fuzz::fuzzArtifact(bases, data, size, scratch->path().string());
  } catch (const std::exception &e) {
    finding("a tampered artifact", e);
  }
  return 0;
}
