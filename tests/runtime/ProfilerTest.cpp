// The profiler: kernel tables from hand-made events, Chrome-trace JSON that parses (with a
// small strict JSON parser written here) and has one complete event per launch, and profiling
// of real runs of TestModel.cpp's model, concurrent ones included.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/Error.h"
#include "runtime/Executable.h"
#include "runtime/Profiler.h"

using namespace kiln;
using kiln::runtime::Executable;
using kiln::runtime::Profiler;

namespace {

/// A parsed JSON value: just enough to check a trace's structure.
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json *get(const std::string &key) const {
    for (const auto &[name, value] : members)
      if (name == key)
        return &value;
    return nullptr;
  }
};

/// A strict recursive-descent JSON parser (RFC 8259); throws std::runtime_error at the first
/// byte that does not fit the grammar.
class JsonParser {
public:
  explicit JsonParser(const std::string &text) : text_(text) {}

  Json parseDocument() {
    Json value = parseValue();
    skipSpace();
    if (pos_ != text_.size())
      error("trailing characters");
    return value;
  }

private:
  [[noreturn]] void error(const std::string &what) {
    throw std::runtime_error(what + " at byte " + std::to_string(pos_));
  }
  void skipSpace() {
    while (pos_ < text_.size() && std::string(" \t\n\r").find(text_[pos_]) != std::string::npos)
      ++pos_;
  }
  bool consume(char c) {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!consume(c))
      error(std::string("expected '") + c + "'");
  }
  bool consumeWord(const char *word) {
    size_t length = std::char_traits<char>::length(word);
    if (text_.compare(pos_, length, word) != 0)
      return false;
    pos_ += length;
    return true;
  }

  Json parseValue() {
    skipSpace();
    if (pos_ >= text_.size())
      error("unexpected end");
    Json value;
    char c = text_[pos_];
    if (c == '{') {
      value.kind = Json::Object;
      ++pos_;
      if (consume('}'))
        return value;
      do {
        skipSpace();
        std::string key = parseString();
        expect(':');
        value.members.emplace_back(key, parseValue());
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      value.kind = Json::Array;
      ++pos_;
      if (consume(']'))
        return value;
      do
        value.items.push_back(parseValue());
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      value.kind = Json::String;
      value.text = parseString();
    } else if (consumeWord("true") || consumeWord("false")) {
      value.kind = Json::Bool;
    } else if (consumeWord("null")) {
      value.kind = Json::Null;
    } else {
      value.kind = Json::Number;
      size_t start = pos_;
      if (text_[pos_] == '-')
        ++pos_;
      while (pos_ < text_.size() &&
             std::string("0123456789.eE+-").find(text_[pos_]) != std::string::npos)
        ++pos_;
      std::string digits = text_.substr(start, pos_ - start);
      char *end = nullptr;
      value.number = std::strtod(digits.c_str(), &end);
      if (digits.empty() || *end != '\0' ||
          !std::isdigit(static_cast<unsigned char>(digits[digits[0] == '-' ? 1 : 0])))
        error("bad number '" + digits + "'");
    }
    return value;
  }

  std::string parseString() {
    if (pos_ >= text_.size() || text_[pos_] != '"')
      error("expected a string");
    ++pos_;
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != '"') {
      unsigned char c = static_cast<unsigned char>(text_[pos_++]);
      if (c < 0x20)
        error("raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        continue;
      }
      if (pos_ >= text_.size())
        error("unfinished escape");
      char escape = text_[pos_++];
      switch (escape) {
      case '"':
      case '\\':
      case '/':
        out += escape;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        if (pos_ + 4 > text_.size())
          error("short \\u escape");
        unsigned code = static_cast<unsigned>(std::stoul(text_.substr(pos_, 4), nullptr, 16));
        pos_ += 4;
        if (code >= 0x80)
          error("test parser handles only ASCII \\u escapes");
        out += static_cast<char>(code);
        break;
      }
      default:
        error("bad escape");
      }
    }
    if (pos_ >= text_.size())
      error("unterminated string");
    ++pos_;
    return out;
  }

  const std::string &text_;
  size_t pos_ = 0;
};

/// The trace's complete ("X") events, after checking the document's outer structure.
std::vector<Json> completeEvents(const std::string &trace) {
  Json document = JsonParser(trace).parseDocument();
  EXPECT_EQ(document.kind, Json::Object);
  const Json *events = document.get("traceEvents");
  if (!events || events->kind != Json::Array) {
    ADD_FAILURE() << "no traceEvents array";
    return {};
  }
  std::vector<Json> complete;
  for (const Json &event : events->items) {
    const Json *phase = event.get("ph");
    EXPECT_TRUE(phase && phase->kind == Json::String);
    if (!phase || phase->text != "X")
      continue;
    for (const char *key : {"ts", "dur", "pid", "tid"}) {
      const Json *field = event.get(key);
      EXPECT_TRUE(field && field->kind == Json::Number) << key;
    }
    const Json *name = event.get("name");
    EXPECT_TRUE(name && name->kind == Json::String);
    complete.push_back(event);
  }
  return complete;
}

std::string readFile(const std::string &path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

/// Three launches recorded by hand: "k0" twice (1 us + 2 us), "k1" once (4 us), plus one event
/// for a launch the profiler has no name for (0.5 us).
Profiler &handMadeProfile(Profiler &profiler) {
  Profiler::Event events[] = {{0, 0, 1'000'000, 1'000},
                              {1, 0, 1'002'000, 4'000},
                              {0, 1, 1'010'000, 2'000},
                              {7, 1, 1'020'000, 500}};
  profiler.record(events, 2);
  profiler.record(events + 2, 2);
  return profiler;
}

} // namespace

TEST(ProfilerTest, TopKernelsSumsCallsAndTime) {
  Profiler profiler({"k0", "k1"});
  handMadeProfile(profiler);
  std::vector<Profiler::KernelTime> top = profiler.topKernels();
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].name, "k1");
  EXPECT_EQ(top[0].calls, 1);
  EXPECT_DOUBLE_EQ(top[0].totalMs, 0.004);
  EXPECT_DOUBLE_EQ(top[0].share, 4.0 / 7.5);
  EXPECT_EQ(top[1].name, "k0");
  EXPECT_EQ(top[1].calls, 2);
  EXPECT_DOUBLE_EQ(top[1].totalMs, 0.003);
  EXPECT_DOUBLE_EQ(top[1].share, 3.0 / 7.5);
  EXPECT_EQ(top[2].name, "launch7");
  EXPECT_EQ(profiler.topKernels(1).size(), 1u);

  std::string table = profiler.formatTopKernels(2);
  EXPECT_EQ(table, "kernel     calls     total ms   share\n"
                   "k1             1        0.004   53.3%\n"
                   "k0             2        0.003   40.0%\n");
  profiler.clear();
  EXPECT_TRUE(profiler.topKernels().empty());
  EXPECT_TRUE(profiler.events().empty());
}

TEST(ProfilerTest, ChromeTraceHasOneCompleteEventPerLaunch) {
  Profiler profiler({"k0", "k1"});
  std::vector<Json> events = completeEvents(handMadeProfile(profiler).chromeTrace());
  ASSERT_EQ(events.size(), 4u);
  // Microseconds from the first event.
  const char *names[] = {"k0", "k1", "k0", "launch7"};
  double ts[] = {0, 2, 10, 20}, dur[] = {1, 4, 2, 0.5}, tid[] = {0, 0, 1, 1};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].get("name")->text, names[i]);
    EXPECT_DOUBLE_EQ(events[i].get("ts")->number, ts[i]);
    EXPECT_DOUBLE_EQ(events[i].get("dur")->number, dur[i]);
    EXPECT_DOUBLE_EQ(events[i].get("tid")->number, tid[i]);
  }
  EXPECT_EQ(completeEvents(Profiler().chromeTrace()).size(), 0u) << "an empty trace parses";
}

TEST(ProfilerTest, NamesAreEscaped) {
  std::string odd = "k\"0\\x\n\t\x01";
  Profiler profiler({odd});
  Profiler::Event event{0, 0, 5, 6};
  profiler.record(&event, 1);
  std::vector<Json> events = completeEvents(profiler.chromeTrace());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].get("name")->text, odd);
}

TEST(ProfilerTest, WritesTheTraceFile) {
  Profiler profiler({"k0", "k1"});
  handMadeProfile(profiler);
  std::string path = ::testing::TempDir() + "kiln-profiler-test.json";
  profiler.writeChromeTrace(path);
  EXPECT_EQ(readFile(path), profiler.chromeTrace());
  std::remove(path.c_str());

  try {
    profiler.writeChromeTrace("/nonexistent/dir/trace.json");
    ADD_FAILURE() << "expected a kiln::Error";
  } catch (const Error &error) {
    EXPECT_STREQ(error.what(), "cannot write the profile trace '/nonexistent/dir/trace.json'");
  }
}

TEST(ProfilerTest, ThreadIndexIsStablePerThread) {
  uint32_t mine = Profiler::threadIndex();
  EXPECT_EQ(Profiler::threadIndex(), mine);
  uint32_t other = mine;
  std::thread([&] { other = Profiler::threadIndex(); }).join();
  EXPECT_NE(other, mine);
}

TEST(ProfilerTest, ProfilesEveryLaunchOfARun) {
  Executable exe = Executable::load(KILN_TEST_MODEL_PATH);
  std::vector<Tensor> inputs = {randomTensor(TensorType{DType::F32, {8, 256}}, 7),
                                Tensor::scalar(DType::F32, 0.5)};
  exe.run(inputs);
  EXPECT_FALSE(exe.profiling());
  EXPECT_TRUE(exe.profiler().events().empty()) << "nothing is recorded with profiling off";

  exe.setProfiling(true);
  for (int i = 0; i < 3; ++i)
    exe.run(inputs);
  exe.setProfiling(false);
  exe.run(inputs);

  std::vector<Profiler::Event> events = exe.profiler().events();
  ASSERT_EQ(events.size(), 6u);
  for (size_t i = 0; i < events.size(); i += 2) {
    EXPECT_EQ(events[i].launch, 0);
    EXPECT_EQ(events[i + 1].launch, 1);
    EXPECT_GE(events[i].durationNs, 0);
    EXPECT_GE(events[i + 1].startNs, events[i].startNs + events[i].durationNs)
        << "launches of one run follow each other";
  }
  std::vector<Profiler::KernelTime> top = exe.profiler().topKernels();
  ASSERT_EQ(top.size(), 2u);
  EXPECT_EQ(top[0].calls + top[1].calls, 6);
  EXPECT_NEAR(top[0].share + top[1].share, 1.0, 1e-12);

  std::vector<Json> trace = completeEvents(exe.profiler().chromeTrace());
  ASSERT_EQ(trace.size(), 6u);
  EXPECT_EQ(trace[0].get("name")->text, "k0_add");
  EXPECT_EQ(trace[1].get("name")->text, "k1_relu");
}

TEST(ProfilerTest, ConcurrentProfiledRunsKeepEveryEvent) {
  Executable::Options options;
  options.profile = true;
  Executable exe = Executable::load(KILN_TEST_MODEL_PATH, options);
  EXPECT_TRUE(exe.profiling());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      std::vector<Tensor> inputs = {randomTensor(TensorType{DType::F32, {8, 256}}, 10 + t),
                                    Tensor::scalar(DType::F32, 0)};
      for (int i = 0; i < 5; ++i)
        exe.run(inputs);
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(exe.profiler().events().size(), 40u);
  EXPECT_EQ(completeEvents(exe.profiler().chromeTrace()).size(), 40u);
}
