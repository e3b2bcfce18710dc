#pragma once
// A .npy file mapped into memory read-only instead of read: a dataset larger than memory then
// streams from disk (the kernel pages rows in as they are read and may drop them again). It is
// checked as readNpy checks a file (runtime/Npy.h): a malformed or truncated file is a
// kiln::Error naming it. The elements are the file's bytes: bool elements may be any non-zero
// byte for true (normalizeBools after copying them out).
//
// A file cut short after it was mapped cannot be detected: reading past its new end is a
// SIGBUS, as with any mapped file. Do not rewrite a dataset while a run reads it.
#include <cstdint>
#include <memory>
#include <string>

#include "core/DType.h"

namespace kiln::runtime {

class MappedNpy {
public:
  /// Maps `path`. kiln::Error naming the file when it cannot be opened or mapped, or is not a
  /// valid .npy file of a dtype kiln knows.
  static MappedNpy open(const std::string &path);

  const std::string &path() const;
  const TensorType &type() const;
  /// The first element (C order); null when the array is empty. These are the file's bytes: a
  /// bool element is any byte (true when non-zero), normalised by whoever copies it out.
  const unsigned char *data() const;
  /// What keeps the mapping (and data()) alive, for holders that outlive this object.
  std::shared_ptr<const void> owner() const { return mapping_; }

private:
  MappedNpy() = default;
  struct Mapping;
  std::shared_ptr<const Mapping> mapping_;
};

} // namespace kiln::runtime
