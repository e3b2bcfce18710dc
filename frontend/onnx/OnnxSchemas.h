#pragma once
// The operator schemas kiln checks ONNX models against: ONNX's own registry, plus the
// opset-18 revisions of the ops kiln maps (Reduce* with an `axes` input, Split with
// `num_outputs`, Pad with an `axes` input, the new Mish, Resize with `axes`) when the
// installed ONNX library predates opset 18 (Debian 12 ships ONNX 1.12, whose newest opset is
// 17). With a newer library the shim steps aside and ONNX's own schemas are used.
#include <onnx/defs/schema.h>

namespace kiln::frontend {

/// The registry to hand to onnx::checker and shape inference.
const onnx::ISchemaRegistry &onnxSchemaRegistry();

/// The newest default-domain opset the installed ONNX library knows.
int onnxLibraryMaxOpset();

} // namespace kiln::frontend
