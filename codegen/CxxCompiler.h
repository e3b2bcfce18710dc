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

/// The line that starts a unit of generated source: a kernel, or a model's descriptor (which
/// declares the kernels it names). Everything before the first one is the prelude every unit
/// needs; units need nothing of each other, so compileSource may compile them in several
/// translation units at once and link those.
inline constexpr const char *kSourceUnitMarker = "//@kiln-unit";

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
  /// Compiler processes one compile may run at once, each on a share of the source's units
  /// (kSourceUnitMarker), then linked; 0: $KILN_COMPILE_JOBS, else one per CPU the process may
  /// run on (1: one translation unit, as before). A source splits only into shares of at least
  /// kMinUnitBytesPerJob, so a small model stays one translation unit.
  int jobs = 0;
};

/// Bytes of units below which another compiler process costs more (parsing the prelude
/// again) than it saves.
inline constexpr size_t kMinUnitBytesPerJob = 32 * 1024;

/// The translation units compileSource compiles `source` as with `jobs` processes: the prelude
/// followed by a contiguous share of the units each, shares balanced by bytes; `source`
/// itself when it has no units or too few bytes of them to split.
std::vector<std::string> splitSourceUnits(const std::string &source, int jobs);

struct CompiledObject {
  std::string soPath;
  std::string sourcePath;
  std::string key;
  bool cacheHit = false;
};

/// Compiles `source` (or finds it in the cache): in several translation units at once when it
/// splits (splitSourceUnits), linked into one shared object. Throws kiln::Error when the
/// compiler cannot be run or fails; the message names the generated file (the failing part's,
/// kept beside it) and the compiler's first error line.
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
