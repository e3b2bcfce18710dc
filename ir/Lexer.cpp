#include "ir/Lexer.h"

#include "core/Error.h"

namespace kiln::ir {

namespace {

// Longer number tokens are not numbers anyone writes; refusing them keeps the conversion
// routines on short inputs.
constexpr size_t kMaxNumberLength = 256;
// Error messages quote at most this much of a token so that they stay one readable line.
constexpr size_t kMaxQuotedLength = 40;

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

int hexDigitValue(char c) {
  if (isDigit(c))
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/// Printable ASCII stays as it is; everything else becomes \xHH, so a message never holds a
/// raw control character or newline.
std::string escapeForMessage(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxQuotedLength)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", byte);
  }
  if (text.size() > kMaxQuotedLength)
    out += "...";
  return out;
}

} // namespace

bool isNameChar(char c) { return isLetter(c) || isDigit(c) || c == '_' || c == '.'; }

std::string describeToken(const Token &token) {
  if (token.kind == TokenKind::End)
    return "end of input";
  return "'" + escapeForMessage(token.text) + "'";
}

void Lexer::error(SourceLocation loc, const std::string &message) const {
  fail("{}:{}:{}: {}", sourceName_, loc.line, loc.column, message);
}

void Lexer::advance(size_t count) {
  for (size_t i = 0; i < count && pos_ < text_.size(); ++i, ++pos_) {
    if (text_[pos_] == '\n') {
      ++loc_.line;
      loc_.column = 1;
    } else {
      ++loc_.column;
    }
  }
}

void Lexer::skipWhitespaceAndComments() {
  while (!atEnd()) {
    char c = peek();
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      advance();
    } else if (c == '/' && peek(1) == '/') {
      while (!atEnd() && peek() != '\n')
        advance();
    } else {
      return;
    }
  }
}

std::string_view Lexer::lexNameChars() {
  size_t start = pos_;
  while (!atEnd() && isNameChar(peek()))
    advance();
  return text_.substr(start, pos_ - start);
}

void Lexer::lexNumber(Token &token) {
  size_t start = pos_;
  bool isFloat = false;
  while (isDigit(peek()))
    advance();
  if (peek() == '.') {
    isFloat = true;
    advance();
    while (isDigit(peek()))
      advance();
  }
  if (peek() == 'e' || peek() == 'E') {
    size_t signLength = (peek(1) == '+' || peek(1) == '-') ? 1 : 0;
    if (!isDigit(peek(1 + signLength)))
      error(loc_, "malformed number: the exponent has no digits");
    isFloat = true;
    advance(1 + signLength);
    while (isDigit(peek()))
      advance();
  }
  token.kind = isFloat ? TokenKind::Float : TokenKind::Integer;
  token.text = text_.substr(start, pos_ - start);
  if (token.text.size() > kMaxNumberLength)
    error(token.loc, fmt::format("number is too long ({} characters)", token.text.size()));
}

void Lexer::lexString(Token &token, SourceLocation start) {
  size_t begin = pos_;
  advance(); // opening quote
  std::string value;
  while (true) {
    if (atEnd() || peek() == '\n')
      error(start, "unterminated string");
    char c = peek();
    if (c == '"') {
      advance();
      break;
    }
    if (c != '\\') {
      value += c;
      advance();
      continue;
    }
    SourceLocation escapeLoc = loc_;
    char kind = peek(1);
    switch (kind) {
    case '"': value += '"'; break;
    case '\\': value += '\\'; break;
    case 'n': value += '\n'; break;
    case 't': value += '\t'; break;
    case 'r': value += '\r'; break;
    case 'x': {
      int high = hexDigitValue(peek(2)), low = hexDigitValue(peek(3));
      if (high < 0 || low < 0)
        error(escapeLoc, "\\x in a string needs two hex digits");
      value += static_cast<char>(high * 16 + low);
      advance(2);
      break;
    }
    default:
      if (atEnd() || kind == '\n' || pos_ + 1 >= text_.size())
        error(start, "unterminated string");
      error(escapeLoc, fmt::format("unknown escape '\\{}' in string", escapeForMessage(text_.substr(pos_ + 1, 1))));
    }
    advance(2);
  }
  token.kind = TokenKind::String;
  token.text = text_.substr(begin, pos_ - begin);
  token.value = std::move(value);
}

Token Lexer::next() {
  skipWhitespaceAndComments();
  Token token;
  token.loc = loc_;
  if (atEnd()) {
    token.kind = TokenKind::End;
    return token;
  }
  size_t start = pos_;
  char c = peek();
  auto single = [&](TokenKind kind) {
    advance();
    token.kind = kind;
    token.text = text_.substr(start, 1);
    return token;
  };
  switch (c) {
  case '(': return single(TokenKind::LParen);
  case ')': return single(TokenKind::RParen);
  case '{': return single(TokenKind::LBrace);
  case '}': return single(TokenKind::RBrace);
  case '[': return single(TokenKind::LBracket);
  case ']': return single(TokenKind::RBracket);
  case '<': return single(TokenKind::Less);
  case '>': return single(TokenKind::Greater);
  case ',': return single(TokenKind::Comma);
  case ':': return single(TokenKind::Colon);
  case '=': return single(TokenKind::Equal);
  case '^': return single(TokenKind::Caret);
  case '*': return single(TokenKind::Star);
  case '+': return single(TokenKind::Plus);
  case '-':
    if (peek(1) == '>') {
      advance(2);
      token.kind = TokenKind::Arrow;
      token.text = text_.substr(start, 2);
      return token;
    }
    return single(TokenKind::Minus);
  case '"':
    lexString(token, token.loc);
    return token;
  case '%': {
    advance();
    std::string_view name = lexNameChars();
    if (name.empty())
      error(token.loc, "expected a value name after '%'");
    token.kind = TokenKind::ValueName;
    token.text = text_.substr(start, pos_ - start);
    token.value = std::string(name);
    return token;
  }
  case '@': {
    advance();
    if (peek() == '"') {
      Token quoted;
      lexString(quoted, loc_);
      token.value = std::move(quoted.value);
    } else {
      std::string_view name = lexNameChars();
      if (name.empty())
        error(token.loc, "expected a graph name after '@'");
      token.value = std::string(name);
    }
    token.kind = TokenKind::GraphName;
    token.text = text_.substr(start, pos_ - start);
    return token;
  }
  default: break;
  }
  if (isDigit(c)) {
    lexNumber(token);
    return token;
  }
  if (isLetter(c) || c == '_') {
    token.kind = TokenKind::Identifier;
    token.text = lexNameChars();
    return token;
  }
  error(token.loc, fmt::format("unexpected character '{}'", escapeForMessage(text_.substr(pos_, 1))));
}

} // namespace kiln::ir
