// The memory-plan picture, drawn in three stages:
//   1. Figures: the step count (the graph's kernels, or more if the plan's intervals reach
//      further), the pixels per step and per byte, and each buffer's tooltip text, with the
//      names of the text form (ir/Printer.h) so that the picture lines up with `kiln-dump`.
//   2. Furniture: the header line, the step and offset rulers with light grid lines, the arena
//      frame and the dashed lower-bound line.
//   3. Buffers, in plan order but each buffer inside another (a concat's operand, laid out in
//      the concat's buffer) right after it, so that it is drawn on top: a rectangle each, at
//      least minBufferHeight tall, labelled when the label fits inside it.
// Coordinates are printed with at most two decimals, so the output is the same on every
// machine; names are looked up in maps keyed by pointer but never iterated.
#include "passes/memory/MemoryPlanSvg.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "ir/Lexer.h"
#include "ir/Printer.h"
#include "passes/memory/Liveness.h"
#include "passes/memory/PlanMemoryDetail.h"

namespace kiln::passes {

double MemoryPlanSvgLayout::stepWidth(int64_t steps) const {
  return std::clamp(maxPlotWidth / static_cast<double>(std::max<int64_t>(steps, 1)), minStepWidth, maxStepWidth);
}

namespace {

constexpr double kFontSize = 11;
constexpr double kCharWidth = 6.7;     // a monospace glyph at kFontSize, about 0.6 em
constexpr double kRulerMinGap = 40;    // pixels between offset ticks, at least
constexpr double kRightMargin = 96;    // room for the "lower bound" caption
constexpr double kLabelPadding = 3;    // between a buffer's edge and its label
constexpr size_t kMinCutLabel = 6;     // glyphs: a shorter cut name says too little
constexpr const char *kBufferFills[] = {"#a6cee3", "#b2df8a", "#fdbf6f", "#cab2d6",
                                        "#fb9a99", "#ffff99", "#8dd3c7", "#d9d9d9"};

/// Decodes the UTF-8 sequence at text[i] into `codePoint`; its length, or 0 when the bytes
/// there are not a shortest-form encoding of a scalar value.
size_t decodeUtf8(std::string_view text, size_t i, char32_t &codePoint) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  size_t length = lead < 0x80 ? 1 : (lead & 0xe0) == 0xc0 ? 2 : (lead & 0xf0) == 0xe0 ? 3 : (lead & 0xf8) == 0xf0 ? 4 : 0;
  if (length == 0 || i + length > text.size())
    return 0;
  static constexpr char32_t kLeadMask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
  static constexpr char32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  codePoint = lead & kLeadMask[length];
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80)
      return 0;
    codePoint = (codePoint << 6) | (byte(i + k) & 0x3f);
  }
  bool surrogate = codePoint >= 0xd800 && codePoint <= 0xdfff;
  if (codePoint < kSmallest[length] || surrogate || codePoint > 0x10ffff)
    return 0;
  return length;
}

/// XML 1.0's Char production: what a document may contain at all, even escaped.
bool isXmlChar(char32_t c) {
  return c == 0x9 || c == 0xa || c == 0xd || (c >= 0x20 && c <= 0xd7ff) || (c >= 0xe000 && c <= 0xfffd) ||
         c >= 0x10000;
}

/// Text safe in XML content and in double-quoted attributes. Names may hold any bytes: what XML
/// cannot carry (invalid UTF-8, control characters) becomes U+FFFD.
std::string xmlEscape(std::string_view text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    char32_t c = 0;
    size_t length = decodeUtf8(text, i, c);
    if (length == 0 || !isXmlChar(c)) {
      out += "\xef\xbf\xbd"; // U+FFFD
      i += std::max<size_t>(length, 1);
      continue;
    }
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&apos;"; break;
    default: out.append(text.substr(i, length));
    }
    i += length;
  }
  return out;
}

/// A coordinate: two decimals at most, trailing zeros dropped ("96", "72.5").
std::string px(double value) {
  std::string text = fmt::format("{:.2f}", value);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.')
    text.pop_back();
  return text == "-0" ? "0" : text;
}

/// "512 B", "1.5 KiB", "11.25 MiB": for rulers and the header, next to the exact byte count.
std::string humanBytes(int64_t bytes) {
  static constexpr const char *kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024)
    return fmt::format("{} B", bytes);
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  for (value /= 1024; value >= 1024 && unit + 1 < std::size(kUnits); value /= 1024)
    ++unit;
  std::string text = fmt::format("{:.3f}", value);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.')
    text.pop_back();
  return text + " " + kUnits[unit];
}

std::string text(double x, double y, const std::string &content, const char *anchor = "start",
                 const std::string &extra = "") {
  return fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", px(x), px(y), anchor, extra,
                     content);
}

std::string line(double x1, double y1, double x2, double y2, const std::string &style) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>\n", px(x1), px(y1), px(x2), px(y2), style);
}

struct BufferNames {
  std::string label;      // "%a, %b, %v"
  std::string shortLabel; // "%a +2": for a rectangle too narrow for `label`
  std::string firstName;  // "%a": cut short with an ellipsis when nothing else fits
  std::string tooltip;    // the names with their original names and reuse kinds, and the figures
};

/// Stage 1: each buffer's names. Only values reachable from `graph` are looked up, so a stale
/// pointer in the plan is never dereferenced.
std::vector<BufferNames> bufferNames(const ir::Graph &graph, const MemoryPlan &plan) {
  auto printed = ir::printedValueNames(graph);
  std::unordered_map<const ir::Value *, std::string> original;
  for (const ir::Value *input : graph.inputs())
    original.emplace(input, input->name());
  for (const ir::Node *node : graph.nodes())
    for (const ir::Value *output : node->outputs())
      original.emplace(output, output->name());
  std::unordered_map<const ir::Value *, ReuseKind> reuseKind;
  for (const BufferReuse &reuse : plan.reuses)
    reuseKind.emplace(reuse.output, reuse.kind);

  std::vector<BufferNames> names;
  for (const PlannedBuffer &buffer : plan.buffers) {
    std::vector<std::string> shownNames, describedNames;
    for (const ir::Value *value : buffer.values) {
      auto name = printed.find(value);
      std::string shown = "%" + (name == printed.end() ? std::string("?") : name->second);
      std::string described = shown;
      auto source = original.find(value);
      // A frontend's name ("/layer1/conv/Conv_output_0") is printed sanitized; the original
      // finds the value in the model.
      if (source != original.end() && !source->second.empty() && source->second != shown.substr(1))
        described += " " + ir::quoteString(source->second);
      if (auto kind = reuseKind.find(value); kind != reuseKind.end())
        described += kind->second == ReuseKind::InPlace ? " (in place)"
                     : kind->second == ReuseKind::View  ? " (view)"
                                                        : " (concat over its operands)";
      shownNames.push_back(std::move(shown));
      describedNames.push_back(std::move(described));
    }
    BufferNames entry;
    entry.label = fmt::format("{}", fmt::join(shownNames, ", "));
    entry.firstName = shownNames.empty() ? std::string() : shownNames.front();
    if (shownNames.size() > 1)
      entry.shortLabel = fmt::format("{} +{}", shownNames.front(), shownNames.size() - 1);
    entry.tooltip = fmt::format("{}: {} bytes at offset {}, steps {}..{}", fmt::join(describedNames, ", "),
                                buffer.bytes, buffer.offset, buffer.def, buffer.lastUse);
    names.push_back(std::move(entry));
  }
  // A buffer inside another (a concat's operand) says where: after its parent's first name.
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const int parent = plan.buffers[b].parent;
    if (parent >= 0 && static_cast<size_t>(parent) < names.size())
      names[b].tooltip += fmt::format(", inside {} at +{}", names[static_cast<size_t>(parent)].firstName,
                                      plan.buffers[b].offsetInParent);
  }
  return names;
}

/// "@name" as the text form writes it: quoted (with escapes) unless every byte is a name byte.
std::string graphReference(const std::string &name) {
  bool plain = !name.empty() && std::all_of(name.begin(), name.end(), ir::isNameChar);
  return "@" + (plain ? name : ir::quoteString(name));
}

/// The smallest of 1, 2, 5, 10, 20, 50, ... steps whose ticks are `minGap` pixels apart.
int64_t stepTickInterval(double stepWidth, double minGap) {
  for (int64_t decade = 1;; decade *= 10)
    for (int64_t factor : {1, 2, 5})
      if (static_cast<double>(decade * factor) * stepWidth >= minGap || decade > (int64_t{1} << 56))
        return decade * factor;
}

} // namespace

std::string memoryPlanSvg(const ir::Graph &graph, const MemoryPlan &plan, const MemoryPlanSvgLayout &layout) {
  // --- stage 1: figures
  int64_t steps = static_cast<int64_t>(computeLiveness(graph).steps().size());
  for (const PlannedBuffer &buffer : plan.buffers)
    steps = std::max(steps, buffer.lastUse + 1);
  double stepWidth = layout.stepWidth(steps);
  double plotWidth = stepWidth * static_cast<double>(std::max<int64_t>(steps, 1));
  double bytesToPx = plan.arenaBytes > 0 ? layout.arenaHeight / static_cast<double>(plan.arenaBytes) : 0;
  double plotRight = layout.plotLeft + plotWidth, plotBottom = layout.plotTop + layout.arenaHeight;
  auto yOf = [&](int64_t offset) { return layout.plotTop + static_cast<double>(offset) * bytesToPx; };
  std::vector<BufferNames> names = bufferNames(graph, plan);

  std::string header = fmt::format(
      "{} memory plan: arena {} bytes ({}), lower bound {} bytes ({}), naive {} bytes ({}); alignment {}; "
      "{} buffers over {} steps",
      graphReference(graph.name()), plan.arenaBytes, humanBytes(plan.arenaBytes), plan.lowerBoundBytes,
      humanBytes(plan.lowerBoundBytes), plan.naiveBytes, humanBytes(plan.naiveBytes), plan.alignment,
      plan.buffers.size(), steps);
  double width = std::max(plotRight + kRightMargin, 16 + static_cast<double>(header.size()) * kCharWidth + 16);
  double height = plotBottom + 32;

  // --- stage 2: furniture
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                     "font-family=\"monospace\" font-size=\"{2}\">\n",
                     px(width), px(height), px(kFontSize));
  out += fmt::format("<title>{}</title>\n", xmlEscape("memory plan of " + graphReference(graph.name())));
  out += "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  out += text(16, 24, xmlEscape(header), "start", " class=\"header\"");

  const std::string grid = "stroke=\"#e6e6e6\" stroke-width=\"1\"", tick = "stroke=\"#555\" stroke-width=\"1\"";
  out += "<g class=\"step-ruler\">\n";
  out += text(layout.plotLeft - 8, layout.plotTop - 8, "step", "end");
  int64_t stepTick = stepTickInterval(stepWidth, static_cast<double>(fmt::format("{}", steps).size()) * kCharWidth + 8);
  for (int64_t step = 0; step < steps; step += stepTick) {
    double x = layout.plotLeft + static_cast<double>(step) * stepWidth;
    out += line(x, layout.plotTop - 4, x, plotBottom, step == 0 ? tick : grid);
    out += text(x + stepWidth / 2, layout.plotTop - 8, fmt::format("{}", step), "middle");
  }
  out += "</g>\n<g class=\"offset-ruler\">\n";
  if (plan.arenaBytes > 0) {
    int64_t offsetTick = 1; // a power of two, so that ticks fall on whole KiB and MiB
    while (static_cast<double>(offsetTick) * bytesToPx < kRulerMinGap && offsetTick < (int64_t{1} << 62))
      offsetTick *= 2;
    for (int64_t offset = 0; offset <= plan.arenaBytes; offset += offsetTick) {
      out += line(layout.plotLeft - 4, yOf(offset), plotRight, yOf(offset), offset == 0 ? tick : grid);
      out += text(layout.plotLeft - 8, yOf(offset) + 4, humanBytes(offset), "end");
      if (plan.arenaBytes - offset < offsetTick)
        break; // the next tick would pass the arena (and could overflow)
    }
  }
  out += "</g>\n";
  out += fmt::format("<rect class=\"arena\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
                     "stroke=\"#555\" stroke-width=\"1\"/>\n",
                     px(layout.plotLeft), px(layout.plotTop), px(plotWidth), px(layout.arenaHeight));
  if (plan.arenaBytes == 0)
    out += text(layout.plotLeft + plotWidth / 2, layout.plotTop + layout.arenaHeight / 2,
                "no intermediate values: the arena is empty", "middle");
  if (plan.arenaBytes > 0 && plan.lowerBoundBytes > 0) {
    double y = yOf(std::min(plan.lowerBoundBytes, plan.arenaBytes));
    out += "<g class=\"lower-bound\">\n";
    out += line(layout.plotLeft, y, plotRight, y, "stroke=\"#d62728\" stroke-width=\"1\" stroke-dasharray=\"6 3\"");
    out += text(plotRight + 4, y + 4, "lower bound", "start", " fill=\"#d62728\"");
    out += "</g>\n";
  }

  // --- stage 3: buffers, each drawn before those inside it
  for (size_t i : detail::bufferTreeOrder(plan)) {
    const PlannedBuffer &buffer = plan.buffers[i];
    double x = layout.plotLeft + static_cast<double>(buffer.def) * stepWidth;
    double w = static_cast<double>(buffer.lastUse - buffer.def + 1) * stepWidth;
    double y = yOf(buffer.offset);
    double h = std::max(static_cast<double>(buffer.bytes) * bytesToPx, layout.minBufferHeight);
    out += "<g class=\"buffer\">\n";
    out += fmt::format("<title>{}</title>\n", xmlEscape(names[i].tooltip));
    out += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#333\" "
                       "stroke-width=\"0.5\"/>\n",
                       px(x), px(y), px(w), px(h), kBufferFills[i % std::size(kBufferFills)]);
    // Printed names are ASCII, so a label's width is its length in monospace glyphs. Frontend
    // names are long ("%_layer1_layer1.0_relu_Relu_output_0") and start with the module path,
    // so a name that does not fit keeps its start.
    auto glyphs = static_cast<size_t>(std::max(0.0, (w - 2 * kLabelPadding) / kCharWidth));
    std::string label;
    bool tallEnough = h >= kFontSize + 1;
    if (tallEnough && names[i].label.size() <= glyphs)
      label = names[i].label;
    else if (tallEnough && !names[i].shortLabel.empty() && names[i].shortLabel.size() <= glyphs)
      label = names[i].shortLabel;
    else if (tallEnough && glyphs >= kMinCutLabel)
      label = names[i].firstName.substr(0, glyphs - 1) + "\xe2\x80\xa6"; // U+2026, one glyph
    if (!label.empty())
      out += text(x + kLabelPadding, y + h / 2 + kFontSize / 2 - 1.5, xmlEscape(label));
    out += "</g>\n";
  }
  out += "</svg>\n";
  return out;
}

} // namespace kiln::passes
