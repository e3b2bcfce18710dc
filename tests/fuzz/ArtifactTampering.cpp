// Tampering with compiled artifacts (see ArtifactTampering.h): finding the description's
// regions in the file, applying scripts, and loading the result.
#include "tests/fuzz/ArtifactTampering.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "core/Error.h"
#include "runtime/Executable.h"
#include "runtime/KernelAbi.h"
#include "runtime/TrainingManifest.h"
#include "runtime/TrainingStep.h"
#include "tests/fuzz/FileFuzzTargets.h"

namespace kiln::fuzz {

namespace {

std::string readWholeFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw FuzzFinding("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

uint64_t littleEndian(const uint8_t *bytes, size_t count) {
  uint64_t value = 0;
  for (size_t i = count; i-- > 0;)
    value = (value << 8) | bytes[i];
  return value;
}

/// Where the loaded base's addresses are in its file: the loadable segments' file-backed parts.
class AddressMap {
public:
  AddressMap(const std::string &bytes, uintptr_t loadBase) : loadBase_(loadBase) {
    Elf64_Ehdr header;
    std::memcpy(&header, bytes.data(), sizeof header);
    for (int i = 0; i < header.e_phnum; ++i) {
      Elf64_Phdr segment;
      std::memcpy(&segment, bytes.data() + header.e_phoff + size_t(i) * sizeof segment, sizeof segment);
      if (segment.p_type == PT_LOAD)
        segments_.push_back(segment);
    }
  }

  /// The file offset of [address, address + size), when the file holds all of it.
  std::optional<size_t> offsetOf(const void *address, size_t size) const {
    uintptr_t virtualAddress = reinterpret_cast<uintptr_t>(address) - loadBase_;
    for (const Elf64_Phdr &segment : segments_)
      if (virtualAddress >= segment.p_vaddr && virtualAddress + size <= segment.p_vaddr + segment.p_filesz)
        return static_cast<size_t>(segment.p_offset + (virtualAddress - segment.p_vaddr));
    return std::nullopt;
  }

private:
  uintptr_t loadBase_;
  std::vector<Elf64_Phdr> segments_;
};

/// Follows the loaded base's description and records where each part of it lies in the file.
class RegionFinder {
public:
  RegionFinder(const std::string &bytes, const AddressMap &addresses, std::vector<ArtifactTampering::Region> &regions)
      : bytes_(bytes), addresses_(addresses), regions_(regions) {}

  void add(const std::string &name, const void *address, size_t size) {
    if (!address || size == 0)
      return;
    std::optional<size_t> offset = addresses_.offsetOf(address, size);
    if (!offset) // in .bss, or not in this file
      return;
    for (const ArtifactTampering::Region &region : regions_)
      if (region.offset == *offset) // a string the linker merged with another
        return;
    regions_.push_back({name, *offset, size});
  }

  void addString(const std::string &name, const char *text) {
    if (text)
      add(name, text, std::strlen(text) + 1);
  }

  void addTensors(const char *table, const kiln_tensor_desc *descs, int32_t count) {
    add(table, descs, sizeof(kiln_tensor_desc) * static_cast<size_t>(count));
    for (int32_t i = 0; i < count; ++i) {
      std::string name = fmt::format("{}[{}]", table, i);
      addString(name + ".name", descs[i].name);
      addString(name + ".dtype", descs[i].dtype);
      add(name + ".shape", descs[i].shape, sizeof(int64_t) * static_cast<size_t>(descs[i].rank));
    }
  }

  /// The description an ahead-of-time model exports is a copy made at its first call (in
  /// .bss); the file holds the one it copies, found by its integer fields.
  void addDescription(const kiln_model_desc &desc) {
    size_t before = regions_.size();
    add("description", &desc, sizeof desc);
    if (regions_.size() > before)
      return;
    const size_t prefix = offsetof(kiln_model_desc, num_launches) + sizeof desc.num_launches; // the counts
    const char *first = reinterpret_cast<const char *>(&desc);
    for (size_t at = 0; at + sizeof desc <= bytes_.size(); at += alignof(kiln_model_desc))
      if (std::memcmp(bytes_.data() + at, first, prefix) == 0 &&
          std::memcmp(bytes_.data() + at + offsetof(kiln_model_desc, arena_bytes), &desc.arena_bytes,
                      sizeof desc.arena_bytes) == 0) {
        regions_.push_back({"description", at, sizeof desc});
        return;
      }
  }

private:
  const std::string &bytes_;
  const AddressMap &addresses_;
  std::vector<ArtifactTampering::Region> &regions_;
};

} // namespace

ArtifactTampering::ArtifactTampering(const std::string &path) : path_(path), bytes_(readWholeFile(path)) {
  if (bytes_.size() < sizeof(Elf64_Ehdr))
    throw FuzzFinding(path + " is not a shared object");
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    throw FuzzFinding(fmt::format("cannot load {}: {}", path, dlerror()));
  struct Close {
    void *handle;
    ~Close() { dlclose(handle); }
  } close{handle};
  link_map *map = nullptr;
  auto model = reinterpret_cast<kiln_model_fn>(dlsym(handle, KILN_MODEL_SYMBOL));
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !model || !model())
    throw FuzzFinding(path + " is not a compiled model");
  AddressMap addresses(bytes_, map->l_addr);
  RegionFinder finder(bytes_, addresses, regions_);
  const kiln_model_desc &desc = *model();
  finder.addDescription(desc);
  finder.addTensors("inputs", desc.inputs, desc.num_inputs);
  finder.addTensors("outputs", desc.outputs, desc.num_outputs);
  finder.addTensors("weights", desc.weights, desc.num_weights);
  finder.add("launches", desc.launches, sizeof(kiln_launch) * static_cast<size_t>(desc.num_launches));
  int64_t numRefs = 0;
  for (int32_t l = 0; l < desc.num_launches; ++l) {
    finder.addString(fmt::format("launches[{}].name", l), desc.launches[l].name);
    numRefs = std::max(numRefs, int64_t(desc.launches[l].first_ref) + desc.launches[l].num_refs);
  }
  finder.add("refs", desc.refs, sizeof(kiln_buffer_ref) * static_cast<size_t>(numRefs));
  finder.add("packings", desc.packings, sizeof(kiln_weight_packing) * static_cast<size_t>(desc.num_packings));
  if (auto manifest = reinterpret_cast<runtime::kiln_training_fn>(dlsym(handle, KILN_TRAINING_SYMBOL)))
    finder.addString("manifest", manifest());
  if (regions_.empty())
    throw FuzzFinding(path + ": no part of its description is in the file");
}

std::string ArtifactTampering::tamper(const uint8_t *script, size_t size) const {
  std::string out = bytes_;
  if (size == 0)
    return out;
  if (script[0] % 8 == 0) {
    uint8_t length[4] = {};
    std::memcpy(length, script + 1, std::min<size_t>(size - 1, 4));
    out.resize(static_cast<size_t>(littleEndian(length, 4) % bytes_.size()));
    return out;
  }
  for (size_t at = 1; at < size; at += 12) {
    uint8_t edit[12] = {};
    std::memcpy(edit, script + at, std::min<size_t>(size - at, 12));
    const Region &region = regions_[edit[0] % regions_.size()];
    size_t offset = static_cast<size_t>(littleEndian(edit + 1, 2) % region.size);
    uint64_t value = littleEndian(edit + 4, 8);
    char *target = &out[region.offset + offset];
    switch (edit[3] % 4) {
    case 0:
      *target = static_cast<char>(value);
      break;
    case 1:
      *target = static_cast<char>(*target ^ static_cast<char>(value));
      break;
    default: {
      size_t width = std::min<size_t>(edit[3] % 4 == 2 ? 4 : 8, region.size - offset);
      for (size_t i = 0; i < width; ++i)
        target[i] = static_cast<char>(value >> (8 * i));
      break;
    }
    }
  }
  return out;
}

void ArtifactTampering::sweep(const std::function<void(const std::string &, const std::string &)> &each) const {
  for (size_t length = 0; length < bytes_.size(); ++length)
    each(bytes_.substr(0, length), fmt::format("cut to {} bytes", length));
  for (const Region &region : regions_)
    for (size_t i = 0; i < region.size; ++i) {
      const size_t at = region.offset + i;
      const auto original = static_cast<uint8_t>(bytes_[at]);
      for (uint8_t value : {uint8_t(0x00), uint8_t(0xff), uint8_t(original ^ 0x01), uint8_t(original ^ 0x80)}) {
        if (value == original)
          continue;
        std::string changed = bytes_;
        changed[at] = static_cast<char>(value);
        each(changed, fmt::format("{} byte {} set to {:#04x}", region.name, i, value));
      }
    }
}

void fuzzArtifact(const std::vector<ArtifactTampering> &bases, const uint8_t *script, size_t size,
                  const std::string &scratchDir) {
  const ArtifactTampering &base = bases[size == 0 ? 0 : (script[0] >> 3) % bases.size()];
  loadTamperedArtifact(base.tamper(script, size), scratchDir);
}

void loadTamperedArtifact(const std::string &bytes, const std::string &scratchDir) {
  // A fresh name each time: dlopen hands back the object already loaded from a path.
  static uint64_t counter = 0;
  const std::string path = fmt::format("{}/tampered-{}.so", scratchDir, counter++);
  writeFile(path, bytes);
  struct Remove {
    const std::string &path;
    ~Remove() {
      std::error_code ignored;
      std::filesystem::remove(path, ignored);
    }
  } remove{path};
  try {
    (void)runtime::Executable::load(path);
  } catch (const Error &error) {
    expectNamed(error, path);
  }
  try {
    (void)runtime::TrainingStep::load(path);
  } catch (const Error &error) {
    expectNamed(error, path);
  }
}

} // namespace kiln::fuzz
