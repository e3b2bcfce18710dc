"""Shared fixtures of the kiln package's tests (tests/python, run by CTest with label python).

CTest puts the build tree's package on PYTHONPATH and sets KILN_CACHE_DIR (the compile cache),
KILN_RUN (the kiln-run binary) and KILN_SEEDS (the exported seed workloads) for these tests.
The small models are written here as .kir text or built as ONNX bytes with Debian's onnx, so
that the suite needs nothing exported and runs in seconds once the compile cache is warm.
"""
import numpy as np
import pytest

import kiln

# One elementwise kernel: what the overhead benchmark and the threading test run.
ADD_KIR = """graph @add(%x: f32[4,8], %y: f32[4,8]) -> (f32[4,8]) {
  %z = add(%x, %y) : f32[4,8]
  return %z
}
"""

# A contraction (whose kernels split the reduction across threads) and a second output.
MATMUL_KIR = """graph @mm(%x: f32[64,96], %w: f32[96,48]) -> (f32[64,48], f32[64,96]) {
  %p = matmul(%x, %w) : f32[64,48]
  %r = relu(%p) : f32[64,48]
  %n = neg(%x) : f32[64,96]
  return %r, %n
}
"""

# Integer and boolean inputs and outputs.
MIXED_KIR = """graph @mixed(%a: i64[5], %b: i64[5], %m: bool[5]) -> (i64[5], bool[5]) {
  %s = add(%a, %b) : i64[5]
  %o = not(%m) : bool[5]
  return %s, %o
}
"""


def write(tmp_path_factory, name, text):
    path = tmp_path_factory.mktemp("models") / name
    path.write_text(text)
    return path


@pytest.fixture(scope="session")
def add_path(tmp_path_factory):
    return write(tmp_path_factory, "add.kir", ADD_KIR)


@pytest.fixture(scope="session")
def add_session(add_path):
    return kiln.Session(add_path, threads=2)


@pytest.fixture(scope="session")
def matmul_session(tmp_path_factory):
    return kiln.Session(write(tmp_path_factory, "mm.kir", MATMUL_KIR), threads=2)


@pytest.fixture(scope="session")
def mixed_session(tmp_path_factory):
    return kiln.Session(write(tmp_path_factory, "mixed.kir", MIXED_KIR))


def relu_onnx_bytes(shape=(2, 3)):
    """An ONNX model y = relu(x), serialized."""
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()


def random_inputs(session, seed=0):
    rng = np.random.default_rng(seed)
    return {info.name: rng.standard_normal(info.shape).astype(info.dtype) for info in session.inputs}
