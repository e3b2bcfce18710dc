#pragma once
// A fresh empty folder under the system's temporary folder for one test, removed with what it
// holds when the object goes away. mkdtemp makes the name unique, so tests running at once
// (ctest -j) never share a folder.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kiln::test {

class TempDir {
public:
  explicit TempDir(const std::string &prefix = "kiln") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    char *made = mkdtemp(buffer.data());
    if (!made)
      throw std::runtime_error("mkdtemp failed for " + pattern);
    path_ = made;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;

  const std::filesystem::path &path() const { return path_; }
  /// The path of `name` inside the folder.
  std::string file(const std::string &name) const { return (path_ / name).string(); }
  void write(const std::string &name, const std::string &bytes) const {
    std::ofstream out(file(name), std::ios::binary);
    out << bytes;
  }

private:
  std::filesystem::path path_;
};

} // namespace kiln::test
