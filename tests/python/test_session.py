"""kiln.Session: what it says about a model, running it (in place and concurrently), writing
it ahead of time and loading it back, profiling it."""
import json
import threading

import numpy as np
import pytest

import kiln
from conftest import random_inputs, relu_onnx_bytes


def test_inputs_and_outputs_describe_the_model(matmul_session, mixed_session):
    assert [(i.name, i.shape, i.dtype) for i in matmul_session.inputs] == [
        ("x", (64, 96), np.dtype(np.float32)), ("w", (96, 48), np.dtype(np.float32))]
    assert [(o.name, o.shape) for o in matmul_session.outputs] == [("r", (64, 48)), ("n", (64, 96))]
    assert [i.dtype for i in mixed_session.inputs] == [np.dtype(np.int64), np.dtype(np.int64), np.dtype(np.bool_)]
    assert mixed_session.outputs[1].kiln_dtype == "bool"
    assert repr(matmul_session.inputs[0]) == "TensorInfo(name='x', shape=(64, 96), dtype=float32)"
    assert matmul_session.threads == 2


def test_run_returns_numpy_arrays_of_every_output(matmul_session, mixed_session):
    feeds = random_inputs(matmul_session)
    out = matmul_session.run(feeds)
    assert list(out) == ["r", "n"]
    np.testing.assert_allclose(out["r"], np.maximum(feeds["x"] @ feeds["w"], 0), rtol=1e-5, atol=1e-5)
    assert np.array_equal(out["n"], -feeds["x"])
    a, b = np.arange(5, dtype=np.int64) * 10**12, np.arange(5, dtype=np.int64)
    m = np.array([True, False, True, True, False])
    out = mixed_session.run({"a": a, "b": b, "m": m})
    assert out["s"].dtype == np.int64 and np.array_equal(out["s"], a + b)
    assert out["o"].dtype == np.bool_ and np.array_equal(out["o"], ~m)


def test_half_floats(tmp_path):
    # f16 is numpy's float16; bf16, which numpy lacks, travels as uint16 holding its bits.
    path = tmp_path / "halfs.kir"
    path.write_text("""graph @halfs(%h: f16[4], %b: bf16[4]) -> (f16[4], bf16[4]) {
  %h2 = add(%h, %h) : f16[4]
  %b2 = add(%b, %b) : bf16[4]
  return %h2, %b2
}
""")
    session = kiln.Session(path)
    assert [(i.dtype, i.kiln_dtype) for i in session.inputs] == [(np.float16, "f16"), (np.uint16, "bf16")]
    values = np.array([1.5, -2.0, 0.25, 96.0], np.float32)
    as_bf16 = (values.view(np.uint32) >> 16).astype(np.uint16)  # exact: these need 8 bits of mantissa
    out = session.run({"h": values.astype(np.float16), "b": as_bf16})
    assert out["h2"].dtype == np.float16 and np.array_equal(out["h2"], (2 * values).astype(np.float16))
    doubled = (out["b2"].astype(np.uint32) << 16).view(np.float32)
    assert out["b2"].dtype == np.uint16 and np.array_equal(doubled, 2 * values)


def test_outputs_are_arrays_of_their_own(add_session):
    # Each run's outputs are fresh buffers, never the arena the next run reuses.
    x, y = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    first = add_session.run({"x": x, "y": y})["z"]
    second = add_session.run({"x": x, "y": y + 5})["z"]
    assert np.all(first == 1) and np.all(second == 6)
    assert first.flags.writeable and first.flags.c_contiguous


def test_inputs_are_read_in_place(add_session):
    x = np.zeros((4, 8), np.float32)
    y = np.arange(32, dtype=np.float32).reshape(4, 8)
    # The addresses run() hands the kernels are the arrays' own buffers.
    assert add_session._bound_input_addresses({"x": x, "y": y}) == [x.ctypes.data, y.ctypes.data]
    # ... also for a read-only array and a C-contiguous view into a larger one.
    big = np.zeros((8, 8), np.float32)
    view = big[2:6]
    y.flags.writeable = False
    assert add_session._bound_input_addresses({"x": view, "y": y}) == [view.ctypes.data, y.ctypes.data]
    # Mutated in place, the same arrays give the new result.
    assert np.array_equal(add_session.run({"x": view, "y": y})["z"], y)
    big[2:6] = 100
    assert np.array_equal(add_session.run({"x": view, "y": y})["z"], y + 100)
    # copy=True converts only what needs converting.
    assert add_session._bound_input_addresses({"x": x, "y": y}, copy=True) == [x.ctypes.data, y.ctypes.data]
    as64 = x.astype(np.float64)
    assert add_session._bound_input_addresses({"x": as64, "y": y}, copy=True)[0] != as64.ctypes.data


def test_copy_converts_dtype_layout_and_lists(add_session):
    x = np.arange(64, dtype=np.float64).reshape(8, 8)[::2]  # float64, not contiguous
    y = [[1.0] * 8] * 4
    out = add_session.run({"x": x, "y": y}, copy=True)["z"]
    assert np.array_equal(out, x.astype(np.float32) + 1)


def test_run_into_writes_the_callers_arrays(matmul_session):
    feeds = random_inputs(matmul_session, seed=3)
    r = np.full((64, 48), np.nan, np.float32)
    n = np.empty((64, 96), np.float32)
    assert matmul_session.run_into(feeds, {"r": r, "n": n}) is None
    expected = matmul_session.run(feeds)
    assert np.array_equal(r, expected["r"]) and np.array_equal(n, expected["n"])


def test_sixteen_python_threads_share_one_session(matmul_session):
    # Results computed one at a time first; then 16 threads run the same feeds concurrently
    # (the GIL is released while running) and every result must be bit-identical.
    feeds = [random_inputs(matmul_session, seed=s) for s in range(16)]
    expected = [matmul_session.run(f) for f in feeds]
    failures, start = [], threading.Barrier(16)

    def worker(t):
        start.wait()
        for _ in range(25):
            out = matmul_session.run(feeds[t])
            if not all(np.array_equal(out[k].view(np.uint32), expected[t][k].view(np.uint32)) for k in out):
                failures.append(t)
                return

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_bytes_and_paths_give_the_same_model(tmp_path):
    data = relu_onnx_bytes()
    path = tmp_path / "relu.onnx"
    path.write_bytes(data)
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    for model in (data, bytearray(data), memoryview(data), path, str(path)):
        assert np.array_equal(kiln.Session(model).run({"x": x})["y"], np.maximum(x, 0)), type(model)


def test_input_shapes_fix_symbolic_dims():
    session = kiln.Session(relu_onnx_bytes(shape=("batch", 3)), input_shapes={"x": (5, 3)})
    assert session.inputs[0].shape == (5, 3)
    x = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    assert np.array_equal(session.run({"x": x})["y"], np.maximum(x, 0))


def test_a_symbolic_batch_compiles_once_for_every_size(tmp_path):
    # The batch is the model's one dim_param and relu treats rows alone: one compile serves
    # every batch, its shape shows the symbol, and the saved model does the same.
    session = kiln.Session(relu_onnx_bytes(shape=("batch", 3)))
    assert session.inputs[0].shape == ("batch", 3)
    assert session.outputs[0].shape == ("batch", 3)
    session.save(tmp_path / "relu.so")
    loaded = kiln.load(tmp_path / "relu.so")
    assert loaded.inputs[0].shape == ("batch", 3)
    for rows in (1, 2, 5, 13):
        x = np.linspace(-1, 1, 3 * rows, dtype=np.float32).reshape(rows, 3)
        assert np.array_equal(session.run({"x": x})["y"], np.maximum(x, 0))
        assert np.array_equal(loaded.run({"x": x})["y"], np.maximum(x, 0))
        y = np.empty((rows, 3), np.float32)
        session.run_into({"x": x}, {"y": y})
        assert np.array_equal(y, np.maximum(x, 0))
    assert repr(session.inputs[0]) == "TensorInfo(name='x', shape=('batch', 3), dtype=float32)"
    with pytest.raises(ValueError, match=r"input 'x' expects shape \('batch', 3\), got \(2, 4\)"):
        session.run({"x": np.zeros((2, 4), np.float32)})


def sequence_softmax_onnx(axis=1):
    """y = softmax(x @ w, axis) for x [batch, seq, 4]: softmax over the sequence, a dim one
    compile does not serve (axis 0 mixes the batch too)."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=axis)]
    dims = ["batch", "seq", 4]
    graph = helper.make_graph(nodes, "seqsoftmax", [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()


def softmax_reference(x, axis):
    h = x @ np.linspace(-1, 1, 16, dtype=np.float32).reshape(4, 4)
    e = np.exp(h - h.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_a_symbolic_sequence_compiles_per_length_and_keeps_the_last_few(tmp_path):
    # The batch is served by each compiled length; at most two lengths are kept, the least
    # recently used dropped; profiles name each launch's length.
    session = kiln.Session(sequence_softmax_onnx(), max_specializations=2)
    assert session.inputs[0].shape == ("batch", "seq", 4)
    assert session.specializations == {"compiles": 0, "hits": 0, "evictions": 0, "held": []}
    rng = np.random.default_rng(5)
    with session.profile(tmp_path / "trace.json"):
        for rows, seq in ((2, 5), (3, 5), (2, 7), (1, 5), (4, 9)):
            x = rng.standard_normal((rows, seq, 4)).astype(np.float32)
            np.testing.assert_allclose(session.run({"x": x})["y"], softmax_reference(x, 1), rtol=1e-5, atol=1e-6)
    assert session.specializations == {"compiles": 3, "hits": 2, "evictions": 1,
                                       "held": [{"seq": 9}, {"seq": 5}]}
    names = {event["name"] for event in json.loads((tmp_path / "trace.json").read_text())["traceEvents"]}
    assert any(name.startswith("[seq=9] ") for name in names) and any(name.startswith("[seq=5] ") for name in names)
    y = np.empty((2, 9, 4), np.float32)
    x = rng.standard_normal((2, 9, 4)).astype(np.float32)
    session.run_into({"x": x}, {"y": y})
    np.testing.assert_allclose(y, softmax_reference(x, 1), rtol=1e-5, atol=1e-6)
    assert session.specializations["hits"] == 3
    with pytest.raises(kiln.Error, match="one compiled model serves one size of its symbolic dims"):
        session.save(tmp_path / "seq.so")
    with pytest.raises(ValueError, match="max_specializations must be at least 1, got 0"):
        kiln.Session(sequence_softmax_onnx(), max_specializations=0)
    # A model compiled once says so.
    assert kiln.Session(relu_onnx_bytes(shape=("batch", 3))).specializations is None


def test_a_model_that_imports_only_at_fixed_lengths_compiles_per_length_from_its_declarations():
    # y = x + arange(seq): ONNX Range over the symbolic sequence length imports only with the
    # length fixed; the session takes the declared inputs and compiles each length.
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "step"], ["positions"]),
             helper.make_node("Cast", ["positions"], ["fpositions"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["x", "fpositions"], ["y"])]
    constants = [numpy_helper.from_array(np.array(v, np.int64), name)
                 for name, v in (("one", 1), ("zero", 0), ("step", 1))]
    graph = helper.make_graph(nodes, "positions", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])], constants)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]).SerializeToString()
    session = kiln.Session(model)
    assert session.inputs[0].shape == ("batch", "seq") and session.outputs[0].shape == ("batch", "seq")
    for rows, seq in ((2, 5), (3, 5), (1, 2)):
        x = np.ones((rows, seq), np.float32)
        assert np.array_equal(session.run({"x": x})["y"], x + np.arange(seq, dtype=np.float32))
    stats = session.specializations
    assert (stats["compiles"], stats["hits"]) == (2, 1)
    assert stats["held"] == [{"seq": 2}, {"seq": 5}]


def test_a_model_mixing_its_batch_compiles_per_batch_and_length():
    session = kiln.Session(sequence_softmax_onnx(axis=0))
    rng = np.random.default_rng(6)
    for rows, seq in ((2, 5), (3, 5), (2, 5)):
        x = rng.standard_normal((rows, seq, 4)).astype(np.float32)
        np.testing.assert_allclose(session.run({"x": x})["y"], softmax_reference(x, 0), rtol=1e-5, atol=1e-6)
    stats = session.specializations
    assert (stats["compiles"], stats["hits"]) == (2, 1)
    assert stats["held"] == [{"batch": 2, "seq": 5}, {"batch": 3, "seq": 5}]


def test_save_writes_what_load_runs(tmp_path, matmul_session):
    feeds = random_inputs(matmul_session, seed=7)
    expected = matmul_session.run(feeds)
    matmul_session.save(tmp_path / "mm.so")
    for loaded in (kiln.load(tmp_path / "mm.so", threads=2), kiln.Session(str(tmp_path / "mm.so"), threads=2)):
        assert [i.name for i in loaded.inputs] == ["x", "w"]
        out = loaded.run(feeds)
        assert all(np.array_equal(out[k], expected[k]) for k in expected)
    # A loaded session saves by copying its file.
    kiln.load(tmp_path / "mm.so").save(tmp_path / "copy.so")
    assert (tmp_path / "copy.so").read_bytes() == (tmp_path / "mm.so").read_bytes()


def test_a_path_saved_again_loads_the_new_model(tmp_path, add_session, matmul_session):
    # dlopen hands back the object already loaded from a path: the session must not.
    path = tmp_path / "model.so"
    add_session.save(path)
    first = kiln.load(path)
    matmul_session.save(path)
    second = kiln.load(path)
    assert [i.name for i in first.inputs] == ["x", "y"] and [i.name for i in second.inputs] == ["x", "w"]
    x = np.ones((4, 8), np.float32)
    assert np.array_equal(first.run({"x": x, "y": x})["z"], x + x)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.so"]  # no alias left behind


def test_save_refuses_a_model_file_that_changed(tmp_path):
    path = tmp_path / "relu.onnx"
    path.write_bytes(relu_onnx_bytes())
    session = kiln.Session(path)
    path.write_bytes(relu_onnx_bytes(shape=(4, 4)))
    with pytest.raises(kiln.Error, match="changed since the session read it"):
        session.save(tmp_path / "relu.so")


def test_profile_writes_a_chrome_trace(tmp_path, add_session):
    x = np.ones((4, 8), np.float32)
    with add_session.profile(tmp_path / "trace.json"):
        for _ in range(3):
            add_session.run({"x": x, "y": x})
    events = [e for e in json.loads((tmp_path / "trace.json").read_text())["traceEvents"] if e.get("ph") == "X"]
    assert len(events) == 3  # one launch per run
    # Profiling stops with the block.
    add_session.run({"x": x, "y": x})
    with add_session.profile(tmp_path / "again.json"):
        pass
    assert [e for e in json.loads((tmp_path / "again.json").read_text())["traceEvents"] if e.get("ph") == "X"] == []


def test_cache_dir_holds_the_compiled_kernels(tmp_path, add_path):
    kiln.Session(add_path, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").glob("*.so"))


def test_bf16_precision_is_opt_in_and_close_to_f32():
    # A 32 x 64 x 48 matmul: wide enough to run in bf16 (runtime/kernels/GemmDriver.h).
    g = kiln.GraphBuilder()
    x = g.input("x", "f32", [32, 64])
    w = g.input("w", "f32", [64, 48])
    graph = g.finish([kiln.matmul(x, w)])
    rng = np.random.default_rng(5)
    feeds = {"x": rng.standard_normal((32, 64), dtype=np.float32),
             "w": rng.standard_normal((64, 48), dtype=np.float32)}
    want = feeds["x"].astype(np.float64) @ feeds["w"].astype(np.float64)
    f32 = next(iter(kiln.Session(graph, threads=1).run(feeds).values()))
    bf16 = next(iter(kiln.Session(graph, threads=1, precision="bf16").run(feeds).values()))
    scale = np.abs(want).max()
    assert np.abs(f32 - want).max() < 1e-5 * scale
    # bf16 keeps 8 significant bits per operand: about 2^-9 relative error each.
    error = np.abs(bf16 - want).max()
    assert 1e-5 * scale < error < 2e-2 * scale
    with pytest.raises(ValueError, match="precision: unknown precision 'fp8'"):
        kiln.Session(graph, precision="fp8")
