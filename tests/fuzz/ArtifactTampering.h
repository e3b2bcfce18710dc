#pragma once
// Tampering with the shared objects kiln-compile writes (compiled models and training steps),
// for the artifact fuzzer (tests/fuzz/FuzzArtifact.cpp) and the test that replays what it once
// found (tests/runtime/RuntimeFuzzRegressionTest.cpp). The loaders, runtime::Executable::load
// and runtime::TrainingStep::load, must load a tampered file or refuse it with a kiln::Error
// naming it: never crash, read outside what the file maps, allocate without bound or throw
// anything else.
//
// What it covers - what an interrupted copy, a bad disk or a careless edit does to a file:
//  - the file cut short at any length;
//  - any bytes changed in the data that describes the model: the kiln_model_desc itself (ABI
//    version, counts, arena size), its input, output and weight tables, their names, dtype
//    names and shapes (which decide the byte ranges of the weights the file carries), the
//    launch table and launch names, the buffer references, the weight packings, and the
//    training manifest's text (kiln_training()).
//
// What it does not cover, on purpose: the code, the relocations, the dynamic section and the
// ELF and program headers (beyond cutting them short). dlopen trusts those - it applies the
// relocations, runs the constructors, and the loader calls kiln_model() - so a file changed
// there can do whatever code can, and no check in the loader could stop it: a shared object is
// code, and is trusted as such. Nor does it run the models that load: what the kernels do with a
// description that still loads but no longer matches them (a buffer offset moved inside its
// buffer, a dim swapped for another of the same size) is beyond what a loader can check.
//
// The fuzzer's input is a script applied to one of the base files:
//   byte 0                 mode: (byte0 >> 3) picks the base (modulo their count); byte0 % 8
//                          == 0 truncates, anything else edits
//   truncation: bytes 1-4  the new length, little-endian, modulo the file's size
//   edits: 12 bytes each   region (modulo the number of regions), offset in it (2 bytes,
//                          modulo its size), operation (modulo 4: set a byte, xor a byte, write
//                          4 bytes, write 8 bytes, little-endian, cut at the region's end),
//                          value (8 bytes); a short last edit is padded with zeros.
// Regions are found by loading the base and following its description, so a script means the
// same change for any build of the same model: the regression test replays them against the
// files tests/CMakeLists.txt compiles, as the Makefile's `fuzz-artifact` fuzzes them.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::fuzz {

class ArtifactTampering {
public:
  /// A stretch of the file holding part of the description.
  struct Region {
    std::string name; // "weights[2].shape", "manifest"
    size_t offset = 0, size = 0;
  };

  /// Reads the model or training step at `path` and finds its description's regions (loading it
  /// with dlopen). FuzzFinding when it is not a model kiln-compile wrote.
  explicit ArtifactTampering(const std::string &path);

  const std::string &path() const { return path_; }
  const std::string &bytes() const { return bytes_; }
  const std::vector<Region> &regions() const { return regions_; }

  /// The file with `script` applied (the format above; byte 0's base selection is the
  /// caller's). The empty script gives the file unchanged.
  std::string tamper(const uint8_t *script, size_t size) const;

  /// Calls `each` on every truncation of the file and every region byte set to 0x00 and 0xff
  /// and with its lowest and highest bit flipped, with words describing the change.
  void sweep(const std::function<void(const std::string &bytes, const std::string &change)> &each) const;

private:
  std::string path_, bytes_;
  std::vector<Region> regions_;
};

/// Applies `script` to `bases` (its byte 0 picks the base) and loads the result.
void fuzzArtifact(const std::vector<ArtifactTampering> &bases, const uint8_t *script, size_t size,
                  const std::string &scratchDir);

/// Writes `bytes` to a fresh file in `scratchDir` and loads it as a compiled model
/// (runtime::Executable::load, with the weights it carries) and as a training step
/// (runtime::TrainingStep::load); returns normally when each load succeeds or throws a
/// kiln::Error naming the file, and throws FuzzFinding for an error that does not name it.
void loadTamperedArtifact(const std::string &bytes, const std::string &scratchDir);

} // namespace kiln::fuzz
