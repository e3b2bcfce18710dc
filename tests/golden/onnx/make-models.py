"""Writes the small ONNX models that the golden tests in this folder read. The .onnx files are
checked in, so the tests need no Python; rerun this (python3 with Debian's python3-onnx) after
changing a model here.

  conv-relu-pool.onnx  Conv (pads), Relu, MaxPool, Flatten, Gemm: every op supported
  conv-relu-pool-batch.onnx  the same with a symbolic batch (dim_param "N" on x and y)
  partly-supported.onnx  Relu, an If node and a Pad in 'wrap' mode: one unsupported op type,
                         one supported op type with an unsupported attribute value
  identity-outputs.onnx  Relu and Identity nodes whose outputs are graph outputs: the reported
                         Relu -> y2, Identity(y2) -> y, a second Identity of y2, a chain, y2
                         itself, and an Identity of the graph input
  lstm-gru.onnx  a bidirectional LSTM with bias and initial states over a batch-first input
                 (as torch exports it: Transpose in), its Y reshaped into a GRU with
                 linear_before_reset = 1 and sequence_lens; outputs the GRU's Y_h and the
                 LSTM's Y_c
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def save(graph, name, opset=13):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="kiln-tests")
    onnx.checker.check_model(model)
    onnx.save(model, name)


def conv_relu_pool(batch=2, name="conv_relu_pool", path="conv-relu-pool.onnx"):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "b")
    fc = numpy_helper.from_array(rng.standard_normal((3, 16)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc"], ["y"], name="fc", transB=1),
    ]
    graph = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 1, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 3])],
                              [w, b, fc])
    save(graph, path)


def partly_supported():
    branch = lambda name: helper.make_graph(
        [helper.make_node("Identity", ["r"], [name + "_out"])], name, [],
        [helper.make_tensor_value_info(name + "_out", TensorProto.FLOAT, [2, 3])])
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], dtype=np.int64), "pads")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("If", ["cond"], ["i"], name="choose", then_branch=branch("then"),
                         else_branch=branch("else")),
        helper.make_node("Pad", ["i", "pads"], ["y"], name="wrap_pad", mode="wrap"),
    ]
    graph = helper.make_graph(nodes, "partly_supported",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])], [pads])
    # 'wrap' is a Pad mode of opset 19; opset 13's checker does not validate the mode's value.
    save(graph, "partly-supported.onnx")


def identity_outputs():
    nodes = [
        helper.make_node("Relu", ["x"], ["y2"], name="relu"),
        helper.make_node("Identity", ["y2"], ["y"], name="id_y"),
        helper.make_node("Identity", ["y2"], ["z"], name="id_z"),
        helper.make_node("Identity", ["z"], ["w"], name="id_w"),
        helper.make_node("Identity", ["x"], ["x_copy"], name="id_x"),
    ]
    info = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])
    graph = helper.make_graph(nodes, "identity_outputs", [info("x")],
                              [info(name) for name in ["y", "z", "w", "y2", "x_copy"]])
    save(graph, "identity-outputs.onnx")


def lstm_gru():
    rng = np.random.default_rng(1)
    batch, steps, inputs, hidden = 2, 5, 3, 4
    init = lambda name, shape: numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.5).astype(np.float32), name)
    tensors = [
        init("lstm_w", (2, 4 * hidden, inputs)), init("lstm_r", (2, 4 * hidden, hidden)),
        init("lstm_b", (2, 8 * hidden)), init("h0", (2, batch, hidden)), init("c0", (2, batch, hidden)),
        init("gru_w", (1, 3 * hidden, 2 * hidden)), init("gru_r", (1, 3 * hidden, hidden)),
        numpy_helper.from_array(np.array([steps, 3], dtype=np.int32), "lens"),
        numpy_helper.from_array(np.array([steps, batch, 2 * hidden], dtype=np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Transpose", ["x"], ["xt"], name="time_major", perm=[1, 0, 2]),
        helper.make_node("LSTM", ["xt", "lstm_w", "lstm_r", "lstm_b", "", "h0", "c0"], ["y", "", "yc"],
                         name="lstm", hidden_size=hidden, direction="bidirectional"),
        helper.make_node("Transpose", ["y"], ["yt"], name="directions_last", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape"], ["features"], name="features"),
        helper.make_node("GRU", ["features", "gru_w", "gru_r", "", "lens"], ["", "gh"], name="gru",
                         hidden_size=hidden, linear_before_reset=1),
    ]
    graph = helper.make_graph(nodes, "lstm_gru",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, steps, inputs])],
                              [helper.make_tensor_value_info("gh", TensorProto.FLOAT, [1, batch, hidden]),
                               helper.make_tensor_value_info("yc", TensorProto.FLOAT, [2, batch, hidden])],
                              tensors)
    save(graph, "lstm-gru.onnx", opset=17)


conv_relu_pool()
conv_relu_pool("N", "conv_relu_pool_batch", "conv-relu-pool-batch.onnx")
partly_supported()
identity_outputs()
lstm_gru()
