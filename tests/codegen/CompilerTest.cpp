// The compiler driver, the disk cache and the shape-keyed compile cache; unsupported ops and
// compiler failures as kiln::Errors.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include <dlfcn.h>
#include <sched.h>

#include "tests/ErrorMatchers.h"

#include <functional>

#include "codegen/CompileModel.h"
#include "core/Error.h"
#include "frontend/Frontend.h"
#include "frontend/models/ResNet.h"
#include "tests/codegen/CodegenTestUtil.h"

namespace kiln::codegen::test {
namespace {

namespace fs = std::filesystem;
using frontend::GraphBuilder;
using frontend::Var;

// A fresh, empty cache folder per test.
std::string freshCacheDir(const std::string &name) {
  fs::path dir = fs::temp_directory_path() / ("kiln-codegen-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

using kiln::test::errorOf;

TEST(CodegenCompiler, SecondCompileOfTheSameModelIsALoad) {
  GraphBuilder gb("cached");
  Var x = gb.input("x", DType::F32, {3, 4});
  auto graph = gb.finish({frontend::exp(x) + 1.0});
  CompileOptions options = testOptions();
  options.compiler.cacheDir = freshCacheDir("hit");
  CompilerCounters before = compilerCounters();
  compile(*graph, options);
  CompilerCounters middle = compilerCounters();
  runtime::Executable again = compile(*graph, options);
  CompilerCounters after = compilerCounters();
  EXPECT_EQ(middle.compiles - before.compiles, 1);
  EXPECT_EQ(after.compiles - middle.compiles, 0);
  EXPECT_EQ(after.cacheHits - middle.cacheHits, 1);
  Tensor input = randomTensor({DType::F32, {3, 4}}, 1);
  EXPECT_NEAR(again.run({input})[0].getDouble(5), std::exp(input.getDouble(5)) + 1.0, 1e-5);
  fs::remove_all(options.compiler.cacheDir);
}

// Several graphs in one translation unit: one compiler run, one executable per graph, each
// computing its own graph (the symbol prefixes keep their kernels apart).
TEST(CodegenCompiler, CompileBatchBuildsOneObjectWithOneExecutablePerGraph) {
  GraphBuilder first("first");
  Var x = first.input("x", DType::F32, {3, 4});
  auto exponent = first.finish({frontend::exp(x) + 1.0});
  GraphBuilder second("second");
  Var a = second.input("a", DType::F32, {5});
  Var w = second.param("w", randomTensor({DType::F32, {5}}, 9));
  auto scaled = second.finish({a * w});
  CompileOptions options = testOptions();
  options.compiler.cacheDir = freshCacheDir("batch");
  CompilerCounters before = compilerCounters();
  std::vector<runtime::Executable> executables = compileBatch({exponent.get(), scaled.get()}, options);
  CompilerCounters after = compilerCounters();
  EXPECT_EQ(after.compiles - before.compiles, 1) << "one translation unit for both graphs";
  ASSERT_EQ(executables.size(), 2u);
  Tensor input = randomTensor({DType::F32, {3, 4}}, 10);
  Tensor y = executables[0].run({input})[0];
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_NEAR(y.getDouble(i), std::exp(input.getDouble(i)) + 1.0, 1e-5);
  Tensor values = randomTensor({DType::F32, {5}}, 11);
  Tensor z = executables[1].run({values})[0];
  Tensor weight = randomTensor({DType::F32, {5}}, 9);
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_NEAR(z.getDouble(i), values.getDouble(i) * weight.getDouble(i), 1e-6);
  fs::remove_all(options.compiler.cacheDir);
}

TEST(CodegenCompiler, CompilerErrorNamesTheFileAndTheFirstError) {
  CompilerOptions options;
  options.cacheDir = freshCacheDir("error");
  std::string message = errorOf([&] { compileSource("int main() { return undeclared_thing; }\n", options); });
  EXPECT_NE(message.find("the C++ compiler failed on " + options.cacheDir), std::string::npos) << message;
  EXPECT_NE(message.find(".cpp"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;
  fs::remove_all(options.cacheDir);
}

// A source of `units` units of about `bytes` each behind a two-line prelude: unit i defines
// unit<i>() returning i (its bulk a comment); the last declares them all and sums them.
std::string unitSource(int units, size_t bytes, int broken = -1) {
  std::string source = "// prelude\n#include <cstdint>\n";
  for (int i = 0; i < units; ++i) {
    source += std::string(kSourceUnitMarker) + "\n";
    source += "// " + std::string(bytes, 'x') + "\n";
    source += fmt::format("extern \"C\" int64_t unit{}() {{ return {}; }}\n", i, i == broken ? "undeclared_thing" : std::to_string(i));
  }
  source += std::string(kSourceUnitMarker) + "\n";
  std::string sum = "0";
  for (int i = 0; i < units; ++i) {
    source += fmt::format("extern \"C\" int64_t unit{}();\n", i);
    sum += fmt::format(" + unit{}()", i);
  }
  return source + "extern \"C\" int64_t total() { return " + sum + "; }\n";
}

TEST(CodegenCompiler, SourceUnitsSplitIntoBalancedSharesBehindThePrelude) {
  const std::string source = unitSource(6, 20 * 1024);
  const std::string prelude = source.substr(0, source.find(kSourceUnitMarker));
  std::vector<std::string> two = splitSourceUnits(source, 2);
  ASSERT_EQ(two.size(), 2u);
  std::string units;
  for (const std::string &part : two) {
    ASSERT_EQ(part.rfind(prelude, 0), 0u) << "every part starts with the prelude";
    units += part.substr(prelude.size());
    // Balanced by bytes: 7 units (the last small), 3 and 4 big ones.
    EXPECT_GT(part.size(), source.size() * 2 / 5);
  }
  EXPECT_EQ(prelude + units, source) << "the units, each once, in order";
  // Shares of at least kMinUnitBytesPerJob: 120 KB of units make at most 3.
  EXPECT_EQ(splitSourceUnits(source, 8).size(), 3u);
  EXPECT_EQ(splitSourceUnits(source, 1), std::vector<std::string>{source});
  const std::string small = unitSource(6, 1024);
  EXPECT_EQ(splitSourceUnits(small, 2), std::vector<std::string>{small});
  EXPECT_EQ(splitSourceUnits("int x;\n", 4), std::vector<std::string>{"int x;\n"});
}

// The parts compile at once and link into one object whose functions all work; a part that
// fails names itself and is kept for its line numbers.
TEST(CodegenCompiler, ASplitCompileLinksOneObjectThatRunsEveryUnit) {
  CompilerOptions options;
  options.cacheDir = freshCacheDir("split");
  options.jobs = 2;
  CompilerCounters before = compilerCounters();
  CompiledObject object = compileSource(unitSource(4, 24 * 1024), options);
  EXPECT_EQ(compilerCounters().compiles - before.compiles, 2) << "two compiler processes";
  void *handle = dlopen(object.soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto total = reinterpret_cast<int64_t (*)()>(dlsym(handle, "total"));
  ASSERT_NE(total, nullptr);
  EXPECT_EQ(total(), 0 + 1 + 2 + 3);
  dlclose(handle);
  for (const fs::directory_entry &file : fs::directory_iterator(options.cacheDir))
    EXPECT_EQ(file.path().string().find("part"), std::string::npos) << "left behind: " << file.path();

  std::string message = errorOf([&] { compileSource(unitSource(4, 24 * 1024, 3), options); });
  EXPECT_NE(message.find("(part 2 of 2)"), std::string::npos) << message;
  EXPECT_NE(message.find("undeclared_thing"), std::string::npos) << message;
  std::string kept = message.substr(message.find(options.cacheDir));
  kept = kept.substr(0, kept.find(" (part"));
  EXPECT_TRUE(fs::exists(kept)) << kept;
  fs::remove_all(options.cacheDir);
}

// The prelude of generated source is precompiled beside the first compile and included by the
// next ones (GCC only: clang does not read .gch files in a header's place).
TEST(CodegenCompiler, ThePreludeIsPrecompiledOnceAndIncludedAfter) {
  CompilerOptions options;
  options.cacheDir = freshCacheDir("prelude");
  if (compilerVersion("c++").find("clang") != std::string::npos)
    GTEST_SKIP() << "clang";
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) != 0 || CPU_COUNT(&cpus) < 2)
    GTEST_SKIP() << "one CPU: the prelude is not precompiled beside a compile";
  auto precompiled = [&] {
    int count = 0;
    for (const fs::directory_entry &file : fs::directory_iterator(options.cacheDir))
      count += file.path().string().find("prelude-") != std::string::npos && file.path().extension() == ".gch";
    return count;
  };
  auto totalOf = [](const CompiledObject &object) {
    void *handle = dlopen(object.soPath.c_str(), RTLD_NOW | RTLD_LOCAL);
    EXPECT_NE(handle, nullptr) << dlerror();
    auto total = reinterpret_cast<int64_t (*)()>(dlsym(handle, "total"));
    int64_t sum = total ? total() : -1;
    dlclose(handle);
    return sum;
  };
  EXPECT_EQ(totalOf(compileSource(unitSource(3, 100), options)), 0 + 1 + 2);
  EXPECT_EQ(precompiled(), 1);
  EXPECT_EQ(totalOf(compileSource(unitSource(5, 100), options)), 0 + 1 + 2 + 3 + 4);
  EXPECT_EQ(precompiled(), 1) << "one for every source with this prelude";
  // A cache folder given relative to the working directory: the units include the header by
  // its name, beside them.
  CompilerOptions relative = options;
  relative.cacheDir = fs::relative(options.cacheDir, fs::current_path()).string();
  EXPECT_EQ(totalOf(compileSource(unitSource(2, 100), relative)), 0 + 1);
  fs::remove_all(options.cacheDir);
}

// A model compiled in two translation units runs exactly as in one.
TEST(CodegenCompiler, AModelCompiledInPartsComputesWhatOneTranslationUnitDoes) {
  frontend::nn::manualSeed(4);
  frontend::models::ResNet18 model(10);
  GraphBuilder gb("resnet18");
  auto graph = gb.finish({model(gb.input("x", DType::F32, {1, 3, 32, 32}))});
  Tensor x = randomTensor({DType::F32, {1, 3, 32, 32}}, 12);
  std::vector<Tensor> results;
  for (int jobs : {1, 2}) {
    CompileOptions options = testOptions();
    options.compiler.cacheDir = freshCacheDir(fmt::format("parts{}", jobs));
    options.compiler.jobs = jobs;
    CompilerCounters before = compilerCounters();
    results.push_back(compile(*graph, options).run({x})[0]);
    EXPECT_EQ(compilerCounters().compiles - before.compiles, jobs);
    fs::remove_all(options.compiler.cacheDir);
  }
  EXPECT_TRUE(results[0].identical(results[1]));
}

// Repeated layers of one shape (each with its own weights) run one function: their kernels'
// code is the same but for its names, so it is emitted and compiled once; each launch keeps
// its own name and buffers.
TEST(CodegenCompiler, RepeatedLayersShareOneKernelFunction) {
  GraphBuilder gb("repeated");
  Var h = gb.input("x", DType::F32, {4, 32});
  for (uint64_t layer = 0; layer < 4; ++layer)
    h = frontend::relu(frontend::matmul(h, gb.param("w" + std::to_string(layer), randomTensor({DType::F32, {32, 32}}, 20 + layer))) * 0.2);
  auto graph = gb.finish({frontend::exp(h)});
  LoweredModel lowered = lowerGraph(*graph, testOptions());
  // Four launches, the last with the exp in its epilogue: layers 1 and 2 run layer 0's function.
  ASSERT_EQ(lowered.model.launches.size(), 4u);
  EXPECT_EQ(lowered.model.sharedKernels, 2);
  const std::string &source = lowered.model.source;
  EXPECT_EQ(source.find("kiln_k1_"), std::string::npos) << "no function of its own for layer 1";
  EXPECT_NE(source.find("{kiln_k0_matmul_mul_relu, \"k2_matmul_mul_relu\","), std::string::npos) << source.substr(source.find("kiln_launches"));
  EXPECT_NE(source.find("extern \"C\" void kiln_k3_"), std::string::npos) << "the last layer's own";
  expectMatchesReference(*graph, randomInputs(*graph, 30), testOptions(), 1e-5, 1e-6);
}

TEST(CodegenCompiler, MissingCompilerIsAnError) {
  CompilerOptions options;
  options.cacheDir = freshCacheDir("nocc");
  options.compiler = "kiln-no-such-compiler";
  std::string message = errorOf([&] { compileSource("int x;\n", options); });
  EXPECT_NE(message.find("cannot run the C++ compiler 'kiln-no-such-compiler'"), std::string::npos) << message;
  fs::remove_all(options.cacheDir);
}

TEST(CodegenCompiler, CacheTrimRemovesLeastRecentlyUsedFirst) {
  std::string dir = freshCacheDir("trim");
  auto write = [&](const std::string &name, size_t bytes, int ageSeconds) {
    std::ofstream(dir + "/" + name) << std::string(bytes, 'x');
    fs::last_write_time(dir + "/" + name, fs::file_time_type::clock::now() - std::chrono::seconds(ageSeconds));
  };
  write("old.cpp", 100, 300);
  write("old.so", 400, 300);
  write("mid.so", 500, 200);
  write("new.so", 500, 100);
  write("keep.so", 500, 1000); // the oldest, but spared
  EXPECT_EQ(trimCache(dir, 1100, "keep"), 1000); // old (500) and mid (500) go
  EXPECT_FALSE(fs::exists(dir + "/old.so"));
  EXPECT_FALSE(fs::exists(dir + "/old.cpp"));
  EXPECT_FALSE(fs::exists(dir + "/mid.so"));
  EXPECT_TRUE(fs::exists(dir + "/new.so"));
  EXPECT_TRUE(fs::exists(dir + "/keep.so"));
  EXPECT_EQ(trimCache(dir, 5000), 0);
  fs::remove_all(dir);
}

TEST(CodegenCompiler, UnsupportedOpIsAnErrorNamingOpDtypeAndNode) {
  GraphBuilder gb("unsupported");
  // Half-precision contractions are one of the few things codegen still lacks.
  Var x = gb.input("x", DType::F16, {4, 5});
  Var w = gb.input("w", DType::F16, {5, 3});
  Var y = gb.op(ir::OpKind::MatMul, {x, w}).setName("product");
  auto graph = gb.finish({y});
  std::string message = errorOf([&] { lowerGraph(*graph, testOptions()); });
  EXPECT_EQ(message, "codegen: op matmul on dtype f16 is not supported yet (node %product)");
}

TEST(CodegenCompiler, ParameterWithoutValueIsAnError) {
  GraphBuilder gb("noparam");
  Var x = gb.input("x", DType::F32, {2});
  Var w = gb.param("w", TensorType{DType::F32, {2}});
  auto graph = gb.finish({x * w});
  std::string message = errorOf([&] { compile(*graph, testOptions()); });
  EXPECT_NE(message.find("parameter 'w' has no value"), std::string::npos) << message;
  CompileOptions options = testOptions();
  options.params["w"] = Tensor::fromDoubles(DType::F32, {2}, {2, 3});
  runtime::Executable executable = compile(*graph, options);
  Tensor y = executable.run({Tensor::fromDoubles(DType::F32, {2}, {5, 7})})[0];
  EXPECT_EQ(y.getDouble(0), 10);
  EXPECT_EQ(y.getDouble(1), 21);
}

TEST(CodegenCompiler, CompileCacheCompilesEachBatchSizeOnce) {
  auto build = [](const std::vector<TensorType> &types) {
    GraphBuilder gb("by_batch");
    Var x = gb.input("x", types.at(0));
    return gb.finish({frontend::softmax(x * 2.0, -1)});
  };
  CompileCache cache(build, testOptions());
  Tensor b2 = randomTensor({DType::F32, {2, 8}}, 1), b5 = randomTensor({DType::F32, {5, 8}}, 2);
  cache.run({b2});
  cache.run({b5});
  std::vector<Tensor> again = cache.run({b2});
  EXPECT_EQ(cache.compiles(), 2);
  EXPECT_EQ(cache.hits(), 1);
  EXPECT_EQ(cache.size(), 2u);
  ASSERT_EQ(again[0].shape(), (Shape{2, 8}));
  double rowSum = 0;
  for (int64_t k = 0; k < 8; ++k)
    rowSum += again[0].getDouble(k);
  EXPECT_NEAR(rowSum, 1.0, 1e-5);
}

TEST(CodegenCompiler, CompileCacheEvictsLeastRecentlyUsedPastItsByteLimit) {
  auto build = [](const std::vector<TensorType> &types) {
    GraphBuilder gb("evict");
    Var x = gb.input("x", types.at(0));
    Var w = gb.param("w", Tensor(types.at(0)));
    return gb.finish({frontend::relu(x) + w});
  };
  // Each executable holds a weight: a limit of 1 byte keeps only the most recent one.
  CompileCache cache(build, testOptions(), 1);
  cache.get({{DType::F32, {1, 3}}});
  cache.get({{DType::F32, {2, 3}}});
  EXPECT_EQ(cache.size(), 1u);
  cache.get({{DType::F32, {1, 3}}});
  EXPECT_EQ(cache.compiles(), 3);
  EXPECT_EQ(cache.hits(), 0);
}

} // namespace
} // namespace kiln::codegen::test
