// libFuzzer target for the .kir parser. Any input must either parse or throw kiln::Error
// (never crash, hang, or throw anything else), and whatever parses must survive the round
// trip: print (with every tensor value kept) -> parse gives an equal graph and the same text.
// The exports run on it too, since they walk the same graphs.
#include <cstdio>
#include <cstdlib>

#include "core/Error.h"
#include "ir/Export.h"
#include "ir/GraphEquality.h"
#include "ir/Parser.h"
#include "ir/Printer.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

[[noreturn]] void failRoundTrip(const std::string &what, const std::string &printed) {
  std::fprintf(stderr, "round trip failed: %s\nprinted text:\n%s\n", what.c_str(), printed.c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  std::unique_ptr<Graph> graph;
  try {
    graph = parseGraph(text, "fuzz.kir");
  } catch (const Error &) {
    return 0; // rejected with a message: fine
  }
  PrintOptions keepAll;
  keepAll.keepLargeTensors = true;
  std::string printed = printGraph(*graph, keepAll);
  std::unique_ptr<Graph> reparsed;
  try {
    reparsed = parseGraph(printed, "printed.kir");
  } catch (const Error &e) {
    failRoundTrip(std::string("the printed text does not parse: ") + e.what(), printed);
  }
  std::string difference = graphDifference(*graph, *reparsed);
  if (!difference.empty())
    failRoundTrip(difference, printed);
  std::string reprinted = printGraph(*reparsed, keepAll);
  if (reprinted != printed)
    failRoundTrip("printing the reparsed graph gives different text:\n" + reprinted, printed);
  // The default (eliding) form and the exports must not crash either.
  (void)printGraph(*graph);
  (void)toDot(*graph);
  (void)toJson(*graph);
  return 0;
}
