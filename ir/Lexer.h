#pragma once
// Tokens of the .kir text form (ir/Printer.h writes it, ir/Parser.h reads it). The lexer
// skips whitespace and `//` comments, tracks line and column, and turns every malformed
// character sequence into a kiln::Error of the form "FILE:LINE:COL: message".
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::ir {

enum class TokenKind : uint8_t {
  End,
  Identifier, // op names, dtypes, keywords: [A-Za-z_][A-Za-z0-9_.]*
  ValueName,  // %name or %123; `value` holds the part after '%'
  GraphName,  // @name or @"any string"; `value` holds the name
  Integer,    // 123 (no sign: '-' is its own token)
  Float,      // 1.5, 1e-05, 2.5E+3
  String,     // "..." with escapes; `value` holds the decoded bytes
  LParen,
  RParen,
  LBrace,
  RBrace,
  LBracket,
  RBracket,
  Less,
  Greater,
  Comma,
  Colon,
  Equal,
  Arrow,
  Minus,
  Caret, // '^', which opens a kernel body's input list
  Star,  // '*' and '+', in symbolic dims: f32[2*N, N+1]
  Plus,
};

/// 1-based line and column (in bytes) of a token's first character.
struct SourceLocation {
  int line = 1;
  int column = 1;
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string_view text; // the token exactly as written in the source
  std::string value;     // decoded content of String, ValueName and GraphName tokens
  SourceLocation loc;
};

class Lexer {
public:
  Lexer(std::string_view text, std::string sourceName)
      : text_(text), sourceName_(std::move(sourceName)) {}

  /// The next token; End (repeatedly) once the input is used up.
  Token next();

  const std::string &sourceName() const { return sourceName_; }
  /// Throws kiln::Error "FILE:LINE:COL: message".
  [[noreturn]] void error(SourceLocation loc, const std::string &message) const;

private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0';
  }
  bool atEnd() const { return pos_ >= text_.size(); }
  void advance(size_t count = 1);
  void skipWhitespaceAndComments();
  void lexNumber(Token &token);
  void lexString(Token &token, SourceLocation start);
  /// Reads [A-Za-z0-9_.]* and returns it (possibly empty).
  std::string_view lexNameChars();

  std::string_view text_;
  std::string sourceName_;
  size_t pos_ = 0;
  SourceLocation loc_;
};

/// How error messages show a token: "'foo'", "end of input".
std::string describeToken(const Token &token);

/// True for the characters value and graph names are made of: [A-Za-z0-9_.].
bool isNameChar(char c);

} // namespace kiln::ir
