// The memory-plan picture: one rectangle per buffer, placed by hand-computed coordinates from
// the layout's documented formulas; the header's figures; XML escaping of graph and value names
// (including bytes that are not UTF-8); the minimum rectangle height; labels only where they
// fit; the step ruler's spacing on long graphs; an empty arena; and determinism.
//
// The plan of kPlanGraph is worked out by hand in tests/golden/passes/plan-memory.kir:
// buffer {a, b, v} 256 bytes at offset 0, steps 0..3; buffer {w} 256 bytes at offset 256,
// steps 3..4; arena 512, lower bound 512, naive 1024; 5 steps.
#include <gtest/gtest.h>

#include <regex>

#include "passes/memory/MemoryPlanSvg.h"
#include "passes/memory/PlanMemory.h"
#include "tests/passes/PassTestUtil.h"

namespace kiln::passes {
namespace {

constexpr const char *kPlanGraph = R"(
graph @plan_memory(%x: f32[4,16]) -> (f32[1,16]) {
  %a = exp(%x) : f32[4,16]
  %b = relu(%a) : f32[4,16]
  %v = reshape(%b) {shape = [16, 4]} : f32[16,4]
  %w = permute(%v) {perm = [1, 0]} : f32[4,16]
  %r = reduce_sum(%w) {axes = [0], keepdims = 1} : f32[1,16]
  return %r
}
)";

size_t countOf(const std::string &text, const std::string &needle) {
  size_t count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size()))
    ++count;
  return count;
}

/// The `<g class="buffer">` element whose tooltip starts with `titlePrefix`, or "".
std::string bufferGroup(const std::string &svg, const std::string &titlePrefix) {
  std::string open = "<g class=\"buffer\">\n<title>" + titlePrefix;
  size_t start = svg.find(open);
  if (start == std::string::npos)
    return "";
  return svg.substr(start, svg.find("</g>", start) - start);
}

struct Box {
  double x = -1, y = -1, width = -1, height = -1;
};

Box rectOf(const std::string &group) {
  std::smatch match;
  static const std::regex rect(
      R"re(<rect x="([-0-9.]+)" y="([-0-9.]+)" width="([-0-9.]+)" height="([-0-9.]+)")re");
  Box box;
  if (std::regex_search(group, match, rect))
    box = {std::stod(match[1]), std::stod(match[2]), std::stod(match[3]), std::stod(match[4])};
  return box;
}

TEST(MemoryPlanSvgTest, OneRectanglePerBuffer) {
  auto graph = test::parseKir(kPlanGraph);
  MemoryPlan plan = planMemory(*graph);
  ASSERT_EQ(plan.buffers.size(), 2u); // {a, b, v} and {w}, by hand
  std::string svg = memoryPlanSvg(*graph, plan);
  EXPECT_EQ(countOf(svg, "<g class=\"buffer\">"), 2u);
  // Besides the buffers, only the white background and the arena frame are rectangles.
  EXPECT_EQ(countOf(svg, "<rect "), 2u + 2u);
  EXPECT_EQ(countOf(svg, "<title>"), 1u + 2u); // the document's title and one per buffer

  // Without reuse every intermediate is its own buffer: a, b, v, w.
  MemoryPlan separate = planMemory(*graph, PlanOptions{/*inPlace=*/false, /*aliasViews=*/false});
  ASSERT_EQ(separate.buffers.size(), 4u);
  EXPECT_EQ(countOf(memoryPlanSvg(*graph, separate), "<g class=\"buffer\">"), 4u);
}

TEST(MemoryPlanSvgTest, HeaderHasTheFigures) {
  auto graph = test::parseKir(kPlanGraph);
  std::string svg = memoryPlanSvg(*graph, planMemory(*graph));
  std::smatch match;
  ASSERT_TRUE(std::regex_search(svg, match, std::regex("<text[^>]*class=\"header\">([^<]*)</text>")));
  std::string header = match[1];
  EXPECT_NE(header.find("@plan_memory"), std::string::npos) << header;
  EXPECT_NE(header.find("arena 512 bytes (512 B)"), std::string::npos) << header;
  EXPECT_NE(header.find("lower bound 512 bytes"), std::string::npos) << header;
  EXPECT_NE(header.find("naive 1024 bytes (1 KiB)"), std::string::npos) << header;
  EXPECT_NE(header.find("alignment 64"), std::string::npos) << header;
  EXPECT_NE(header.find("2 buffers over 5 steps"), std::string::npos) << header;
}

TEST(MemoryPlanSvgTest, RectanglesSitAtTheirOffsetsAndSteps) {
  auto graph = test::parseKir(kPlanGraph);
  MemoryPlan plan = planMemory(*graph);
  MemoryPlanSvgLayout layout;
  std::string svg = memoryPlanSvg(*graph, plan, layout);
  // 5 steps: 1200 / 5 = 240 px is more than the widest step, 48 px. 600 px for 512 bytes.
  const double step = 48, pxPerByte = 600.0 / 512;
  EXPECT_DOUBLE_EQ(layout.stepWidth(5), step);

  std::string w = bufferGroup(svg, "%w: 256 bytes at offset 256, steps 3..4");
  ASSERT_FALSE(w.empty()) << svg;
  Box box = rectOf(w);
  EXPECT_DOUBLE_EQ(box.x, layout.plotLeft + 3 * step);
  EXPECT_DOUBLE_EQ(box.width, 2 * step);
  EXPECT_DOUBLE_EQ(box.y, layout.plotTop + 256 * pxPerByte);
  EXPECT_DOUBLE_EQ(box.height, 256 * pxPerByte);

  // The merged buffer, with how each value took it over, and its label inside the rectangle.
  std::string abv = bufferGroup(svg, "%a, %b (in place), %v (view): 256 bytes at offset 0, steps 0..3");
  ASSERT_FALSE(abv.empty()) << svg;
  box = rectOf(abv);
  EXPECT_DOUBLE_EQ(box.x, layout.plotLeft);
  EXPECT_DOUBLE_EQ(box.width, 4 * step);
  EXPECT_DOUBLE_EQ(box.y, layout.plotTop);
  EXPECT_DOUBLE_EQ(box.height, 300);
  EXPECT_NE(abv.find(">%a, %b, %v</text>"), std::string::npos) << abv;

  // A smaller arena height scales every rectangle with it.
  layout.arenaHeight = 128;
  box = rectOf(bufferGroup(memoryPlanSvg(*graph, plan, layout), "%w:"));
  EXPECT_DOUBLE_EQ(box.y, layout.plotTop + 64);
  EXPECT_DOUBLE_EQ(box.height, 64);
}

TEST(MemoryPlanSvgTest, BuffersInsideAConcatAreDrawnOverIt) {
  // The plan of tests/passes/MemoryPlanTest.cpp's packing graph, ConcatSlicesOfThePackingGraph:
  // %e is laid out over %c (+0) and %d (+64). Buffers inside another follow it, so that they
  // are drawn on top, and their tooltips say where they lie.
  auto graph = test::parseKir(test::kPackingGraph);
  MemoryPlanSvgLayout layout;
  std::string svg = memoryPlanSvg(*graph, planMemory(*graph), layout);
  std::vector<std::string> titles;
  static const std::regex title("<g class=\"buffer\">\n<title>([^<]*)</title>");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), title); it != std::sregex_iterator(); ++it)
    titles.push_back((*it)[1]);
  EXPECT_EQ(titles, (std::vector<std::string>{
                        "%a: 256 bytes at offset 320, steps 0..2",
                        "%b: 128 bytes at offset 576, steps 1..3",
                        "%e (concat over its operands): 320 bytes at offset 0, steps 2..5",
                        "%c: 64 bytes at offset 0, steps 2..5, inside %e at +0",
                        "%d: 256 bytes at offset 64, steps 3..5, inside %e at +64",
                    }));
  // 6 steps, 704 bytes over 600 px: %d's rectangle lies inside %e's.
  Box e = rectOf(bufferGroup(svg, "%e ")), d = rectOf(bufferGroup(svg, "%d:"));
  EXPECT_NEAR(d.y, layout.plotTop + 64 * 600.0 / 704, 0.005); // printed to two decimals
  EXPECT_GE(d.x, e.x);
  EXPECT_LE(d.x + d.width, e.x + e.width);
  EXPECT_LE(d.y + d.height, e.y + e.height + 1e-9);
}

TEST(MemoryPlanSvgTest, TinyBuffersKeepTheMinimumHeightAndNoLabel) {
  // %big is 4 MiB and %tiny 64 bytes, both read by the concat at step 2: arena 4 MiB + 64.
  auto graph = test::parseKir(R"(
graph @tiny(%x: f32[1024,1024], %y: f32[1,16]) -> (f32[1,1048592]) {
  %big = exp(%x) : f32[1024,1024]
  %tiny = exp(%y) : f32[1,16]
  %flat = reshape(%big) {shape = [1, 1048576]} : f32[1,1048576]
  %out = concat(%tiny, %flat) {axis = 1} : f32[1,1048592]
  return %out
}
)");
  MemoryPlan plan = planMemory(*graph);
  ASSERT_EQ(plan.arenaBytes, 4 * 1024 * 1024 + 64);
  std::string svg = memoryPlanSvg(*graph, plan);
  std::string tiny = bufferGroup(svg, "%tiny:");
  ASSERT_FALSE(tiny.empty()) << svg;
  EXPECT_DOUBLE_EQ(rectOf(tiny).height, 2); // 64 * 600 / (4 MiB + 64) is about 0.009 px
  EXPECT_EQ(tiny.find("<text"), std::string::npos) << tiny;
  // The big buffer's label fits.
  std::string big = bufferGroup(svg, "%big, %flat (view):");
  ASSERT_FALSE(big.empty()) << svg;
  EXPECT_NE(big.find(">%big, %flat</text>"), std::string::npos) << big;
  // The offset ruler ticks at whole powers of two: 512 KiB apart (the first power of two at
  // least 40 px tall: 256 KiB is about 37.5 px).
  EXPECT_NE(svg.find(">512 KiB</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1.5 MiB</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">256 KiB</text>"), std::string::npos);
}

TEST(MemoryPlanSvgTest, LongNamesAreCutToFit) {
  auto graph = test::parseKir(kPlanGraph);
  for (ir::Node *node : graph->nodes())
    if (node->output(0)->name() == "w")
      node->output(0)->setName("a_very_long_value_name_that_cannot_fit");
  std::string svg = memoryPlanSvg(*graph, planMemory(*graph));
  // %w's rectangle is 2 steps, 96 px: (96 - 2 * 3) / 6.7 px is 13 glyphs, 12 of the name and
  // the ellipsis. The tooltip keeps the whole name.
  std::string group = bufferGroup(svg, "%a_very_long_value_name_that_cannot_fit: 256 bytes");
  ASSERT_FALSE(group.empty()) << svg;
  EXPECT_NE(group.find(">%a_very_long\xe2\x80\xa6</text>"), std::string::npos) << group;

  // Three names of 13 characters (43 glyphs with the commas) do not fit in 4 steps, 27 glyphs;
  // "%first +2" does.
  graph = test::parseKir(kPlanGraph);
  for (ir::Node *node : graph->nodes())
    if (node->output(0)->name() != "w" && node->output(0)->name() != "r")
      node->output(0)->setName(node->output(0)->name() + "_0123456789");
  svg = memoryPlanSvg(*graph, planMemory(*graph));
  group = bufferGroup(svg, "%a_0123456789, %b_0123456789 (in place)");
  ASSERT_FALSE(group.empty()) << svg;
  EXPECT_NE(group.find(">%a_0123456789 +2</text>"), std::string::npos) << group;
}

TEST(MemoryPlanSvgTest, NamesAreXmlEscaped) {
  auto graph = test::parseKir(kPlanGraph);
  graph->setName("a<b>&\"c'");
  // An ONNX-style original name, with a control byte and a byte that is not UTF-8.
  for (ir::Node *node : graph->nodes())
    if (node->output(0)->name() == "w")
      node->output(0)->setName("w</title><&x\x01\xff");
  std::string svg = memoryPlanSvg(*graph, planMemory(*graph));
  // The graph name is written as the text form writes it, quoted.
  EXPECT_NE(svg.find("@&quot;a&lt;b&gt;&amp;\\&quot;c&apos;&quot; memory plan"), std::string::npos) << svg;
  EXPECT_EQ(svg.find("a<b>"), std::string::npos);
  EXPECT_EQ(svg.find("</title><&x"), std::string::npos);
  // The original name is quoted as the text form quotes strings (the control byte as \x01);
  // the byte that is not UTF-8 becomes U+FFFD; '<', '&' and '"' are escaped.
  EXPECT_NE(svg.find("&quot;w&lt;/title&gt;&lt;&amp;x\\x01\xef\xbf\xbd&quot;: 256 bytes"), std::string::npos)
      << svg;
  // No raw '&' that does not start an entity.
  std::regex bareAmpersand("&(?!(amp|lt|gt|quot|apos);)");
  EXPECT_FALSE(std::regex_search(svg, bareAmpersand));

  graph->setName(std::string("bad\xff\x01name"));
  svg = memoryPlanSvg(*graph, planMemory(*graph));
  EXPECT_NE(svg.find("@&quot;bad\xef\xbf\xbd\\x01name&quot; memory plan"), std::string::npos) << svg;
  // A plain name stays bare.
  graph->setName("plain_name.1");
  EXPECT_NE(memoryPlanSvg(*graph, planMemory(*graph)).find(">@plain_name.1 memory plan"), std::string::npos);
}

TEST(MemoryPlanSvgTest, LongGraphsSpaceTheStepRuler) {
  // 300 steps: the steps shrink to the narrowest, 4 px, and the ruler labels every 10th step
  // (a 3-digit label needs about 28 px: 5 steps are 20 px, 10 are 40 px).
  std::string text = "graph @chain(%x: f32[1,16]) -> (f32[1,16]) {\n  %v0 = exp(%x) : f32[1,16]\n";
  for (int i = 1; i < 300; ++i)
    text += "  %v" + std::to_string(i) + " = exp(%v" + std::to_string(i - 1) + ") : f32[1,16]\n";
  text += "  return %v299\n}\n";
  auto graph = test::parseKir(text);
  MemoryPlanSvgLayout layout;
  EXPECT_DOUBLE_EQ(layout.stepWidth(300), 4);
  std::string svg = memoryPlanSvg(*graph, planMemory(*graph), layout);
  std::string ruler = svg.substr(svg.find("<g class=\"step-ruler\">"));
  ruler = ruler.substr(0, ruler.find("</g>"));
  EXPECT_EQ(countOf(ruler, "<text"), 1u + 30u); // the caption and steps 0, 10, ..., 290
  EXPECT_NE(ruler.find(">290</text>"), std::string::npos);
  EXPECT_EQ(ruler.find(">5</text>"), std::string::npos);
}

TEST(MemoryPlanSvgTest, EmptyArena) {
  auto graph = test::parseKir(R"(
graph @direct(%x: f32[2]) -> (f32[2]) {
  %y = relu(%x) : f32[2]
  return %y
}
)");
  MemoryPlan plan = planMemory(*graph);
  ASSERT_EQ(plan.arenaBytes, 0);
  std::string svg = memoryPlanSvg(*graph, plan);
  EXPECT_EQ(countOf(svg, "<g class=\"buffer\">"), 0u);
  EXPECT_NE(svg.find("arena 0 bytes"), std::string::npos);
  EXPECT_NE(svg.find("the arena is empty"), std::string::npos);
  EXPECT_NE(svg.find("</svg>\n"), std::string::npos);
}

TEST(MemoryPlanSvgTest, DeterministicAndForeignValuesUnnamed) {
  auto first = test::parseKir(kPlanGraph), second = test::parseKir(kPlanGraph);
  std::string svg = memoryPlanSvg(*first, planMemory(*first));
  EXPECT_EQ(svg, memoryPlanSvg(*second, planMemory(*second)));
  // A plan drawn against another graph names nothing it cannot find in that graph.
  std::string foreign = memoryPlanSvg(*second, planMemory(*first));
  EXPECT_NE(foreign.find("<title>%?, %? (in place), %? (view): 256 bytes"), std::string::npos) << foreign;
}

} // namespace
} // namespace kiln::passes
