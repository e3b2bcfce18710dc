// The .kir parser: recursive descent over a fixed-depth grammar, one token of lookahead. The
// only nesting is a kernel's body, whose statements are read by the same rules in a scope of
// their own; a kernel inside a body is rejected, so that nesting is one level deep. Nodes are
// built as they are read: attributes are checked against the op's schema and completed with
// its defaults, inference computes the result types, and the printed types must match them
// (a kernel's types are checked against its body's return instead). The finished graph goes
// through ir::verify.
#include "ir/Parser.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>

#include "core/Error.h"
#include "core/ShapeMath.h"
#include "core/SymbolicDim.h"
#include "ir/Builder.h"
#include "ir/Lexer.h"
#include "ir/SymbolicShapes.h"
#include "ir/Verifier.h"

namespace kiln::ir {

namespace {

bool isNumericName(std::string_view name) {
  return std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

class Parser {
public:
  Parser(std::string_view text, const std::string &sourceName) : lexer_(text, sourceName) { advance(); }

  std::unique_ptr<Graph> parse() {
    expectKeyword("graph", "at the start of the file");
    if (tok_.kind != TokenKind::GraphName)
      errorAt(tok_.loc, "expected the graph's name (@name) after 'graph', found " + describeToken(tok_));
    graph_ = std::make_unique<Graph>(tok_.value);
    current_ = graph_.get();
    advance();
    parseSignature();
    expect(TokenKind::LBrace, "'{' to open the graph body");
    parseStatements();
    parseReturn(resultTypes_, "the signature declares");
    expect(TokenKind::RBrace, "'}' after the return statement");
    if (tok_.kind != TokenKind::End)
      errorAt(tok_.loc, "unexpected " + describeToken(tok_) + " after the end of the graph");
    try {
      verify(*graph_);
    } catch (const Error &e) {
      fail("{}: {}", lexer_.sourceName(), e.what());
    }
    return std::move(graph_);
  }

private:
  struct Definition {
    Value *value;
    SourceLocation loc;
  };

  [[noreturn]] void errorAt(SourceLocation loc, const std::string &message) const { lexer_.error(loc, message); }
  void advance() { tok_ = lexer_.next(); }
  bool atKeyword(std::string_view word) const { return tok_.kind == TokenKind::Identifier && tok_.text == word; }
  bool consumeIf(TokenKind kind) {
    if (tok_.kind != kind)
      return false;
    advance();
    return true;
  }
  void expect(TokenKind kind, std::string_view what) {
    if (tok_.kind != kind)
      errorAt(tok_.loc, fmt::format("expected {}, found {}", what, describeToken(tok_)));
    advance();
  }
  void expectKeyword(std::string_view word, std::string_view where) {
    if (!atKeyword(word))
      errorAt(tok_.loc, fmt::format("expected '{}' {}, found {}", word, where, describeToken(tok_)));
    advance();
  }

  // --- numbers -------------------------------------------------------------------------

  /// An optional '-' and an integer token, in int64 range.
  int64_t parseInteger(std::string_view what) {
    SourceLocation loc = tok_.loc;
    bool negative = consumeIf(TokenKind::Minus);
    if (tok_.kind != TokenKind::Integer)
      errorAt(tok_.loc, fmt::format("expected an integer for {}, found {}", what, describeToken(tok_)));
    uint64_t magnitude = 0;
    auto [end, ec] = std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), magnitude);
    uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    if (ec != std::errc() || end != tok_.text.data() + tok_.text.size() || magnitude > limit)
      errorAt(loc, fmt::format("integer {}{} is out of range for {}", negative ? "-" : "", tok_.text, what));
    advance();
    // Negate in unsigned arithmetic: -2^63 has no positive int64 counterpart.
    return negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  }

  /// A dim: an integer (with an optional '-', for attributes such as reshape's -1), or a
  /// symbolic expression of symbols and integers joined by '*' and '+' (core/SymbolicDim.h).
  int64_t parseDim(std::string_view what) {
    int64_t sum = parseDimTerm(what);
    while (consumeIf(TokenKind::Plus))
      sum = checkedDimOp([&] { return dimAdd(sum, parseDimTerm(what), what); });
    return sum;
  }

  int64_t parseDimTerm(std::string_view what) {
    int64_t product = parseDimFactor(what);
    while (consumeIf(TokenKind::Star))
      product = checkedDimOp([&] { return dimMul(product, parseDimFactor(what), what); });
    return product;
  }

  int64_t parseDimFactor(std::string_view what) {
    if (tok_.kind != TokenKind::Identifier)
      return parseInteger(what);
    SourceLocation loc = tok_.loc;
    std::string name(tok_.text);
    if (!isValidSymbolName(name))
      errorAt(loc, fmt::format("'{}' cannot name a symbolic dim in {}", name, what));
    advance();
    return symbolDim(name);
  }

  /// Symbolic arithmetic's errors (a coefficient past int64) at the current token.
  template <typename Fn> int64_t checkedDimOp(Fn fn) {
    SourceLocation loc = tok_.loc;
    try {
      return fn();
    } catch (const Error &e) {
      errorAt(loc, e.what());
    }
  }

  /// An optional '-' and an integer, float, inf or nan, converted to T with correct rounding
  /// (a float is read as a float, never through double, so shortest forms read back exactly).
  template <typename T> T parseReal(std::string_view what) {
    SourceLocation loc = tok_.loc;
    bool negative = consumeIf(TokenKind::Minus);
    T value;
    if (atKeyword("inf")) {
      value = std::numeric_limits<T>::infinity();
    } else if (atKeyword("nan")) {
      value = std::numeric_limits<T>::quiet_NaN();
    } else if (tok_.kind == TokenKind::Integer || tok_.kind == TokenKind::Float) {
      auto [end, ec] = std::from_chars(tok_.text.data(), tok_.text.data() + tok_.text.size(), value);
      if (ec != std::errc() || end != tok_.text.data() + tok_.text.size())
        errorAt(loc, fmt::format("number {}{} is out of range for {}", negative ? "-" : "", tok_.text, what));
    } else {
      errorAt(tok_.loc, fmt::format("expected a number for {}, found {}", what, describeToken(tok_)));
    }
    advance();
    return negative ? -value : value; // negation flips the sign bit, also of nan and 0
  }

  // --- types and literals ----------------------------------------------------------------

  TensorType parseType() {
    if (tok_.kind != TokenKind::Identifier)
      errorAt(tok_.loc, "expected a type like f32[2,3], found " + describeToken(tok_));
    std::optional<DType> dtype = parseDType(tok_.text);
    if (!dtype)
      errorAt(tok_.loc, fmt::format("unknown dtype {}", describeToken(tok_)));
    advance();
    expect(TokenKind::LBracket, "'[' after the dtype");
    TensorType type{*dtype, {}};
    int64_t product = 1;
    while (tok_.kind != TokenKind::RBracket) {
      if (!type.shape.empty())
        expect(TokenKind::Comma, "',' or ']' in the shape");
      SourceLocation loc = tok_.loc;
      int64_t dim = parseDim("a dimension");
      if (isInternedSymbolicDim(dim)) {
        if (static_cast<int64_t>(type.shape.size()) == kMaxParseRank)
          errorAt(loc, fmt::format("a type may have at most {} dimensions", kMaxParseRank));
        type.shape.push_back(dim);
        continue;
      }
      if (dim < 0)
        errorAt(loc, fmt::format("dimension {} is negative", dim));
      if (static_cast<int64_t>(type.shape.size()) == kMaxParseRank)
        errorAt(loc, fmt::format("a type may have at most {} dimensions", kMaxParseRank));
      if (dim > kMaxElements) // also beside a zero dim: kiln's limit holds for every shape
        errorAt(loc, fmt::format("dimension {} is larger than kiln's limit of 2^48", dim));
      if (dim > 0 && product > kMaxElements / dim)
        errorAt(loc, fmt::format("the shape has more than 2^48 elements (not counting zero dims)"));
      product *= dim > 0 ? dim : 1;
      type.shape.push_back(dim);
    }
    advance();
    return type;
  }

  /// `tensor<T>[v, ...]`, or `tensor<T> elided` when allowed (the result is then undefined).
  Tensor parseTensor(bool allowElided) {
    expectKeyword("tensor", "to start a tensor literal");
    expect(TokenKind::Less, "'<' after 'tensor'");
    TensorType type = parseType();
    expect(TokenKind::Greater, "'>' after the tensor's type");
    if (atKeyword("elided")) {
      if (!allowElided)
        errorAt(tok_.loc, "this tensor's values were elided when it was printed and cannot be read back; "
                          "dump it with --keep-data");
      advance();
      return Tensor();
    }
    SourceLocation open = tok_.loc;
    expect(TokenKind::LBracket, "'[' with the tensor's values or 'elided'");
    // Values are collected first and the tensor allocated only once their count matches the
    // type, so memory stays proportional to the text whatever shape is declared.
    std::vector<double> reals;
    std::vector<int64_t> integers;
    int64_t count = 0, expected = type.numElements();
    std::string what = fmt::format("a {} tensor element", dtypeName(type.dtype));
    while (tok_.kind != TokenKind::RBracket) {
      if (count)
        expect(TokenKind::Comma, "',' or ']' between tensor values");
      if (count == expected)
        errorAt(tok_.loc, fmt::format("tensor<{}> needs {} values, got more", type.toString(), expected));
      SourceLocation loc = tok_.loc;
      switch (type.dtype) {
      case DType::F64: reals.push_back(parseReal<double>(what)); break;
      case DType::F32:
      case DType::F16:
      case DType::BF16: reals.push_back(parseReal<float>(what)); break;
      case DType::Bool:
        if (!atKeyword("true") && !atKeyword("false"))
          errorAt(loc, "expected true or false for a bool tensor element, found " + describeToken(tok_));
        integers.push_back(atKeyword("true") ? 1 : 0);
        advance();
        break;
      case DType::I64:
      case DType::I32:
      case DType::I8:
      case DType::U8: integers.push_back(parseIntegerElement(type.dtype, what, loc)); break;
      }
      ++count;
    }
    advance();
    if (count != expected)
      errorAt(open, fmt::format("tensor<{}> needs {} values, got {}", type.toString(), expected, count));
    Tensor tensor(type);
    for (int64_t i = 0; i < count; ++i) {
      if (isFloat(type.dtype))
        tensor.setDouble(i, reals[static_cast<size_t>(i)]); // exact: each value fits the dtype
      else
        tensor.setInt(i, integers[static_cast<size_t>(i)]);
    }
    return tensor;
  }

  int64_t parseIntegerElement(DType dtype, const std::string &what, SourceLocation loc) {
    int64_t value = parseInteger(what);
    int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
    switch (dtype) {
    case DType::I32: lo = INT32_MIN, hi = INT32_MAX; break;
    case DType::I8: lo = INT8_MIN, hi = INT8_MAX; break;
    case DType::U8: lo = 0, hi = UINT8_MAX; break;
    default: break;
    }
    if (value < lo || value > hi)
      errorAt(loc, fmt::format("value {} is out of range for {}", value, dtypeName(dtype)));
    return value;
  }

  // --- attributes ------------------------------------------------------------------------

  Attribute parseAttrValue(const AttrSpec &spec) {
    std::string what = fmt::format("attribute '{}'", spec.name);
    switch (spec.kind) {
    case AttrKind::Int: return parseInteger(what);
    case AttrKind::Float: return parseReal<double>(what);
    case AttrKind::Ints: return parseList<int64_t>(what, [&] { return parseDim(what); });
    case AttrKind::Floats: return parseList<double>(what, [&] { return parseReal<double>(what); });
    case AttrKind::String: {
      if (tok_.kind != TokenKind::String)
        errorAt(tok_.loc, fmt::format("expected a string for {}, found {}", what, describeToken(tok_)));
      std::string value = tok_.value;
      advance();
      return value;
    }
    case AttrKind::DType: {
      std::optional<DType> dtype;
      if (tok_.kind == TokenKind::Identifier)
        dtype = parseDType(tok_.text);
      if (!dtype)
        errorAt(tok_.loc, fmt::format("expected a dtype (f32, i64, ...) for {}, found {}", what, describeToken(tok_)));
      advance();
      return *dtype;
    }
    case AttrKind::Tensor: return parseTensor(false);
    }
    errorAt(tok_.loc, "unsupported attribute kind");
  }

  template <typename T, typename ParseItem> std::vector<T> parseList(const std::string &what, ParseItem parseItem) {
    expect(TokenKind::LBracket, fmt::format("'[' to start the list for {}", what));
    std::vector<T> items;
    while (tok_.kind != TokenKind::RBracket) {
      if (!items.empty())
        expect(TokenKind::Comma, "',' or ']' in the list");
      items.push_back(parseItem());
    }
    advance();
    return items;
  }

  /// `{name = value, ...}`, each value read as the kind the op's schema declares.
  void parseAttrDict(OpKind op, AttrMap &attrs) {
    const std::vector<AttrSpec> &specs = opDef(op).attrs;
    expect(TokenKind::LBrace, "'{'");
    for (bool first = true; tok_.kind != TokenKind::RBrace; first = false) {
      if (!first)
        expect(TokenKind::Comma, "',' or '}' between attributes");
      if (tok_.kind != TokenKind::Identifier)
        errorAt(tok_.loc, "expected an attribute name, found " + describeToken(tok_));
      std::string name(tok_.text);
      auto spec = std::find_if(specs.begin(), specs.end(), [&](const AttrSpec &s) { return s.name == name; });
      if (spec == specs.end() || (op == OpKind::Param && name != "value")) {
        std::vector<std::string> known;
        for (const AttrSpec &s : specs)
          if (op != OpKind::Param || s.name == "value")
            known.push_back(s.name);
        errorAt(tok_.loc, fmt::format("unknown attribute '{}' for {} (it has {})", name, opName(op),
                                      known.empty() ? "none" : fmt::format("{}", fmt::join(known, ", "))));
      }
      if (attrs.count(name))
        errorAt(tok_.loc, fmt::format("attribute '{}' is given twice", name));
      advance();
      expect(TokenKind::Equal, "'=' after the attribute name");
      bool paramValue = op == OpKind::Param;
      SourceLocation valueLoc = tok_.loc;
      attrs[name] = paramValue ? Attribute(parseTensor(true)) : parseAttrValue(*spec);
      // Symbols belong in attributes that hold dims (reshape's shape), not in axes or pads.
      if (const auto *ints = std::get_if<std::vector<int64_t>>(&attrs[name]); ints && !attrHoldsDims(op, name))
        for (int64_t value : *ints)
          if (isInternedSymbolicDim(value))
            errorAt(valueLoc, fmt::format("attribute '{}' of {} holds integers, not symbolic dims (got {})", name,
                                          opName(op), dimToString(value)));
    }
    advance();
  }

  // --- graph structure -------------------------------------------------------------------

  void checkNewName(const Token &name) {
    auto it = values_.find(name.value);
    if (it != values_.end())
      errorAt(name.loc, fmt::format("redefinition of %{} (first defined at {}:{})", name.value, it->second.loc.line,
                                    it->second.loc.column));
  }

  void define(const Token &name, Value *value) {
    if (!isNumericName(name.value))
      value->setName(name.value);
    values_[name.value] = Definition{value, name.loc};
  }

  Value *parseOperand() {
    if (tok_.kind != TokenKind::ValueName)
      errorAt(tok_.loc, "expected a value like %x, found " + describeToken(tok_));
    auto it = values_.find(tok_.value);
    if (it == values_.end() && body_ && body_->outerValues.count(tok_.value))
      errorAt(tok_.loc, fmt::format("undefined value %{}: a kernel body sees only its own inputs (^(...)), and "
                                    "%{} is defined outside it",
                                    tok_.value, tok_.value));
    if (it == values_.end())
      errorAt(tok_.loc, fmt::format("undefined value %{}", tok_.value));
    advance();
    return it->second.value;
  }

  void parseSignature() {
    expect(TokenKind::LParen, "'(' to start the graph's inputs");
    while (tok_.kind != TokenKind::RParen) {
      if (!graph_->inputs().empty())
        expect(TokenKind::Comma, "',' or ')' between graph inputs");
      if (tok_.kind != TokenKind::ValueName)
        errorAt(tok_.loc, "expected a graph input like %x, found " + describeToken(tok_));
      Token name = tok_;
      if (isNumericName(name.value))
        errorAt(name.loc, fmt::format("graph input %{} needs a name, not a number", name.value));
      checkNewName(name);
      advance();
      expect(TokenKind::Colon, "':' after the input's name");
      define(name, graph_->addInput(parseType()));
    }
    advance();
    expect(TokenKind::Arrow, "'->' after the graph's inputs");
    expect(TokenKind::LParen, "'(' to start the graph's result types");
    while (tok_.kind != TokenKind::RParen) {
      if (!resultTypes_.empty())
        expect(TokenKind::Comma, "',' or ')' between result types");
      resultTypes_.push_back(parseType());
    }
    advance();
  }

  /// Statements up to (not including) the 'return' of the current graph or body.
  void parseStatements() {
    while (!atKeyword("return")) {
      if (tok_.kind != TokenKind::ValueName)
        errorAt(tok_.loc, "expected a statement ('%name = op(...)') or 'return', found " + describeToken(tok_));
      parseStatement();
    }
  }

  void parseStatement() {
    SourceLocation stmt = tok_.loc;
    std::vector<Token> results;
    do {
      if (tok_.kind != TokenKind::ValueName)
        errorAt(tok_.loc, "expected a result name like %0, found " + describeToken(tok_));
      checkNewName(tok_);
      for (const Token &earlier : results)
        if (earlier.value == tok_.value)
          errorAt(tok_.loc, fmt::format("%{} is named twice in one statement", tok_.value));
      results.push_back(tok_);
      advance();
    } while (consumeIf(TokenKind::Comma));
    expect(TokenKind::Equal, "'=' after the result names");
    if (tok_.kind != TokenKind::Identifier)
      errorAt(tok_.loc, "expected an op name, found " + describeToken(tok_));
    std::optional<OpKind> op = parseOpName(tok_.text);
    if (!op)
      errorAt(tok_.loc, fmt::format("unknown op {}", describeToken(tok_)));
    if (body_ && *op == OpKind::Kernel)
      errorAt(tok_.loc, fmt::format("a kernel cannot hold another kernel (kernel bodies do not nest); this is in "
                                    "the body of kernel %{} opened at {}:{}",
                                    body_->kernelName, body_->open.line, body_->open.column));
    if (body_ && *op == OpKind::Param)
      errorAt(tok_.loc, fmt::format("a kernel body cannot hold a param; parameters stay outside kernel %{}, as "
                                    "its operands",
                                    body_->kernelName));
    advance();

    std::vector<Value *> inputs;
    AttrMap attrs;
    if (*op == OpKind::Param) {
      if (tok_.kind != TokenKind::String)
        errorAt(tok_.loc, "expected the parameter's name as a string, found " + describeToken(tok_));
      attrs["name"] = tok_.value;
      advance();
      if (tok_.kind == TokenKind::LBrace)
        parseAttrDict(*op, attrs);
    } else if (*op == OpKind::Constant) {
      attrs["value"] = parseTensor(false);
    } else {
      expect(TokenKind::LParen, "'(' after the op name");
      while (tok_.kind != TokenKind::RParen) {
        if (!inputs.empty())
          expect(TokenKind::Comma, "',' or ')' between operands");
        inputs.push_back(parseOperand());
      }
      advance();
      if (tok_.kind == TokenKind::LBrace)
        parseAttrDict(*op, attrs);
    }
    expect(TokenKind::Colon, "':' and the result types");
    std::vector<TensorType> types;
    std::vector<SourceLocation> typeLocs;
    do {
      typeLocs.push_back(tok_.loc);
      types.push_back(parseType());
    } while (consumeIf(TokenKind::Comma));
    if (*op == OpKind::Param) { // a parameter's dtype and shape are its printed type
      attrs["dtype"] = types[0].dtype;
      attrs["shape"] = types[0].shape;
    }
    if (*op == OpKind::Kernel) {
      buildKernel(stmt, results, inputs, std::move(attrs), types);
      return;
    }
    if (tok_.kind == TokenKind::LBrace)
      errorAt(tok_.loc, fmt::format("only kernel nodes have a body; {} does not", opName(*op)));
    buildNode(*op, stmt, results, inputs, std::move(attrs), types, typeLocs);
  }

  /// A kernel's types cannot be inferred: they are as written, and the body's return must
  /// give them (parseReturn checks).
  void buildKernel(SourceLocation stmt, const std::vector<Token> &results, const std::vector<Value *> &inputs,
                   AttrMap attrs, const std::vector<TensorType> &types) {
    if (results.size() != types.size())
      errorAt(stmt, fmt::format("wrong number of result names: kernel %{} declares {} result type{}, {} name{} given",
                                results[0].value, types.size(), types.size() == 1 ? "" : "s", results.size(),
                                results.size() == 1 ? " is" : "s are"));
    try {
      attrs = completeAttrs(OpKind::Kernel, std::move(attrs));
    } catch (const Error &e) {
      errorAt(stmt, fmt::format("kernel %{}: {}", results[0].value, e.what()));
    }
    if (tok_.kind != TokenKind::LBrace)
      errorAt(tok_.loc, fmt::format("expected '{{' to open the body of kernel %{}, found {}", results[0].value,
                                    describeToken(tok_)));
    std::unique_ptr<Graph> body = parseKernelBody(results[0].value, inputs, types);
    Node *node = current_->createNode(OpKind::Kernel, inputs, std::move(attrs), types);
    node->setBody(std::move(body));
    for (size_t i = 0; i < results.size(); ++i)
      define(results[i], node->output(i));
  }

  /// `{ ^(%a: T, ...): statements return ... }`, read into a new graph in a scope of its own.
  std::unique_ptr<Graph> parseKernelBody(const std::string &kernelName, const std::vector<Value *> &operands,
                                         const std::vector<TensorType> &resultTypes) {
    BodyScope scope{kernelName, tok_.loc, std::move(values_)};
    advance(); // '{'
    values_.clear();
    body_ = &scope;
    auto body = std::make_unique<Graph>("kernel");
    Graph *outer = current_;
    current_ = body.get();

    expect(TokenKind::Caret, "'^' and the body's inputs, like ^(%a: f32[2])");
    expect(TokenKind::LParen, "'(' after '^'");
    while (tok_.kind != TokenKind::RParen) {
      size_t index = body->inputs().size();
      if (index)
        expect(TokenKind::Comma, "',' or ')' between body inputs");
      if (tok_.kind != TokenKind::ValueName)
        errorAt(tok_.loc, "expected a body input like %a, found " + describeToken(tok_));
      Token name = tok_;
      if (isNumericName(name.value))
        errorAt(name.loc, fmt::format("body input %{} needs a name, not a number", name.value));
      if (index >= operands.size())
        errorAt(name.loc, fmt::format("the body of kernel %{} takes more inputs than the kernel's {} operand{}",
                                      kernelName, operands.size(), operands.size() == 1 ? "" : "s"));
      checkNewName(name);
      advance();
      expect(TokenKind::Colon, "':' after the body input's name");
      SourceLocation typeLoc = tok_.loc;
      TensorType type = parseType();
      if (type != operands[index]->type())
        errorAt(typeLoc, fmt::format("type mismatch: body input %{} is written as {} but operand {} of kernel %{} "
                                     "has type {}",
                                     name.value, type.toString(), index, kernelName,
                                     operands[index]->type().toString()));
      define(name, body->addInput(type));
    }
    if (body->inputs().size() != operands.size())
      errorAt(tok_.loc, fmt::format("the body of kernel %{} takes {} input{}, the kernel has {} operand{}",
                                    kernelName, body->inputs().size(), body->inputs().size() == 1 ? "" : "s",
                                    operands.size(), operands.size() == 1 ? "" : "s"));
    advance();
    expect(TokenKind::Colon, "':' after the body's inputs");
    parseStatements();
    parseReturn(resultTypes, fmt::format("kernel %{} declares", kernelName));
    expect(TokenKind::RBrace, "'}' to close the kernel's body after its return");

    current_ = outer;
    body_ = nullptr;
    values_ = std::move(scope.outerValues);
    return body;
  }

  void buildNode(OpKind op, SourceLocation stmt, const std::vector<Token> &results, const std::vector<Value *> &inputs,
                 AttrMap attrs, const std::vector<TensorType> &types, const std::vector<SourceLocation> &typeLocs) {
    std::vector<TensorType> inputTypes;
    for (const Value *input : inputs)
      inputTypes.push_back(input->type());
    std::vector<TensorType> inferred;
    try {
      attrs = completeAttrs(op, std::move(attrs));
    } catch (const Error &e) {
      errorAt(stmt, fmt::format("{}: {}", describeCall(op, inputTypes), e.what()));
    }
    try {
      // inferTypes names the call ("add(f32[2], f32[3]): ..."); a source's own messages
      // already name it ("param 'w': ..."), where "param()" would only add noise.
      bool source = opTraits(op).tier == OpTier::Source;
      inferred = source ? opDef(op).infer(inputTypes, attrs) : inferTypes(op, inputTypes, attrs);
    } catch (const Error &e) {
      errorAt(stmt, e.what());
    }
    if (results.size() != inferred.size())
      errorAt(stmt, fmt::format("wrong number of result names: {} produces {} result{}, {} name{} given", opName(op),
                                inferred.size(), inferred.size() == 1 ? "" : "s", results.size(),
                                results.size() == 1 ? " is" : "s are"));
    if (types.size() != inferred.size())
      errorAt(types.size() > inferred.size() ? typeLocs[inferred.size()] : typeLocs.back(),
              fmt::format("{} result types are given, {} produces {}", types.size(), opName(op), inferred.size()));
    for (size_t i = 0; i < types.size(); ++i)
      if (types[i] != inferred[i])
        errorAt(typeLocs[i], fmt::format("type mismatch: %{} is written as {} but {} infers {}", results[i].value,
                                         types[i].toString(), opName(op), inferred[i].toString()));
    Node *node = current_->createNode(op, inputs, std::move(attrs), inferred);
    for (size_t i = 0; i < results.size(); ++i)
      define(results[i], node->output(i));
  }

  /// `return %a, %b as "name", ...`, whose values must have `expected` types; `declarer`
  /// names where those come from in messages ("the signature declares").
  void parseReturn(const std::vector<TensorType> &expected, const std::string &declarer) {
    SourceLocation loc = tok_.loc;
    advance(); // 'return'
    std::vector<Value *> outputs;
    std::vector<Token> names;
    std::vector<std::string> outputNames;
    if (tok_.kind == TokenKind::ValueName) {
      do {
        names.push_back(tok_);
        outputs.push_back(parseOperand());
        outputNames.emplace_back();
        if (atKeyword("as")) {
          advance();
          if (tok_.kind != TokenKind::String)
            errorAt(tok_.loc, "expected the output's name as a string after 'as', found " + describeToken(tok_));
          outputNames.back() = tok_.value;
          advance();
        }
      } while (consumeIf(TokenKind::Comma));
    }
    if (outputs.size() != expected.size())
      errorAt(loc, fmt::format("return gives {} value{}, {} {}", outputs.size(), outputs.size() == 1 ? "" : "s",
                               declarer, expected.size()));
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i]->type() != expected[i])
        errorAt(names[i].loc, fmt::format("type mismatch: %{} has type {}, {} {}", names[i].value,
                                          outputs[i]->type().toString(), declarer, expected[i].toString()));
    current_->setOutputs(std::move(outputs));
    for (size_t i = 0; i < outputNames.size(); ++i)
      current_->setOutputName(i, std::move(outputNames[i]));
  }

  /// While a kernel's body is read: the kernel, where its body opened, and the enclosing
  /// scope's names (set aside: the body cannot see them).
  struct BodyScope {
    std::string kernelName;
    SourceLocation open;
    std::unordered_map<std::string, Definition> outerValues;
  };

  Lexer lexer_;
  Token tok_;
  std::unique_ptr<Graph> graph_;
  Graph *current_ = nullptr; // the graph statements go into: graph_ or a kernel's body
  BodyScope *body_ = nullptr; // set while a kernel's body is read
  std::vector<TensorType> resultTypes_;
  std::unordered_map<std::string, Definition> values_;
};

} // namespace

std::unique_ptr<Graph> parseGraph(std::string_view text, const std::string &sourceName) {
  if (text.size() > kMaxParseInputBytes)
    fail("{}: input is {} bytes, more than the limit of {}", sourceName, text.size(), kMaxParseInputBytes);
  return Parser(text, sourceName).parse();
}

std::unique_ptr<Graph> parseGraphFile(const std::string &path) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    return parseGraph(text, "<stdin>");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    fail("cannot read '{}': it is a directory", path);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    fail("cannot open '{}': {}", path, std::strerror(errno));
  // Read in chunks, stopping one chunk past the limit so that parseGraph reports an
  // oversized file without this reading all of it.
  std::vector<char> chunk(size_t(1) << 16);
  while (in && text.size() <= kMaxParseInputBytes) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    text.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad())
    fail("cannot read '{}': {}", path, std::strerror(errno));
  return parseGraph(text, path);
}

} // namespace kiln::ir
