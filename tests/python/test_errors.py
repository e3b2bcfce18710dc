"""What a user can pass wrongly raises the exception a Python user expects, with a message
that names the tensor, what it expects and what it got; none of it crashes the interpreter.
kiln's own errors (a model that does not load) are kiln.Error, a RuntimeError."""
import numpy as np
import pytest

import kiln
from conftest import relu_onnx_bytes

X = np.ones((4, 8), np.float32)


def test_kiln_error_is_a_runtime_error():
    assert issubclass(kiln.Error, RuntimeError)
    assert kiln.Error.__module__ == "kiln"


@pytest.mark.parametrize("feed, kind, words", [
    (X.astype(np.float64), TypeError, ["'x'", "float32", "float64", "copy=True"]),
    (X.astype(">f4"), TypeError, ["'x'", "float32", ">f4"]),
    (X.tolist(), TypeError, ["'x'", "numpy.ndarray", "list"]),
    (np.float32(1.0), TypeError, ["'x'", "float32"]),
    (np.ones((8, 4), np.float32), ValueError, ["'x'", "(4, 8)", "(8, 4)"]),
    (np.ones((4, 8, 1), np.float32), ValueError, ["'x'", "(4, 8)", "(4, 8, 1)"]),
    (np.ones((8, 4), np.float32).T, ValueError, ["'x'", "C-contiguous", "copy=True"]),
    (np.ones((4, 16), np.float32)[:, ::2], ValueError, ["'x'", "C-contiguous"]),
    (np.frombuffer(bytearray(4 * 32 + 1), np.float32, 32, offset=1).reshape(4, 8), ValueError, ["'x'", "aligned"]),
])
def test_inputs_that_cannot_be_read_in_place(add_session, feed, kind, words):
    with pytest.raises(kind) as raised:
        add_session.run({"x": feed, "y": X})
    for word in words:
        assert word in str(raised.value)


def test_input_names_must_match(add_session):
    with pytest.raises(ValueError, match="unknown input 'w'; the model's inputs are 'x', 'y'"):
        add_session.run({"x": X, "y": X, "w": X})
    with pytest.raises(ValueError, match=r"missing input 'y' \(f32\[4,8\]\)"):
        add_session.run({"x": X})
    with pytest.raises(TypeError, match="input names are str"):
        add_session.run({"x": X, "y": X, 3: X})
    with pytest.raises(TypeError):
        add_session.run([X, X])


def test_copy_does_not_broadcast(add_session):
    with pytest.raises(ValueError, match="'x' expects shape"):
        add_session.run({"x": np.ones(8), "y": X}, copy=True)
    with pytest.raises(ValueError):  # numpy's own error for a ragged list
        add_session.run({"x": [[1.0], [1.0, 2.0]], "y": X}, copy=True)


def test_output_arrays_are_checked(add_session):
    feeds = {"x": X, "y": X}
    read_only = np.empty((4, 8), np.float32)
    read_only.flags.writeable = False
    cases = [
        ({"z": read_only}, ValueError, "output 'z' is read-only"),
        ({"z": np.empty((4, 8), np.float64)}, TypeError, "output 'z' expects dtype float32, got float64"),
        ({"z": np.empty((8, 4), np.float32)}, ValueError, r"output 'z' expects shape \(4, 8\), got \(8, 4\)"),
        ({"z": np.empty((8, 4), np.float32).T}, ValueError, "output 'z' is not C-contiguous"),
        ({"z": [0.0] * 32}, TypeError, "output 'z' must be a numpy.ndarray"),
        ({}, ValueError, "missing output 'z'"),
        ({"z": np.empty((4, 8), np.float32), "q": np.empty(1)}, ValueError, "unknown output 'q'"),
    ]
    for outputs, kind, pattern in cases:
        with pytest.raises(kind, match=pattern):
            add_session.run_into(feeds, outputs)


def test_outputs_may_not_overlap_inputs_or_each_other(add_session, matmul_session):
    x = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match="output 'z' shares memory with input 'x'"):
        add_session.run_into({"x": x, "y": X}, {"z": x})
    both = np.zeros(64 * 48 + 64 * 96, np.float32)
    feeds = {"x": np.ones((64, 96), np.float32), "w": np.ones((96, 48), np.float32)}
    with pytest.raises(ValueError, match="outputs 'r' and 'n' share memory"):
        matmul_session.run_into(feeds, {"r": both[:64 * 48].reshape(64, 48), "n": both[100:100 + 64 * 96].reshape(64, 96)})
    # Adjacent is not overlapping.
    matmul_session.run_into(feeds, {"r": both[:64 * 48].reshape(64, 48), "n": both[64 * 48:].reshape(64, 96)})


def test_models_that_do_not_load(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file: '.*missing.onnx'"):
        kiln.Session(tmp_path / "missing.onnx")
    with pytest.raises(FileNotFoundError):
        kiln.load(tmp_path / "missing.so")
    with pytest.raises(kiln.Error, match="not a valid ONNX model"):
        kiln.Session(b"\x08\x07garbage that is no protobuf")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(kiln.Error, match="garbage.onnx"):
        kiln.Session(garbage)
    not_elf = tmp_path / "fake.so"
    not_elf.write_bytes(b"not a shared object")
    with pytest.raises(kiln.Error, match="fake.so"):
        kiln.load(not_elf)
    truncated = relu_onnx_bytes()[:-7]
    with pytest.raises(kiln.Error):
        kiln.Session(truncated)
    # A .kir that does not parse names the file and line.
    bad = tmp_path / "bad.kir"
    bad.write_text("graph @g(%x: f32[2]) -> (f32[2]) {\n  %y = nosuchop(%x) : f32[2]\n  return %y\n}\n")
    with pytest.raises(kiln.Error, match="bad.kir"):
        kiln.Session(bad)


def test_kiln_errors_are_one_line():
    with pytest.raises(kiln.Error) as raised:
        kiln.Session(b"\x08\x07garbage")
    assert "\n" not in str(raised.value)


def test_arguments_of_the_wrong_kind():
    with pytest.raises(TypeError, match="model path .* the bytes of an ONNX model or a kiln.Graph, got int"):
        kiln.Session(42)
    with pytest.raises(ValueError, match="threads must be a positive count"):
        kiln.Session(relu_onnx_bytes(), threads=0)
    with pytest.raises(TypeError):
        kiln.Session(relu_onnx_bytes(), threads="two")
    with pytest.raises(TypeError, match="input_shapes must be a dict"):
        kiln.Session(relu_onnx_bytes(), input_shapes=[(2, 3)])
    with pytest.raises(kiln.Error):  # the importer: no such input
        kiln.Session(relu_onnx_bytes(), input_shapes={"nope": (2, 3)})
    with pytest.raises(TypeError):
        kiln.load(b"bytes are no path")


def test_objects_made_without_init_raise_instead_of_crashing():
    # pybind11 leaves an object made by __new__ alone uninitialised; every binding reaches its
    # object through the holder, which pybind11 checks.
    session = kiln.Session.__new__(kiln.Session)
    for use in (lambda: session.run({}), lambda: session.run_into({}, {}), lambda: session.inputs,
                lambda: session.outputs, lambda: session.threads, lambda: session.arena_bytes, lambda: repr(session),
                lambda: session.save("never.so"), lambda: session.profile("never.json")):
        with pytest.raises(RuntimeError):
            use()
    info = kiln.TensorInfo.__new__(kiln.TensorInfo)
    for use in (lambda: info.name, lambda: info.shape, lambda: info.dtype, lambda: repr(info)):
        with pytest.raises(RuntimeError):
            use()
    scope_type = type(kiln.Session(relu_onnx_bytes()).profile("never.json"))  # never entered: writes nothing
    scope = scope_type.__new__(scope_type)
    with pytest.raises(RuntimeError):
        scope.__exit__(None, None, None)


def test_what_a_session_handed_out_outlives_it(tmp_path):
    import gc

    session = kiln.Session(relu_onnx_bytes())
    info = session.inputs[0]
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    y = session.run({"x": x})["y"]
    scope = session.profile(tmp_path / "trace.json")
    del session
    gc.collect()
    assert info.name == "x" and info.shape == (2, 3)
    assert np.array_equal(y, np.maximum(x, 0))
    with scope:
        pass
    assert (tmp_path / "trace.json").exists()
