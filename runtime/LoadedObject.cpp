// A dlopen'ed object's segments (see LoadedObject.h), from its link map and the program headers
// the dynamic loader reports for it.
#include "runtime/LoadedObject.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>

#include "core/Error.h"

namespace kiln::runtime {

namespace {

struct Search {
  const link_map *map;
  std::vector<std::pair<uintptr_t, uintptr_t>> *segments;
  bool found = false;
};

int collectSegments(dl_phdr_info *info, size_t, void *data) {
  auto &search = *static_cast<Search *>(data);
  if (info->dlpi_addr != search.map->l_addr || !info->dlpi_name || !search.map->l_name ||
      std::strcmp(info->dlpi_name, search.map->l_name) != 0)
    return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &segment = info->dlpi_phdr[i];
    if (segment.p_type == PT_LOAD && (segment.p_flags & PF_R) != 0) {
      uintptr_t begin = info->dlpi_addr + segment.p_vaddr;
      search.segments->emplace_back(begin, begin + segment.p_memsz);
    }
  }
  search.found = true;
  return 1;
}

} // namespace

LoadedObject LoadedObject::of(void *handle, const std::string &what) {
  link_map *map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map)
    fail("{}: cannot find where the dynamic loader mapped it", what);
  LoadedObject object;
  Search search{map, &object.segments_};
  dl_iterate_phdr(collectSegments, &search);
  if (!search.found || object.segments_.empty())
    fail("{}: cannot find where the dynamic loader mapped it", what);
  return object;
}

const std::pair<uintptr_t, uintptr_t> *LoadedObject::segmentOf(const void *address) const {
  auto at = reinterpret_cast<uintptr_t>(address);
  for (const auto &segment : segments_)
    if (at >= segment.first && at < segment.second)
      return &segment;
  return nullptr;
}

bool LoadedObject::contains(const void *address, uint64_t bytes) const {
  if (bytes == 0)
    return true; // nothing is read
  const auto *segment = segmentOf(address);
  return segment && bytes <= segment->second - reinterpret_cast<uintptr_t>(address);
}

bool LoadedObject::containsString(const char *text) const {
  const auto *segment = segmentOf(text);
  return segment && std::memchr(text, '\0', segment->second - reinterpret_cast<uintptr_t>(text)) != nullptr;
}

} // namespace kiln::runtime
