#pragma once
// The compiler driver: generated C++ in, a shared object on disk out, cached.
//
// The cache key is a hash of the source, the flags, the compiler command and the compiler's
// version (the first line of `<compiler> --version`, asked once per process), so a second
// compile of the same model is a file lookup. Entries live in one folder as <key>.cpp (kept
// for inspection and error messages) and <key>.so; both are written under a temporary name and
// renamed into place, so concurrent compiles of one model (threads or processes) never see a
// half-written file. Using an entry touches its modification time; when the folder grows past
// the byte limit, the least recently used entries are removed.
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::codegen {

struct CompilerOptions {
  /// Empty: $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln.
  std::string cacheDir;
  /// The compiler command; empty: $KILN_CXX, else "c++".
  std::string compiler;
  /// -fno-math-errno lets the compiler treat math functions as pure (hoist and vectorise
  /// around them) without changing any result kiln's semantics define. GCC also gets
  /// -fno-tree-sink, a workaround for a vectorizer bug (CxxCompiler.cpp, effectiveFlags).
  std::vector<std::string> flags = {"-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-w"};
  /// Most bytes the cache folder may hold; 0 means no limit.
  int64_t cacheByteLimit = int64_t(2) << 30;
};

struct CompiledObject {
  std::string soPath;
  std::string sourcePath;
  std::string key;
  bool cacheHit = false;
};

/// Compiles `source` (or finds it in the cache). Throws kiln::Error when the compiler cannot
/// be run or fails; the message names the generated file and the compiler's first error line.
CompiledObject compileSource(const std::string &source, const CompilerOptions &options = {});

/// Compiles the source file at `sourcePath` into the shared object `outputPath`, outside the
/// cache: for models compiled ahead of time, whose sources pull in files beside them (so the
/// text alone is no key). The object is written under a temporary name and renamed into place.
/// kiln::Error as compileSource.
void compileSourceFile(const std::string &sourcePath, const std::string &outputPath,
                       const CompilerOptions &options = {});

/// The folder compileSource uses for `options` (created if missing).
std::string cacheDirectory(const CompilerOptions &options = {});

/// The first line of `<compiler> --version`, computed once per process and compiler.
std::string compilerVersion(const std::string &compiler);

/// Removes least recently used entries of `dir` until it holds at most `byteLimit` bytes,
/// sparing the entry `keep` (a key). Returns the bytes removed.
int64_t trimCache(const std::string &dir, int64_t byteLimit, const std::string &keep = "");

/// Process-wide counts, for tests and tools: compiler runs and cache hits.
struct CompilerCounters {
  int64_t compiles = 0;
  int64_t cacheHits = 0;
};
CompilerCounters compilerCounters();

} // namespace kiln::codegen
