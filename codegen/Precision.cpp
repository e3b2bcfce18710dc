#include "codegen/Precision.h"

#include "core/Error.h"

namespace kiln::codegen {

ContractionPrecision parseContractionPrecision(const std::string &text) {
  if (text == "f32")
    return ContractionPrecision::F32;
  if (text == "bf16")
    return ContractionPrecision::Bf16;
  fail("unknown precision '{}' (expected f32 or bf16)", text);
}

const char *contractionPrecisionName(ContractionPrecision precision) {
  return precision == ContractionPrecision::Bf16 ? "bf16" : "f32";
}

} // namespace kiln::codegen
