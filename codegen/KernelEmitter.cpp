// The kernel emitter (see KernelEmitter.h): scopes with hoisting, and values computed inline.
#include "codegen/KernelEmitter.h"

#include <algorithm>

#include "codegen/EmitDirect.h"
#include "codegen/OpLowering.h"
#include "codegen/ScalarOps.h"
#include "core/Error.h"

namespace kiln::codegen {

using ir::OpKind;

KernelEmitter::KernelEmitter(const KernelPlan &plan, std::string prefix, bool restrictPointers,
                             int numOperandBuffers)
    : plan_(plan), prefix_(std::move(prefix)), restrict_(restrictPointers), numOperandBuffers_(numOperandBuffers) {}

bool KernelEmitter::isSoleWeightOperand(int buffer) const {
  const KernelBuffer &b = plan_.buffers.at(static_cast<size_t>(buffer));
  return b.kind == KernelBuffer::Kind::Operand && b.index >= 0 &&
         static_cast<size_t>(b.index) < soleWeightOperands_.size() && soleWeightOperands_[static_cast<size_t>(b.index)];
}

void KernelEmitter::beginFunction(int stage) {
  stage_ = stage;
  counter_ = 0;
  arena_ = IndexArena();
  scopes_.clear();
  scopes_.emplace_back();
  pointers_.clear();
  overrides_.clear();
  watched_.clear();
  stridedInnerLoads_ = irregularInnerAccesses_ = 0;
  line(fmt::format("const {0} *c = (const {0} *)vctx;", contextType()));
  line("(void)c;");
}

std::string KernelEmitter::endFunction() {
  if (scopes_.size() != 1)
    fail("codegen: internal error: {} scopes left open", scopes_.size() - 1);
  std::string text;
  for (const std::string &l : scopes_.front().lines)
    text += "  " + l + "\n";
  scopes_.clear();
  return text;
}

void KernelEmitter::open(const std::string &header) {
  scopes_.emplace_back();
  scopes_.back().header = header;
}

void KernelEmitter::close() {
  Scope scope = std::move(scopes_.back());
  scopes_.pop_back();
  std::vector<std::string> &parent = scopes_.back().lines;
  parent.insert(parent.end(), scope.pragmas.begin(), scope.pragmas.end());
  parent.push_back(scope.header + " {");
  for (const std::string &l : scope.lines)
    parent.push_back("  " + l);
  parent.push_back("}");
}

void KernelEmitter::line(const std::string &text) { scopes_.back().lines.push_back(text); }

void KernelEmitter::lineAt(int level, const std::string &text) {
  if (level < 0 || level > depth())
    fail("codegen: internal error: no scope at level {}", level);
  scopes_[static_cast<size_t>(level)].lines.push_back(text);
}

std::string KernelEmitter::fresh(const std::string &prefix) { return prefix + std::to_string(counter_++); }

Index KernelEmitter::declareIndex(const std::string &code, int64_t extent, const std::string &prefix) {
  std::string name = fresh(prefix);
  line(fmt::format("const int64_t {} = {};", name, code));
  return arena_.var(name, extent, depth());
}

Index KernelEmitter::openLoop(int64_t extent, const std::string &prefix) {
  std::string name = fresh(prefix);
  open(fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0})", name, extent));
  return arena_.var(name, extent, depth());
}

void KernelEmitter::openIndependent(const std::string &header) {
  open(header);
  scopes_.back().pragmas = {"#pragma GCC ivdep"};
}

Index KernelEmitter::openIndependentLoop(int64_t extent) {
  Index index = openLoop(extent);
  // A short loop of known length is unrolled completely before the vectoriser runs, and the
  // straight-line code left is not vectorised when it has selects (relu, masks): a 14-wide
  // BatchNorm+ReLU row ran scalar, 5x slower. Kept as a loop, it gets 8- and 4-lane vectors.
  scopes_.back().pragmas = {"#pragma GCC ivdep"};
  if (extent >= 8)
    scopes_.back().pragmas.push_back("#pragma GCC unroll 1");
  return index;
}

std::string KernelEmitter::kernelAddress(int buffer) const {
  const KernelBuffer &b = plan_.buffers.at(static_cast<size_t>(buffer));
  switch (b.kind) {
  case KernelBuffer::Kind::Operand: return fmt::format("buffers[{}]", b.index);
  case KernelBuffer::Kind::Result: return fmt::format("buffers[{}]", numOperandBuffers_ + b.index);
  case KernelBuffer::Kind::Temp: return fmt::format("ctx.temps[{}]", b.index);
  case KernelBuffer::Kind::Constant: return fmt::format("(const void *){}_c{}", prefix_, b.index);
  }
  return "";
}

std::string KernelEmitter::pointer(int buffer) {
  auto it = pointers_.find(buffer);
  if (it != pointers_.end())
    return it->second;
  const KernelBuffer &b = plan_.buffers.at(static_cast<size_t>(buffer));
  std::string name = b.kind == KernelBuffer::Kind::Constant ? fmt::format("{}_c{}", prefix_, b.index)
                                                             : fmt::format("b{}", buffer);
  std::string type = storageType(b.type.dtype);
  const char *qualifier = restrict_ ? " *__restrict " : " *";
  switch (b.kind) {
  case KernelBuffer::Kind::Operand:
    lineAt(0, fmt::format("const {0}{1}{2} = (const {0} *)c->buffers[{3}];", type, qualifier, name, b.index));
    break;
  case KernelBuffer::Kind::Result:
    lineAt(0, fmt::format("{0}{1}{2} = ({0} *)c->buffers[{3}];", type, qualifier, name, numOperandBuffers_ + b.index));
    break;
  case KernelBuffer::Kind::Temp:
    lineAt(0, fmt::format("{0}{1}{2} = ({0} *)c->temps[{3}];", type, qualifier, name, b.index));
    break;
  case KernelBuffer::Kind::Constant: break; // a file-scope array
  }
  pointers_[buffer] = name;
  return name;
}

bool KernelEmitter::available(int buffer) const {
  return plan_.buffers.at(static_cast<size_t>(buffer)).producedByStage < stage_;
}

int KernelEmitter::levelOf(const std::vector<Index> &coords) const {
  int level = 0;
  for (const Index &index : coords)
    level = std::max(level, arena_.level(index));
  return level;
}

std::string KernelEmitter::cacheKey(const ir::Value *value, const std::vector<Index> &coords) const {
  std::string key = fmt::format("{}", static_cast<const void *>(value));
  for (const Index &index : coords)
    key += "|" + arena_.code(index);
  return key;
}

void KernelEmitter::setOverride(const ir::Value *value, std::vector<Index> coords, Scalar scalar) {
  overrides_[value] = Override{std::move(coords), std::move(scalar)};
}

Scalar KernelEmitter::declare(DType dtype, const std::string &expr, int level) {
  return declareExact(dtype, roundExpression(dtype, expr), level);
}

Scalar KernelEmitter::declareExact(DType dtype, const std::string &expr, int level) {
  std::string name = fresh("v");
  lineAt(level, fmt::format("const {} {} = {};", cType(dtype), name, expr));
  return {name, level};
}

Scalar KernelEmitter::value(const ir::Value *value, const std::vector<Index> &coords) {
  auto over = overrides_.find(value);
  if (over != overrides_.end()) {
    if (over->second.coords != coords)
      throw StrategyMismatch("a per-row or per-tile value is read at other coordinates");
    return over->second.scalar;
  }
  std::string key = cacheKey(value, coords);
  for (size_t s = scopes_.size(); s-- > 0;) {
    auto hit = scopes_[s].cache.find(key);
    if (hit != scopes_[s].cache.end())
      return hit->second;
  }
  Scalar result = compute(value, coords);
  scopes_[static_cast<size_t>(result.level)].cache[key] = result;
  return result;
}

void KernelEmitter::noteInnerAccess(const Index &address) {
  if (watched_.empty())
    return;
  for (const auto &[id, coefficient] : address.terms) {
    const IndexArena::Atom &atom = arena_.atom(id);
    if (atom.kind != IndexArena::AtomKind::Var && atom.level >= watchedLevel_) {
      ++irregularInnerAccesses_;
      return;
    }
  }
}

void KernelEmitter::store(const Store &store, const std::vector<Index> &coords, const Scalar &scalar) {
  Index address = flatIndex(arena_, coords, store.value->shape());
  noteInnerAccess(address);
  DType dtype = plan_.buffers.at(static_cast<size_t>(store.buffer)).type.dtype;
  line(fmt::format("{}[{}] = {};", pointer(store.buffer), arena_.code(address), narrowExpression(dtype, scalar.code)));
}

Scalar KernelEmitter::load(int buffer, const std::vector<Index> &coords) {
  const KernelBuffer &b = plan_.buffers.at(static_cast<size_t>(buffer));
  if (b.kind == KernelBuffer::Kind::Constant && b.constant.numElements() == 1)
    return {elementLiteral(b.constant, 0), 0};
  if (b.type.numElements() == 0) // unreachable in a loop that runs; keeps the code load-free
    return {literal(b.type.dtype, 0), 0};
  Index address = flatIndex(arena_, coords, b.type.shape);
  if (!watched_.empty()) {
    int64_t step = arena_.coefficientOf(address, watched_);
    if (step != 0 && step != 1 && step != -1)
      ++stridedInnerLoads_;
    noteInnerAccess(address);
  }
  std::string element = fmt::format("{}[{}]", pointer(buffer), arena_.code(address));
  // Constants are file-scope arrays of cType (EmitKernel.cpp); other buffers hold storageType.
  if (b.kind != KernelBuffer::Kind::Constant)
    element = widenExpression(b.type.dtype, element);
  return declareExact(b.type.dtype, element, arena_.level(address));
}

void KernelEmitter::watchInnerLoop(const std::string &name) {
  watched_ = name;
  watchedLevel_ = depth();
  stridedInnerLoads_ = irregularInnerAccesses_ = 0;
}

Scalar KernelEmitter::compute(const ir::Value *value, const std::vector<Index> &coords) {
  auto it = plan_.bufferOf.find(value);
  if (it != plan_.bufferOf.end() && available(it->second))
    return load(it->second, coords);
  const ir::Node *node = value->producer();
  if (!node)
    fail("codegen: internal error: a body input has no buffer");
  size_t output = static_cast<size_t>(value->outputIndex());
  switch (node->op()) {
  case OpKind::Reshape:
  case OpKind::Permute:
  case OpKind::Broadcast:
  case OpKind::Slice:
  case OpKind::Split: return this->value(node->input(0), *operandCoords(arena_, *node, 0, output, coords));
  case OpKind::Pad: return pad(*node, coords);
  case OpKind::Concat: return concat(*node, coords);
  case OpKind::Gather: return gather(*node, coords);
  case OpKind::GatherElements: return gatherElementsLoad(*this, *node, coords);
  case OpKind::GatherNd: return gatherNdLoad(*this, *node, coords);
  case OpKind::Iota: {
    int64_t axis = node->attrInt("axis");
    if (axis < 0)
      axis += value->rank();
    const Index &coordinate = coords.at(static_cast<size_t>(axis));
    return declare(value->dtype(), fmt::format("({})({})", cType(value->dtype()), arena_.code(coordinate)),
                   arena_.level(coordinate));
  }
  case OpKind::RandomUniform: {
    // A pure function of (seed, offset, linear index): the key is computed where the offset
    // is (hoisted out of the loops), one mix per element (ir/ops/Random.cpp).
    Scalar offset{"", 0};
    if (node->numInputs() == 1)
      offset = this->value(node->input(0), {});
    std::string key = fresh("rk");
    lineAt(offset.level, fmt::format("const uint64_t {} = {};", key, randomKeyExpression(*node, offset.code)));
    Index flat = flatIndex(arena_, coords, value->shape());
    return declareExact(value->dtype(), randomUnitExpression(value->dtype(), key, arena_.code(flat)),
                        std::max(offset.level, arena_.level(flat)));
  }
  default: break;
  }
  if (loweringOf(node->op()) != Lowering::Scalar)
    throw StrategyMismatch(fmt::format("{} cannot be computed inline", node->opName()));
  std::vector<std::string> operands;
  int level = 0;
  for (size_t i = 0; i < node->numInputs(); ++i) {
    Scalar operand = this->value(node->input(i), *operandCoords(arena_, *node, i, output, coords));
    operands.push_back(operand.code);
    level = std::max(level, operand.level);
  }
  return declareExact(value->dtype(), scalarExpression(*node, operands), level);
}

// Constant pads select the fill outside the input; every mode loads at a clamped (or
// reflected) coordinate, so the load is always in bounds and the loop stays branch-free.
Scalar KernelEmitter::pad(const ir::Node &node, const std::vector<Index> &coords) {
  const ir::Value *input = node.input(0);
  const Shape &shape = input->shape();
  const auto &pads = node.attrInts("pads");
  const std::string &mode = node.attrString("mode");
  DType dtype = node.output()->dtype();
  Scalar fill{literal(dtype, node.attrFloat("value")), 0};
  std::vector<Index> source(shape.size());
  std::vector<std::string> conditions;
  int conditionLevel = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    Index s = arena_.addConstant(coords[d], -pads[d]);
    Range r = arena_.range(s);
    if (r.lo >= 0 && r.hi < shape[d]) {
      source[d] = s;
      continue;
    }
    if (shape[d] == 0)
      return fill; // only reachable for constant pads: the other modes reject empty axes
    std::string code = arena_.code(s);
    int level = arena_.level(s);
    if (mode == "constant") {
      conditions.push_back(fmt::format("({0} >= 0 && {0} < {1})", code, shape[d]));
      conditionLevel = std::max(conditionLevel, level);
    }
    const char *helper = mode == "reflect" ? "kiln_reflect_index" : "kiln_clamp_index";
    std::string name = fresh("p");
    lineAt(level, fmt::format("const int64_t {} = {}({}, {});", name, helper, code, shape[d]));
    source[d] = arena_.opaque(name, {0, shape[d] - 1}, level);
  }
  Scalar loaded = value(input, source);
  if (conditions.empty())
    return loaded;
  std::string condition = conditions[0];
  for (size_t i = 1; i < conditions.size(); ++i)
    condition += " && " + conditions[i];
  return declareExact(dtype, fmt::format("({} ? {} : {})", condition, loaded.code, fill.code),
                      std::max(conditionLevel, loaded.level));
}

// Each operand whose range along the axis the coordinate can reach is loaded at a clamped
// coordinate; a chain of selects picks the right one.
Scalar KernelEmitter::concat(const ir::Node &node, const std::vector<Index> &coords) {
  size_t axis = static_cast<size_t>(node.attrInt("axis") < 0 ? node.attrInt("axis") + node.output()->rank()
                                                             : node.attrInt("axis"));
  const Index &c = coords[axis];
  Range r = arena_.range(c);
  std::vector<std::pair<int64_t, Scalar>> pieces; // (end along the axis, value)
  int64_t offset = 0;
  int level = arena_.level(c);
  for (const ir::Value *input : node.inputs()) {
    int64_t size = input->shape()[axis];
    int64_t begin = offset, end = offset + size;
    offset = end;
    if (size == 0 || r.hi < begin || r.lo >= end)
      continue;
    std::vector<Index> source = coords;
    Index local = arena_.addConstant(c, -begin);
    if (r.lo >= begin && r.hi < end) { // the coordinate never leaves this operand
      source[axis] = local;
      return value(input, source);
    }
    std::string name = fresh("p");
    lineAt(arena_.level(local),
           fmt::format("const int64_t {} = kiln_clamp_index({}, {});", name, arena_.code(local), size));
    source[axis] = arena_.opaque(name, {0, size - 1}, arena_.level(local));
    Scalar piece = value(input, source);
    level = std::max(level, piece.level);
    pieces.emplace_back(end, piece);
  }
  if (pieces.empty())
    fail("codegen: internal error: concat coordinate outside every operand");
  std::string expr = pieces.back().second.code;
  for (size_t i = pieces.size() - 1; i-- > 0;)
    expr = fmt::format("({} < {} ? {} : {})", arena_.code(c), pieces[i].first, pieces[i].second.code, expr);
  return declareExact(node.output()->dtype(), expr, level);
}

// ONNX Gather: output coords = data coords before the axis, the index tensor's coords, then
// the data coords after it. Negative indices count from the end; out-of-range ones are
// clamped (generated code cannot report them; the reference evaluator does).
Scalar KernelEmitter::gather(const ir::Node &node, const std::vector<Index> &coords) {
  const ir::Value *data = node.input(0), *indices = node.input(1);
  int64_t rank = data->rank();
  size_t axis = static_cast<size_t>(node.attrInt("axis") < 0 ? node.attrInt("axis") + rank : node.attrInt("axis"));
  size_t q = indices->shape().size();
  int64_t dim = data->shape()[axis];
  if (dim == 0)
    return {literal(node.output()->dtype(), 0), 0};
  std::vector<Index> indexCoords(coords.begin() + static_cast<std::ptrdiff_t>(axis),
                                 coords.begin() + static_cast<std::ptrdiff_t>(axis + q));
  Scalar index = value(indices, indexCoords);
  std::string name = fresh("g");
  lineAt(index.level, fmt::format("const int64_t {} = kiln_gather_index((int64_t){}, {});", name, index.code, dim));
  std::vector<Index> source(coords.begin(), coords.begin() + static_cast<std::ptrdiff_t>(axis));
  source.push_back(arena_.opaque(name, {0, dim - 1}, index.level));
  source.insert(source.end(), coords.begin() + static_cast<std::ptrdiff_t>(axis + q), coords.end());
  return value(data, source);
}

} // namespace kiln::codegen
