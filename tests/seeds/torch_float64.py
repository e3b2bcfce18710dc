"""Runs an exported seed ONNX graph with PyTorch's operators in float64: the seed checks' ground truth.

usage: /usr/bin/python3 torch_float64.py [--float32] MODEL.onnx INPUT.npy OUT.npy [FP32_OUTPUT.npy]

Why: PyTorch's own fp32 output (NAME.output.npy from the exporter) is not exact enough to check
kiln against at rtol 1e-4, atol 1e-5: on AMD Zen 4, ResNet-50's is up to 1.0e-4 off the exact
value (max |y| 83.5), beyond that tolerance at small logits. So this evaluates the same
exported graph node by node with torch ops in float64 (floating initializers, constants and the
input cast to float64; int64 tensors such as shapes stay int64), leaving only float64 rounding.

OUT.npy gets the graph's single output as float64, or with --float32 rounded to float32 (kiln-run's
--check wants the output's own dtype; the rounding is ~6e-8 relative, negligible against rtol 1e-4).
It is written whole (renamed into place). Given FP32_OUTPUT.npy (PyTorch's fp32 output), one
line says how far that is from the float64 result (informational only).

Only the op types and attributes the seed workloads use are implemented (ONNX opset 13 semantics);
any other op type, an attribute an implementation does not read, or an unsupported attribute
value stops with one line naming the node and exit status 1.
"""
import math
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn.functional as F


class Unsupported(Exception):
    pass


class Attrs:
    """A node's attributes; records which ones an op reads, so that one it ignores is an error."""

    def __init__(self, node):
        self.values = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        self.read = set()

    def get(self, name, default=None):
        self.read.add(name)
        return self.values.get(name, default)

    def unread(self):
        return sorted(set(self.values) - self.read)


def to_torch(array):
    """numpy -> torch; floating types become float64, integer and bool types stay as they are."""
    # Copies either way: numpy_helper's arrays may be read-only views of the protobuf's bytes.
    if np.issubdtype(array.dtype, np.floating):
        return torch.from_numpy(array.astype(np.float64))
    return torch.from_numpy(np.array(array))


def ints(values):
    return [int(v) for v in values]


def pads_for_f_pad(pads):
    """ONNX pads (x1_begin, x2_begin, ..., x1_end, x2_end) -> F.pad's (last dim first) order."""
    n = len(pads) // 2
    out = []
    for axis in reversed(range(n)):
        out += [pads[axis], pads[axis + n]]
    return out


def spatial(attrs, x, name, default):
    """A per-spatial-axis attribute (strides, dilations) with its ONNX default."""
    return ints(attrs.get(name, [default] * (x.dim() - 2)))


def no_auto_pad(attrs):
    if attrs.get('auto_pad', b'NOTSET') not in (b'NOTSET', 'NOTSET'):
        raise Unsupported('auto_pad other than NOTSET is not implemented')


def elementwise(fn):
    return lambda inputs, attrs: fn(*inputs)


def div(a, b):
    # ONNX's integer Div truncates (as C does); torch's / would give a float.
    if a.is_floating_point() or b.is_floating_point():
        return a / b
    return torch.div(a, b, rounding_mode='trunc')


def constant(inputs, attrs):
    value = attrs.get('value')
    if value is None:
        raise Unsupported('only the "value" attribute is implemented')
    return to_torch(onnx.numpy_helper.to_array(value))


def gather(inputs, attrs):
    data, indices = inputs
    axis = attrs.get('axis', 0) % data.dim()
    indices = torch.where(indices < 0, indices + data.shape[axis], indices)  # negative: from the end
    picked = data.index_select(axis, indices.reshape(-1))
    return picked.reshape(data.shape[:axis] + indices.shape + data.shape[axis + 1:])


def gemm(inputs, attrs):
    a, b = inputs[0], inputs[1]
    if attrs.get('transA', 0):
        a = a.t()
    if attrs.get('transB', 0):
        b = b.t()
    y = attrs.get('alpha', 1.0) * (a @ b)
    if len(inputs) > 2 and inputs[2] is not None:
        y = y + attrs.get('beta', 1.0) * inputs[2]  # C broadcasts to (M, N)
    return y


def reduce_mean(inputs, attrs):
    x = inputs[0]
    axes = attrs.get('axes')  # opset 13: an attribute; absent means every axis
    axes = list(range(x.dim())) if axes is None else ints(axes)
    return x.mean(dim=axes, keepdim=bool(attrs.get('keepdims', 1)))


def reshape(inputs, attrs):
    x, shape = inputs
    shape = ints(shape.tolist())
    # 0 copies the input's dimension (opset 13 has no allowzero); torch infers -1 itself.
    shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def slice_(inputs, attrs):
    x = inputs[0]
    starts, ends = ints(inputs[1].tolist()), ints(inputs[2].tolist())
    axes = ints(inputs[3].tolist()) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
    steps = ints(inputs[4].tolist()) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if step == 0:
            raise Unsupported('step 0')
        dim = x.shape[axis]
        # Negative positions count from the end; then clamp (ends may be INT64_MAX / INT64_MIN):
        # to [0, dim] going forward, to [-1, dim - 1] going backward (-1: through element 0).
        start = start + dim if start < 0 else start
        end = end + dim if end < 0 else end
        if step > 0:
            start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        else:
            start, end = min(max(start, -1), dim - 1), min(max(end, -1), dim - 1)
        count = max(0, math.ceil((end - start) / step))
        # index_select rather than Python slicing: torch tensors cannot be sliced with step < 0.
        x = x.index_select(axis % x.dim(), start + step * torch.arange(count))
    return x


def transpose(inputs, attrs):
    x = inputs[0]
    perm = attrs.get('perm')
    return x.permute(ints(perm) if perm is not None else list(reversed(range(x.dim()))))


CONV = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}
MAX_POOL = {3: F.max_pool1d, 4: F.max_pool2d, 5: F.max_pool3d}
AVG_POOL = {3: F.avg_pool1d, 4: F.avg_pool2d, 5: F.avg_pool3d}


def conv(inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    no_auto_pad(attrs)
    kernel = attrs.get('kernel_shape')
    if kernel is not None and ints(kernel) != list(w.shape[2:]):
        raise Unsupported(f'kernel_shape {ints(kernel)} differs from the weight\'s {list(w.shape[2:])}')
    pads = ints(attrs.get('pads', [0] * 2 * (x.dim() - 2)))
    # ONNX allows begin != end padding; torch's conv pads both sides alike, so pad explicitly.
    x = F.pad(x, pads_for_f_pad(pads))
    return CONV[x.dim()](x, w, bias, stride=spatial(attrs, x, 'strides', 1),
                         dilation=spatial(attrs, x, 'dilations', 1), groups=attrs.get('group', 1))


def drop_windows_in_end_pads(y, x, kernel, pads, strides, dilations, ceil_mode):
    """The pools pad explicitly, so torch takes the end pads for input and, with ceil_mode, keeps
    a last window that starts in them. ONNX drops such a window, as torch does with its own
    padding and as kiln does (onnx/onnx#5711, fixed in shape inference after onnx 1.12)."""
    if not ceil_mode:
        return y
    n = len(kernel)
    for axis in range(n):
        size, begin, end = x.shape[axis + 2], pads[axis], pads[axis + n]
        out = math.ceil((size + begin + end - dilations[axis] * (kernel[axis] - 1) - 1) / strides[axis]) + 1
        if (out - 1) * strides[axis] >= size + begin:
            out -= 1
        y = y.narrow(axis + 2, 0, out)
    return y


def max_pool(inputs, attrs):
    x = inputs[0]
    no_auto_pad(attrs)
    if attrs.get('storage_order', 0) != 0:
        raise Unsupported('storage_order 1 (for the Indices output) is not implemented')
    kernel, pads = ints(attrs.get('kernel_shape', [])), ints(attrs.get('pads', [0] * 2 * (x.dim() - 2)))
    strides, dilations = spatial(attrs, x, 'strides', 1), spatial(attrs, x, 'dilations', 1)
    ceil_mode = bool(attrs.get('ceil_mode', 0))
    # Explicit -inf padding: ONNX's pads may be asymmetric or wider than torch allows (kernel / 2).
    y = MAX_POOL[x.dim()](F.pad(x, pads_for_f_pad(pads), value=-math.inf), kernel, stride=strides,
                          dilation=dilations, ceil_mode=ceil_mode)
    return drop_windows_in_end_pads(y, x, kernel, pads, strides, dilations, ceil_mode)


def average_pool(inputs, attrs):
    x = inputs[0]
    no_auto_pad(attrs)
    kernel, strides = ints(attrs.get('kernel_shape', [])), spatial(attrs, x, 'strides', 1)
    pads = ints(attrs.get('pads', [0] * 2 * (x.dim() - 2)))
    ceil_mode = bool(attrs.get('ceil_mode', 0))
    pool = lambda t: drop_windows_in_end_pads(
        AVG_POOL[t.dim()](F.pad(t, pads_for_f_pad(pads)), kernel, stride=strides, ceil_mode=ceil_mode),
        x, kernel, pads, strides, [1] * len(kernel), ceil_mode)
    # Padding explicitly with zeros makes torch divide by the window including the pads (but not
    # a ceil_mode overhang past them), ONNX's count_include_pad=1. For 0 (ONNX's default), divide
    # by the share of the window that is real input: the same pooling of a ones mask.
    if attrs.get('count_include_pad', 0):
        return pool(x)
    return pool(x) / pool(torch.ones_like(x[:1, :1]))


def flatten(inputs, attrs):
    x = inputs[0]
    axis = attrs.get('axis', 1)
    axis = axis + x.dim() if axis < 0 else axis  # -r..r; r is allowed and gives (N, 1)
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))


# op type -> fn(inputs, attrs) returning the node's one output. Inputs are torch tensors (None
# for an omitted optional input); elementwise ops broadcast as numpy does, as ONNX's do.
OPS = {
    'Add': elementwise(torch.add),
    'Sub': elementwise(torch.sub),
    'Mul': elementwise(torch.mul),
    'Div': elementwise(div),
    'Pow': elementwise(torch.pow),  # a float64 base keeps float64 whatever the exponent's type
    'Sqrt': elementwise(torch.sqrt),
    'Erf': elementwise(torch.erf),
    'Relu': elementwise(torch.relu),
    'Identity': elementwise(lambda x: x),
    'MatMul': elementwise(torch.matmul),  # numpy matmul semantics, batch dims broadcast
    'Constant': constant,
    'Shape': lambda inputs, attrs: torch.tensor(list(inputs[0].shape), dtype=torch.int64),
    'Gather': gather,
    'Gemm': gemm,
    'ReduceMean': reduce_mean,
    'Reshape': reshape,
    'Slice': slice_,
    # opset 13's Softmax normalizes along the one axis (opset 11's flattened from axis on).
    'Softmax': lambda inputs, attrs: torch.softmax(inputs[0], dim=attrs.get('axis', -1)),
    'Transpose': transpose,
    'Conv': conv,
    'Flatten': flatten,
    'MaxPool': max_pool,
    'AveragePool': average_pool,
    'GlobalAveragePool': lambda inputs, attrs: inputs[0].mean(dim=tuple(range(2, inputs[0].dim())),
                                                              keepdim=True),
}


def describe(node, index):
    return f'{node.op_type} node {index} ({node.name or "unnamed"})'


def evaluate(model, x):
    graph = model.graph
    for opset in model.opset_import:
        if opset.domain in ('', 'ai.onnx') and opset.version != 13:
            # Most of these ops are the same in nearby opsets, but ReduceMean's axes, Softmax's
            # axis and Reshape's allowzero moved or changed: check them before allowing others.
            raise Unsupported(f'the model is opset {opset.version}; only opset 13 is implemented')
    values = {init.name: to_torch(onnx.numpy_helper.to_array(init)) for init in graph.initializer}
    inputs = [i.name for i in graph.input if i.name not in values]
    if len(inputs) != 1 or len(graph.output) != 1:
        raise Unsupported(f'the graph has {len(inputs)} inputs and {len(graph.output)} outputs; '
                          'one of each is implemented')
    values[inputs[0]] = to_torch(x)
    values[''] = None  # an omitted optional input
    # Free each value after its last reader, so the large models' float64 activations do not pile up.
    last_use = {}
    for index, node in enumerate(graph.node):
        for name in node.input:
            last_use[name] = index
    for index, node in enumerate(graph.node):
        if node.domain not in ('', 'ai.onnx') or node.op_type not in OPS:
            raise Unsupported(f'{describe(node, index)}: op type not implemented (domain "{node.domain}")')
        if len(node.output) != 1:
            raise Unsupported(f'{describe(node, index)}: {len(node.output)} outputs; only one is implemented')
        attrs = Attrs(node)
        try:
            result = OPS[node.op_type]([values[name] for name in node.input], attrs)
        except Unsupported as e:
            raise Unsupported(f'{describe(node, index)}: {e}')
        if attrs.unread():
            raise Unsupported(f'{describe(node, index)}: attribute(s) {", ".join(attrs.unread())} '
                              'not implemented')
        values[node.output[0]] = result
        for name in node.input:
            if last_use.get(name) == index and name != graph.output[0].name and name != '':
                del values[name]
    return values[graph.output[0].name]


def main(argv):
    float32 = '--float32' in argv
    args = [a for a in argv if a != '--float32']
    if len(args) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2])
    model_path, input_path, out_path = args[:3]
    with torch.no_grad():
        try:
            y = evaluate(onnx.load(model_path), np.load(input_path)).numpy()
        except Unsupported as e:
            sys.exit(f'torch_float64.py: {model_path}: {e}')
    # Save under a temporary name ending in .npy (np.save would append one) and rename into place.
    tmp = f'{out_path}.tmp{os.getpid()}.npy'
    np.save(tmp, y.astype(np.float32) if float32 else y)
    os.replace(tmp, out_path)
    if len(args) == 4:
        fp32 = np.load(args[3]).astype(np.float64)
        if fp32.shape != y.shape:
            sys.exit(f'torch_float64.py: {args[3]} has shape {fp32.shape}, the float64 result {y.shape}')
        error = np.abs(fp32 - y)
        worst = np.unravel_index(np.argmax(error), error.shape)
        print(f'PyTorch fp32 vs float64: max abs error {error.max():.3g} at {list(map(int, worst))} '
              f'(fp32 {fp32[worst]:.7g}, float64 {y[worst]:.7g}; max |y| {np.abs(y).max():.3g})')


if __name__ == '__main__':
    main(sys.argv[1:])
