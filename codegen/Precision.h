#pragma once
// What a compiled model's contractions multiply in (kiln_precision in runtime/KernelAbi.h).
#include <string>

namespace kiln::codegen {

/// f32, or bf16 operands with f32 sums: the user asks for bf16 (kiln-run --precision bf16,
/// CompileOptions::precision) and never gets it silently.
enum class ContractionPrecision { F32, Bf16 };

/// "f32" or "bf16"; kiln::Error naming `text` and the choices otherwise.
ContractionPrecision parseContractionPrecision(const std::string &text);
const char *contractionPrecisionName(ContractionPrecision precision);

} // namespace kiln::codegen
