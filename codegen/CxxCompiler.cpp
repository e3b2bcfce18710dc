// The compiler driver (see CxxCompiler.h).
#include "codegen/CxxCompiler.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sched.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/Error.h"

extern char **environ;

namespace kiln::codegen {

namespace fs = std::filesystem;

namespace {

std::atomic<int64_t> compileCount{0}, hitCount{0}, tempCounter{0};

// FNV-1a, twice with different offsets: a stable 128-bit key (std::hash may differ between
// builds, and the cache outlives the process).
std::string stableHash(const std::string &text) {
  auto fnv = [&](uint64_t hash) {
    for (unsigned char ch : text) {
      hash ^= ch;
      hash *= 1099511628211ull;
    }
    return hash;
  };
  return fmt::format("{:016x}{:016x}", fnv(14695981039346656037ull), fnv(0x9e3779b97f4a7c15ull));
}

std::string tempSuffix() {
  return fmt::format(".tmp.{}.{}.{}", static_cast<long>(getpid()),
                     std::hash<std::thread::id>()(std::this_thread::get_id()) % 100000, tempCounter++);
}

void writeAtomically(const std::string &path, const std::string &contents) {
  std::string temp = path + tempSuffix();
  {
    std::ofstream file(temp, std::ios::binary);
    file << contents;
    if (!file.flush())
      fail("codegen: cannot write {}", temp);
  }
  std::error_code error;
  fs::rename(temp, path, error);
  if (error)
    fail("codegen: cannot rename {} to {}: {}", temp, path, error.message());
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

void touch(const std::string &path) { utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

// Starts argv with stdout and stderr into `logPath`; returns its pid, or -1 (not started,
// why in `spawnError`).
pid_t spawnLogged(const std::vector<std::string> &argv, const std::string &logPath, std::string &spawnError) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    spawnError = std::strerror(spawned);
    return -1;
  }
  return pid;
}

// Waits for a process spawnLogged started; returns its exit status (-1 when it was not started
// or cannot be waited for).
int waitLogged(pid_t pid) {
  if (pid < 0)
    return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Runs argv with stdout and stderr into `logPath`; returns the exit status (-1: not run).
int runLogged(const std::vector<std::string> &argv, const std::string &logPath, std::string &spawnError) {
  return waitLogged(spawnLogged(argv, logPath, spawnError));
}

std::string resolveCompiler(const CompilerOptions &options) {
  if (!options.compiler.empty())
    return options.compiler;
  const char *env = std::getenv("KILN_CXX");
  return env && *env ? env : "c++";
}

// The flags the compiler runs with: the options' own, and for GCC -fno-tree-sink. GCC 12.2's
// vectorizer miscompiles a reduction loop whose body selects between two loads of an
// interleaved group (a where() summed over rows of 2-7 elements comes out short, or reads
// past the group) once tree sinking has moved the load of the unselected arm into a branch,
// making it a masked load. The generated kernels have no branches for sinking to help, and
// clang does not know the flag. Tests: CodegenReduction.SumsOfASelectOverShortInterleavedRows,
// tests/fuzz/compile/regressions/reduce-sum-square-of-where.kir.
std::vector<std::string> effectiveFlags(const std::string &compiler, const CompilerOptions &options) {
  std::vector<std::string> flags = options.flags;
  if (compilerVersion(compiler).find("clang") == std::string::npos)
    flags.push_back("-fno-tree-sink");
  return flags;
}

std::string firstErrorLine(const std::string &log) {
  std::istringstream lines(log);
  std::string line, first;
  while (std::getline(lines, line)) {
    if (first.empty() && !line.empty())
      first = line;
    if (line.find(": error") != std::string::npos || line.rfind("error", 0) == 0)
      return line;
  }
  return first.empty() ? "(no output)" : first;
}

// The CPUs this process may run on (its affinity: a process pinned to one core gets one).
int availableCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0)
    return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

// Renames a finished object over `outputPath` (a reader sees the old one or the new one, never a
// half-written file); removes it when that fails.
void moveIntoPlace(const std::string &tempSo, const std::string &outputPath) {
  std::error_code error;
  fs::rename(tempSo, outputPath, error);
  if (error) {
    std::remove(tempSo.c_str());
    fail("codegen: cannot rename {} to {}: {}", tempSo, outputPath, error.message());
  }
}

// The flags a translation unit compiles to an object (or a header to its precompiled form)
// with: the effective flags but -shared, which only the link takes.
std::vector<std::string> objectFlags(const std::string &compiler, const CompilerOptions &options) {
  std::vector<std::string> flags;
  for (const std::string &flag : effectiveFlags(compiler, options))
    if (flag != "-shared")
      flags.push_back(flag);
  return flags;
}

// Runs the compiler on `sourcePath` into a temporary file beside `outputPath`, then renames
// it into place, so that a reader never sees a half-written object. `logBase` + a temporary
// suffix holds the compiler's messages while it runs.
void compileInto(const std::string &compiler, const CompilerOptions &options, const std::string &sourcePath,
                 const std::string &outputPath, const std::string &logBase) {
  std::string tempSo = outputPath + tempSuffix();
  std::string log = logBase + tempSuffix();
  std::vector<std::string> argv{compiler};
  std::vector<std::string> flags = effectiveFlags(compiler, options);
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", tempSo, sourcePath});
  std::string spawnError;
  int status = runLogged(argv, log, spawnError);
  ++compileCount;
  std::string output = readFile(log);
  std::remove(log.c_str());
  if (status != 0) {
    std::remove(tempSo.c_str());
    if (status < 0)
      fail("codegen: cannot run the C++ compiler '{}' on {}: {}", compiler, sourcePath, spawnError);
    fail("codegen: the C++ compiler failed on {}: {}", sourcePath, firstErrorLine(output));
  }
  moveIntoPlace(tempSo, outputPath);
}

// compileInto for the parts of one source (splitSourceUnits): each part compiled to an object
// by its own compiler process, all at once, then the objects linked into `outputPath`. A part
// that fails is kept beside `wholePath` (the source as one file) for its line numbers.
void compilePartsInto(const std::string &compiler, const CompilerOptions &options,
                      const std::vector<std::string> &parts, const std::string &wholePath,
                      const std::string &outputPath, const std::string &logBase) {
  std::vector<std::string> flags = effectiveFlags(compiler, options), compileFlags = objectFlags(compiler, options);
  const std::string suffix = tempSuffix();
  struct Part {
    std::string source, object, log;
    pid_t pid = -1;
    std::string spawnError;
  };
  std::vector<Part> jobs(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    Part &job = jobs[i];
    job.source = fmt::format("{}.part{}{}.cpp", logBase, i, suffix);
    job.object = fmt::format("{}.part{}{}.o", logBase, i, suffix);
    job.log = fmt::format("{}.part{}{}.log", logBase, i, suffix);
    writeAtomically(job.source, parts[i]);
    std::vector<std::string> argv{compiler};
    argv.insert(argv.end(), compileFlags.begin(), compileFlags.end());
    argv.insert(argv.end(), {"-c", "-o", job.object, job.source});
    job.pid = spawnLogged(argv, job.log, job.spawnError);
  }
  // Every process is waited for before any error is raised: none outlives this call.
  std::string failure;
  for (size_t i = 0; i < jobs.size(); ++i) {
    Part &job = jobs[i];
    int status = waitLogged(job.pid);
    ++compileCount;
    std::string output = readFile(job.log);
    std::remove(job.log.c_str());
    if (status == 0 || !failure.empty())
      continue;
    if (status < 0) {
      failure = fmt::format("codegen: cannot run the C++ compiler '{}' on {}: {}", compiler, job.source,
                            job.spawnError.empty() ? "cannot wait for it" : job.spawnError);
      continue;
    }
    // Kept, under a name without the temporary suffix, for the message's line numbers.
    std::string kept = fmt::format("{}.part{}.cpp", fs::path(wholePath).replace_extension().string(), i);
    std::error_code ignored;
    fs::rename(job.source, kept, ignored);
    job.source = kept;
    failure = fmt::format("codegen: the C++ compiler failed on {} (part {} of {}): {}", kept, i + 1, jobs.size(),
                          firstErrorLine(output));
  }
  auto cleanUp = [&] {
    for (const Part &job : jobs) {
      if (job.source.find(suffix) != std::string::npos)
        std::remove(job.source.c_str());
      std::remove(job.object.c_str());
    }
  };
  if (!failure.empty()) {
    cleanUp();
    fail("{}", failure);
  }
  std::string tempSo = outputPath + suffix, log = logBase + suffix;
  std::vector<std::string> argv{compiler};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", tempSo});
  for (const Part &job : jobs)
    argv.push_back(job.object);
  std::string spawnError;
  int status = runLogged(argv, log, spawnError);
  std::string output = readFile(log);
  std::remove(log.c_str());
  cleanUp();
  if (status != 0) {
    std::remove(tempSo.c_str());
    if (status < 0)
      fail("codegen: cannot run the C++ compiler '{}' to link {}: {}", compiler, wholePath, spawnError);
    fail("codegen: linking the parts of {} failed: {}", wholePath, firstErrorLine(output));
  }
  moveIntoPlace(tempSo, outputPath);
}

// The prelude of generated sources as a header in `dir` with its precompiled form beside it
// (GCC reads <header>.gch in its place when the flags match, and the header otherwise), made
// once per prelude, flags and compiler: parsing the prelude's standard headers took 0.27 of a
// GPT-2 block stack's 0.68 s compile. Not for clang, which does not read .gch files so.
class PrecompiledPrelude {
public:
  PrecompiledPrelude(const std::string &compiler, const CompilerOptions &options, const std::string &dir,
                     const std::string &prelude) {
    if (prelude.empty() || compilerVersion(compiler).find("clang") != std::string::npos)
      return;
    // Made beside a compile only where a CPU is free for it: on one, it would double the
    // first compile (and that compile's units parse the prelude themselves anyway).
    const bool canMake = availableCpus() > 1;
    std::vector<std::string> flags = objectFlags(compiler, options);
    std::string key = prelude + '\0' + compiler + '\0' + compilerVersion(compiler);
    for (const std::string &flag : flags)
      key += '\0' + flag;
    header_ = fmt::format("{}/prelude-{}.h", dir, stableHash(key));
    gch_ = header_ + ".gch";
    if (fs::exists(gch_) && fs::exists(header_)) {
      touch(header_);
      touch(gch_);
      ready_ = true;
      return;
    }
    // Made beside this compile, which parses the prelude itself; later compiles use it.
    if (!canMake)
      return;
    writeAtomically(header_, prelude);
    temp_ = gch_ + tempSuffix();
    log_ = header_ + tempSuffix() + ".log";
    std::vector<std::string> argv{compiler};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-x", "c++-header", "-o", temp_, header_});
    std::string spawnError;
    pid_ = spawnLogged(argv, log_, spawnError);
  }
  PrecompiledPrelude(const PrecompiledPrelude &) = delete;
  PrecompiledPrelude &operator=(const PrecompiledPrelude &) = delete;
  /// Waits for the precompile started here (whatever the compile did), and keeps its result.
  ~PrecompiledPrelude() {
    if (pid_ < 0)
      return;
    int status = waitLogged(pid_);
    std::remove(log_.c_str());
    std::error_code error;
    if (status == 0)
      fs::rename(temp_, gch_, error);
    if (status != 0 || error)
      std::remove(temp_.c_str()); // a failed precompile: units parse the prelude, as before
  }
  /// The header to include in the prelude's place, when its precompiled form was there
  /// already; "" otherwise.
  std::string header() const { return ready_ ? header_ : ""; }
  /// Whether a compiler process is making the precompiled form now (and takes a CPU).
  bool making() const { return pid_ >= 0; }

private:
  std::string header_, gch_, temp_, log_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

} // namespace

std::vector<std::string> splitSourceUnits(const std::string &source, int jobs) {
  // Unit starts: the marker at the start of a line.
  const std::string marker = std::string(kSourceUnitMarker) + "\n";
  std::vector<size_t> starts;
  for (size_t at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1))
    if (at == 0 || source[at - 1] == '\n')
      starts.push_back(at);
  if (starts.size() < 2 || jobs < 2)
    return {source};
  const size_t unitBytes = source.size() - starts[0];
  const size_t shares = std::min({static_cast<size_t>(jobs), starts.size(), unitBytes / kMinUnitBytesPerJob});
  if (shares < 2)
    return {source};
  const std::string prelude = source.substr(0, starts[0]);
  starts.push_back(source.size());
  std::vector<std::string> parts;
  size_t first = 0; // the share's first unit
  for (size_t share = 0; share < shares; ++share) {
    // Units whose middle lies before this share's part of the bytes ends (the last share
    // takes the rest), leaving one at least for each share after it.
    const size_t goal = starts[0] + unitBytes * (share + 1) / shares;
    size_t end = first + 1;
    while (end + 1 < starts.size() && (share + 1 == shares || starts[end] + (starts[end + 1] - starts[end]) / 2 < goal) &&
           starts.size() - 1 - end > shares - share - 1)
      ++end;
    parts.push_back(prelude + source.substr(starts[first], starts[end] - starts[first]));
    first = end;
  }
  return parts;
}

std::string cacheDirectory(const CompilerOptions &options) {
  std::string dir = options.cacheDir;
  if (dir.empty()) {
    if (const char *env = std::getenv("KILN_CACHE_DIR"); env && *env)
      dir = env;
    else if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
      dir = std::string(xdg) + "/kiln";
    else if (const char *home = std::getenv("HOME"); home && *home)
      dir = std::string(home) + "/.cache/kiln";
    else
      dir = "/tmp/kiln-cache";
  }
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir))
    fail("codegen: cannot create the compile cache folder {}: {}", dir, error ? error.message() : "not a folder");
  return dir;
}

std::string compilerVersion(const std::string &compiler) {
  static std::mutex mutex;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = versions.find(compiler);
  if (it != versions.end())
    return it->second;
  std::string log = (fs::temp_directory_path() / ("kiln-cxx-version" + tempSuffix())).string();
  std::string spawnError;
  int status = runLogged({compiler, "--version"}, log, spawnError);
  std::string output = readFile(log);
  std::remove(log.c_str());
  if (status != 0)
    fail("codegen: cannot run the C++ compiler '{}': {}", compiler,
         status < 0 ? spawnError : firstErrorLine(output));
  std::string version = output.substr(0, output.find('\n'));
  versions[compiler] = version;
  return version;
}

CompiledObject compileSource(const std::string &source, const CompilerOptions &options) {
  std::string compiler = resolveCompiler(options);
  std::string dir = cacheDirectory(options);
  std::string flags;
  for (const std::string &flag : effectiveFlags(compiler, options))
    flags += flag + " ";
  CompiledObject object;
  object.key = stableHash(source + '\0' + flags + '\0' + compiler + '\0' + compilerVersion(compiler));
  object.sourcePath = dir + "/" + object.key + ".cpp";
  object.soPath = dir + "/" + object.key + ".so";
  if (fs::exists(object.soPath)) {
    touch(object.soPath);
    touch(object.sourcePath);
    object.cacheHit = true;
    ++hitCount;
    return object;
  }
  writeAtomically(object.sourcePath, source);
  // Generated source (its units marked) includes its prelude precompiled, where it can.
  const size_t preludeBytes = source.find(std::string(kSourceUnitMarker) + "\n");
  PrecompiledPrelude prelude(compiler, options, dir, preludeBytes == std::string::npos ? "" : source.substr(0, preludeBytes));
  const std::string header = prelude.header();
  int jobs = options.jobs;
  if (jobs <= 0) {
    const char *env = std::getenv("KILN_COMPILE_JOBS");
    jobs = env && *env ? std::atoi(env) : availableCpus();
    if (prelude.making()) // its CPU is taken
      jobs = std::max(1, jobs - 1);
  }
  std::vector<std::string> parts = splitSourceUnits(source, jobs);
  if (!header.empty())
    for (std::string &part : parts)
      // By its name: the parts are written beside it, and a quoted include looks there first
      // (a cache folder given as a relative path would not resolve from the compiler's).
      part = fmt::format("#include \"{}\"\n", fs::path(header).filename().string()) + part.substr(preludeBytes);
  if (parts.size() > 1 || !header.empty())
    compilePartsInto(compiler, options, parts, object.sourcePath, object.soPath, dir + "/" + object.key);
  else
    compileInto(compiler, options, object.sourcePath, object.soPath, dir + "/" + object.key + ".log");
  if (options.cacheByteLimit > 0)
    trimCache(dir, options.cacheByteLimit, object.key);
  return object;
}

void compileSourceFile(const std::string &sourcePath, const std::string &outputPath,
                       const CompilerOptions &options) {
  std::string compiler = resolveCompiler(options);
  compilerVersion(compiler); // a missing compiler fails here with the usual message
  compileInto(compiler, options, sourcePath, outputPath, outputPath + ".log");
}

int64_t trimCache(const std::string &dir, int64_t byteLimit, const std::string &keep) {
  // Entries by key: total size and the newest modification time of their files.
  struct Entry {
    int64_t bytes = 0;
    fs::file_time_type lastUse = fs::file_time_type::min(); // not {}: file_clock's epoch is in the future
    std::vector<fs::path> files;
  };
  std::map<std::string, Entry> entries;
  int64_t total = 0;
  std::error_code error;
  for (const fs::directory_entry &file : fs::directory_iterator(dir, error)) {
    if (!file.is_regular_file(error))
      continue;
    std::string name = file.path().filename().string();
    std::string key = name.substr(0, name.find('.'));
    if (name.find(".tmp.") != std::string::npos) // someone's compile in progress
      continue;
    Entry &entry = entries[key];
    int64_t bytes = static_cast<int64_t>(file.file_size(error));
    entry.bytes += bytes;
    total += bytes;
    entry.lastUse = std::max(entry.lastUse, file.last_write_time(error));
    entry.files.push_back(file.path());
  }
  if (total <= byteLimit)
    return 0;
  std::vector<std::pair<fs::file_time_type, std::string>> byAge;
  for (const auto &[key, entry] : entries)
    if (key != keep)
      byAge.emplace_back(entry.lastUse, key);
  std::sort(byAge.begin(), byAge.end());
  int64_t removed = 0;
  for (const auto &[time, key] : byAge) {
    if (total - removed <= byteLimit)
      break;
    for (const fs::path &path : entries[key].files)
      fs::remove(path, error);
    removed += entries[key].bytes;
  }
  return removed;
}

CompilerCounters compilerCounters() { return {compileCount.load(), hitCount.load()}; }

} // namespace kiln::codegen
