// The Family column of ir/Ops.def names the file that defines each op: for every op,
// ir/ops/<Family>.cpp exists and holds the definition `OpDef define<Enum>() {` (or, for a row
// of ir/ElementwiseOps.def, the UNARY_OP or BINARY_OP expansion that defines it). The column
// is what a reader follows to an op's semantics, so a line that names the wrong file (or a
// definition moved without its line) fails here rather than misleading them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "ir/Op.h"

using namespace kiln;
using namespace kiln::ir;

namespace {

const std::filesystem::path kOpsDir = std::filesystem::path(KILN_SOURCE_DIR) / "ir" / "ops";

std::string readFile(const std::filesystem::path &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The enum names of the ops, in Ops.def order (opTraits holds only the mnemonic).
const std::vector<std::string> kEnumNames = {
#define OP(Enum, ...) #Enum,
#include "ir/Ops.def"
};

/// The enum names of the rows of ir/ElementwiseOps.def made by `macro` (UNARY_OP, BINARY_OP),
/// read from the file.
std::vector<std::string> elementwiseTableRows(const std::string &macro) {
  std::string text = readFile(std::filesystem::path(KILN_SOURCE_DIR) / "ir" / "ElementwiseOps.def");
  const std::regex row("^" + macro + R"(\((\w+),)", std::regex::multiline);
  std::vector<std::string> names;
  for (std::sregex_iterator it(text.begin(), text.end(), row), end; it != end; ++it)
    names.push_back((*it)[1].str());
  return names;
}

/// Every op definition under ir/ops/: Name -> the file's stem. A definition is a line
/// `OpDef define<Name>() {`, or for the rows of ir/ElementwiseOps.def the file whose UNARY_OP
/// (or BINARY_OP) expansion defines `OpDef define##Enum()`.
std::map<std::string, std::string> definitionsInSourceTree() {
  std::map<std::string, std::string> where;
  const std::regex definition(R"(^OpDef define(\w+)\(\) \{)", std::regex::multiline);
  for (const auto &entry : std::filesystem::directory_iterator(kOpsDir)) {
    if (entry.path().extension() != ".cpp")
      continue;
    std::string text = readFile(entry.path()), stem = entry.path().stem().string();
    for (std::sregex_iterator it(text.begin(), text.end(), definition), end; it != end; ++it)
      where[(*it)[1].str()] = stem;
    for (std::string macro : {"UNARY_OP", "BINARY_OP"}) {
      const std::regex tableExpansion("#define " + macro + R"(\([^)]*\)[^#]*OpDef define##Enum\(\))");
      if (std::regex_search(text, tableExpansion))
        for (const std::string &name : elementwiseTableRows(macro))
          where[name] = stem;
    }
  }
  return where;
}

} // namespace

TEST(OpFamily, EveryFamilyNamesTheFileThatDefinesTheOp) {
  ASSERT_TRUE(std::filesystem::is_directory(kOpsDir)) << kOpsDir;
  ASSERT_EQ(static_cast<int>(kEnumNames.size()), kNumOps);
  std::map<std::string, std::string> where = definitionsInSourceTree();
  for (int i = 0; i < kNumOps; ++i) {
    const std::string &name = kEnumNames[static_cast<size_t>(i)];
    std::string family(opTraits(static_cast<OpKind>(i)).family);
    EXPECT_TRUE(std::filesystem::exists(kOpsDir / (family + ".cpp")))
        << name << ": family " << family << " names no file ir/ops/" << family << ".cpp";
    auto found = where.find(name);
    if (found == where.end())
      ADD_FAILURE() << name << ": no `OpDef define" << name << "() {` under ir/ops/";
    else
      EXPECT_EQ(found->second, family) << name << " is defined in ir/ops/" << found->second
                                       << ".cpp, but its Ops.def family says " << family;
  }
}

// The check above must be able to fail: a definition is found where it is, and only there.
TEST(OpFamily, FindsDefinitionsWhereTheyAre) {
  std::map<std::string, std::string> where = definitionsInSourceTree();
  EXPECT_EQ(where.at("Slice"), "MovementRegion");
  EXPECT_EQ(where.at("Add"), "Binary");
  EXPECT_EQ(where.at("Mod"), "Binary");
  EXPECT_EQ(where.at("Sinh"), "Unary");
  // The file's rows are all read: every op of family Unary is a row, every one of Binary but mod.
  size_t unary = 0, binary = 0;
  for (int i = 0; i < kNumOps; ++i) {
    unary += opTraits(static_cast<OpKind>(i)).family == "Unary";
    binary += opTraits(static_cast<OpKind>(i)).family == "Binary";
  }
  EXPECT_GE(unary, 28u);
  EXPECT_EQ(elementwiseTableRows("UNARY_OP").size(), unary);
  EXPECT_EQ(elementwiseTableRows("BINARY_OP").size(), binary - 1);
  EXPECT_EQ(where.count("NoSuchOp"), 0u);
}
