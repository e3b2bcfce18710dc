#pragma once
// The memory a shared object opened with dlopen maps: its loadable segments. A compiled model's
// description (runtime/KernelAbi.h) is data in its file - counts, ranks, tables, strings, the
// weights it carries - and a damaged file (a flipped byte in a count or a rank, a shape that
// grew) makes the loader read past the tables it points to, and past the mapping. So the
// loaders (Executable::load, TrainingStep::load) check each table, string and weight range
// against the object's segments before reading it: a damaged description is a kiln::Error, not
// a crash. The object's code and relocations are trusted, as dlopen trusts them.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::runtime {

class LoadedObject {
public:
  /// The segments of the object `handle` (from dlopen) maps; `what` names it in errors.
  /// kiln::Error when they cannot be found.
  static LoadedObject of(void *handle, const std::string &what);

  /// Whether all of [address, address + bytes) lies in one segment.
  bool contains(const void *address, uint64_t bytes) const;
  /// Whether `text` lies in a segment and ends, with its NUL, in the same one.
  bool containsString(const char *text) const;

private:
  const std::pair<uintptr_t, uintptr_t> *segmentOf(const void *address) const;
  std::vector<std::pair<uintptr_t, uintptr_t>> segments_; // [begin, end) of each
};

} // namespace kiln::runtime
