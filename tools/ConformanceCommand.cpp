// kiln-run --onnx-test: ONNX backend conformance test folders, each imported, run (on the
// reference evaluator, or compiled with --compiled) and compared with its expected outputs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <iostream>
#include <mutex>
#include <optional>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "frontend/onnx/OnnxBackendTest.h"
#include "runtime/ThreadPool.h"
#include "tools/RunCommands.h"

namespace kiln::tools {

namespace {

constexpr double kSlowTestSeconds = 2.0;

/// Calls work(i) for every i < count on the pool's threads (the calling one included), each
/// thread claiming the next i as it comes free: tests, compiles and runs differ in length by
/// orders of magnitude, so the pool's equal chunks would leave threads idle behind a slow one.
/// work must not throw (it may run on a worker thread).
void forEachIndex(runtime::ThreadPool &pool, size_t count, const std::function<void(size_t)> &work) {
  std::atomic<size_t> next{0};
  pool.parallelFor(pool.numThreads(), 1, [&](int64_t, int64_t) {
    for (size_t i = next++; i < count; i = next++)
      work(i);
  });
}

/// The reason an exception gives, as one line.
std::string reasonOf(const std::exception_ptr &error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::bad_alloc &) {
    return "out of memory";
  } catch (const std::exception &e) {
    return oneLine(e.what());
  } catch (...) {
    return "an unknown exception";
  }
}

/// --onnx-test --compiled, in stages: import every test's data sets (parallel); lower each data
/// set's graph with its own symbol prefix (parallel; an op codegen does not support yet skips
/// the test); compile the lowered models in batches, one translation unit each (parallel, so
/// --jobs 2 runs two compilers); load, run and compare every model (parallel). A test passes
/// when every data set does; a batch the compiler rejects is compiled model by model instead.
std::vector<frontend::OnnxTestResult> runCompiledTests(const std::vector<std::string> &dirs,
                                                       const frontend::OnnxTestOptions &testOptions,
                                                       const RunOptions &options, runtime::ThreadPool &testPool) {
  std::vector<frontend::OnnxPreparedTest> tests(dirs.size());
  forEachIndex(testPool, dirs.size(), [&](size_t i) { tests[i] = frontend::prepareOnnxTestDir(dirs[i]); });

  struct Job {
    size_t test = 0;
    const frontend::OnnxTestCase *testCase = nullptr;
    std::optional<codegen::LoweredModel> lowered;
    std::string soPath;   // set once compiled
    std::string failure;  // why it failed, once it has
  };
  std::vector<Job> jobs;
  for (size_t t = 0; t < tests.size(); ++t)
    if (tests[t].result.status == frontend::OnnxTestStatus::Pass)
      for (const frontend::OnnxTestCase &testCase : tests[t].cases)
        jobs.push_back({t, &testCase, std::nullopt, "", ""});
  std::mutex resultsMutex;
  auto endTest = [&](size_t t, frontend::OnnxTestStatus status, const std::string &reason) {
    std::lock_guard<std::mutex> lock(resultsMutex);
    frontend::OnnxTestResult &result = tests[t].result;
    // A skip outranks a failure in another data set only if nothing failed first: the first
    // word on a test stays.
    if (result.status == frontend::OnnxTestStatus::Pass) {
      result.status = status;
      result.reason = reason;
    }
  };

  forEachIndex(testPool, jobs.size(), [&](size_t j) {
    Job &job = jobs[j];
    codegen::CompileOptions compileOptions;
    compileOptions.symbolPrefix = fmt::format("t{}_", j);
    try {
      job.lowered = codegen::lowerGraph(*job.testCase->graph, compileOptions);
    } catch (...) {
      std::string reason = reasonOf(std::current_exception());
      bool unsupported = reason.rfind("codegen: ", 0) == 0 && reason.find("not supported yet") != std::string::npos;
      endTest(job.test, unsupported ? frontend::OnnxTestStatus::Skip : frontend::OnnxTestStatus::Fail,
              unsupported ? reason : job.testCase->setName + ": lowering: " + reason);
    }
  });

  // Batches of the lowered models, in suite order (a stable grouping keeps the cache warm).
  std::vector<std::vector<Job *>> batches(1);
  for (Job &job : jobs) {
    if (!job.lowered || tests[job.test].result.status != frontend::OnnxTestStatus::Pass)
      continue;
    if (static_cast<int>(batches.back().size()) == options.batch)
      batches.emplace_back();
    batches.back().push_back(&job);
  }
  if (batches.back().empty())
    batches.pop_back();
  codegen::CompilerCounters before = codegen::compilerCounters();
  auto compileStart = std::chrono::steady_clock::now();
  forEachIndex(testPool, batches.size(), [&](size_t b) {
    std::vector<const codegen::LoweredModel *> models;
    for (Job *job : batches[b])
      models.push_back(&*job->lowered);
    try {
      std::string soPath = codegen::compileLoweredBatch(models).soPath;
      for (Job *job : batches[b])
        job->soPath = soPath;
      return;
    } catch (...) {
      std::cerr << fmt::format("kiln-run: note: batch {} did not compile ({}); compiling its models one by one\n", b,
                               reasonOf(std::current_exception()));
    }
    for (Job *job : batches[b]) {
      try {
        job->soPath = codegen::compileLoweredBatch({&*job->lowered}).soPath;
      } catch (...) {
        job->failure = job->testCase->setName + ": compile: " + reasonOf(std::current_exception());
      }
    }
  });
  codegen::CompilerCounters after = codegen::compilerCounters();
  size_t batched = 0;
  for (const std::vector<Job *> &batch : batches)
    batched += batch.size();
  std::cerr << fmt::format("kiln-run: compiled {} models in {} batches: {} compiler runs, {} cache hits, {:.1f} s\n",
                           batched, batches.size(), after.compiles - before.compiles,
                           after.cacheHits - before.cacheHits,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - compileStart).count());

  // One thread per model run: the jobs already run side by side.
  auto pool = std::make_shared<runtime::ThreadPool>(1);
  forEachIndex(testPool, jobs.size(), [&](size_t j) {
    Job &job = jobs[j];
    if (!job.lowered)
      return;
    try {
      if (job.failure.empty() && !job.soPath.empty()) {
        runtime::ExecutableOptions runOptions;
        runOptions.pool = pool;
        runtime::Executable executable = runtime::Executable::load(
            job.soPath, codegen::collectWeights(*job.lowered, {}), runOptions, job.lowered->model.modelSymbol);
        std::vector<Tensor> outputs = executable.run(job.testCase->inputs);
        if (auto mismatch = frontend::checkOnnxTestOutputs(*job.testCase, outputs, testOptions))
          job.failure = *mismatch;
      }
    } catch (...) {
      job.failure = job.testCase->setName + ": run: " + reasonOf(std::current_exception());
    }
    if (!job.failure.empty())
      endTest(job.test, frontend::OnnxTestStatus::Fail, job.failure);
  });

  std::vector<frontend::OnnxTestResult> results;
  for (const frontend::OnnxPreparedTest &test : tests)
    results.push_back(test.result);
  return results;
}

} // namespace

/// --onnx-test: every test runs, whatever happens to the others (runOnnxTestDir never
/// throws); results print in folder order once all have run.
int runConformanceCommand(const RunOptions &options) {
  std::vector<std::string> dirs = frontend::findOnnxTestDirs(options.paths);
  frontend::OnnxTestOptions testOptions;
  testOptions.rtol = options.rtolOr(testOptions.rtol);
  testOptions.atol = options.atolOr(testOptions.atol);
  std::ofstream list;
  if (!options.listPassing.empty()) { // opened first, so a bad path fails before the long run
    list.open(options.listPassing);
    if (!list)
      fail("--list-passing: cannot write '{}'", options.listPassing);
  }

  // The tests run side by side on options.jobs threads of a pool of their own.
  runtime::ThreadPool testPool(options.jobs);
  std::vector<frontend::OnnxTestResult> results(dirs.size());
  if (options.compiled)
    results = runCompiledTests(dirs, testOptions, options, testPool);
  else
    forEachIndex(testPool, dirs.size(),
                 [&](size_t i) { results[i] = frontend::runOnnxTestDir(dirs[i], testOptions); });

  int passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> passing;
  for (const frontend::OnnxTestResult &result : results) {
    // The suite's tests are tiny: one that takes seconds points at a bug (to stderr, so the
    // summary stays the last line of the report).
    if (result.seconds > kSlowTestSeconds)
      std::cerr << fmt::format("SLOW {}: {:.1f} s\n", result.name, result.seconds);
    switch (result.status) {
    case frontend::OnnxTestStatus::Pass:
      ++passed;
      passing.push_back(result.name);
      break;
    case frontend::OnnxTestStatus::Fail:
      ++failed;
      std::cout << "FAIL " << result.name << ": " << result.reason << "\n";
      break;
    case frontend::OnnxTestStatus::Skip:
      ++skipped;
      std::cout << "SKIP " << result.name << ": " << result.reason << "\n";
      break;
    }
  }
  if (list.is_open()) {
    std::sort(passing.begin(), passing.end());
    for (const std::string &name : passing)
      list << name << "\n";
    list.close();
    if (!list)
      fail("--list-passing: writing '{}' failed", options.listPassing);
  }
  std::cout << passed << " passed, " << failed << " failed, " << skipped << " skipped\n";
  return failed == 0 ? 0 : 1;
}

} // namespace kiln::tools
