// A .npy file mapped read-only (see MappedNpy.h): mmap of the whole file, then the header
// checks of parseNpyHeader on the mapped bytes.
#include "runtime/MappedNpy.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/Error.h"
#include "runtime/Npy.h"

namespace kiln::runtime {

struct MappedNpy::Mapping {
  std::string path;
  void *address = nullptr;
  size_t bytes = 0;
  NpyHeader header;

  ~Mapping() {
    if (address)
      munmap(address, bytes);
  }
};

MappedNpy MappedNpy::open(const std::string &path) {
  auto mapping = std::make_shared<Mapping>();
  mapping->path = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    fail("{}: cannot open file: {}", path, std::strerror(errno));
  struct stat status;
  if (fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    ::close(fd);
    fail("{}: not a regular file", path);
  }
  mapping->bytes = static_cast<size_t>(status.st_size);
  if (mapping->bytes > 0) { // mmap of zero bytes fails; the header check below names the file
    void *address = mmap(nullptr, mapping->bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int error = errno;
      ::close(fd);
      fail("{}: cannot map file: {}", path, std::strerror(error));
    }
    mapping->address = address;
  }
  ::close(fd); // the mapping keeps the file
  mapping->header = parseNpyHeader(static_cast<const char *>(mapping->address), mapping->bytes, path);
  MappedNpy mapped;
  mapped.mapping_ = std::move(mapping);
  return mapped;
}

const std::string &MappedNpy::path() const { return mapping_->path; }
const TensorType &MappedNpy::type() const { return mapping_->header.type; }

const unsigned char *MappedNpy::data() const {
  if (mapping_->header.type.numElements() == 0)
    return nullptr;
  return static_cast<const unsigned char *>(mapping_->address) + mapping_->header.dataOffset;
}

} // namespace kiln::runtime
