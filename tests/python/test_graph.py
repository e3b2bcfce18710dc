"""The graph API from Python: building, operators, the graph's views (text that parses back,
DOT, JSON), compiling (kiln.compile and kiln.Session(graph)), the op table's coverage, nn
modules, and the errors a Python user can cause."""
import json
import keyword

import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(7)


def small_graph():
    g = kiln.GraphBuilder("small")
    x = g.input("x", "f32", [2, 3])
    w = g.param("w", RNG.standard_normal((3, 20)).astype(np.float32))  # more than 16 elements
    y = kiln.relu(x @ w) * 2 - 1
    return g.finish({"y": y, "z": 1 / (x + 1)})


def test_every_op_of_the_table_has_a_python_spelling():
    # A new op of ir/Ops.def needs no binding: it must show up here by itself. The deliberate
    # exceptions, each with its reason, are kiln.ops.NOT_FUNCTIONS.
    for mnemonic, _, _, _ in kiln.ops.OP_TABLE:
        if mnemonic in kiln.ops.NOT_FUNCTIONS:
            assert kiln.ops.NOT_FUNCTIONS[mnemonic], mnemonic
            continue
        spelling = kiln.ops.SPELLINGS.get(mnemonic)
        assert spelling, f"op {mnemonic} has no Python spelling"
        assert not keyword.iskeyword(spelling)
        assert callable(getattr(kiln.ops, spelling)) and getattr(kiln, spelling) is getattr(kiln.ops, spelling)
    assert set(kiln.ops.NOT_FUNCTIONS) <= {row[0] for row in kiln.ops.OP_TABLE}


def test_elementwise_rows_are_named_in_snake_case():
    assert kiln.ops.SPELLINGS["not"] == "logical_not"
    assert kiln.ops.SPELLINGS["max"] == "maximum"
    assert kiln.ops.SPELLINGS["and"] == "bitwise_and"
    assert kiln.ops.SPELLINGS["reduce_sum"] == "sum"


def test_session_and_compile_run_a_built_graph():
    graph = small_graph()
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    expected = kiln.evaluate(graph, {"x": x})
    for session in (kiln.compile(graph, threads=2), kiln.Session(graph, threads=2)):
        assert [i.name for i in session.inputs] == ["x"] and [o.name for o in session.outputs] == ["y", "z"]
        got = session.run({"x": x})
        for name in ("y", "z"):
            np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-6)
        out = {"y": np.empty((2, 20), np.float32), "z": np.empty((2, 3), np.float32)}
        session.run_into({"x": x}, out)
        np.testing.assert_array_equal(out["y"], got["y"])


def test_operators_with_numbers_on_either_side_match_numpy():
    g = kiln.GraphBuilder("operators")
    a, b = g.input("a", "f32", [3, 4]), g.input("b", "f32", [3, 4])
    outputs = {"sum": 1 + a + b, "diff": 2 - a - b, "prod": a * b * 3, "quot": 1 / (a * a + 1) / b,
               "neg": -a, "abs": abs(b), "pow": a ** 2, "rpow": 2 ** a, "mod": b % 1.5, "mm": a @ kiln.transpose(b, 0, 1),
               "lt": a < b, "ge": a >= 0.5, "eq": a == a, "ne": a != b, "and": (a > 0) & (b > 0), "not": ~(a > 0)}
    graph = g.finish(outputs)
    A, B = RNG.uniform(-1, 1, (3, 4)).astype(np.float32), RNG.uniform(0.5, 1, (3, 4)).astype(np.float32)
    got = kiln.evaluate(graph, {"a": A, "b": B})
    expected = {"sum": 1 + A + B, "diff": 2 - A - B, "prod": A * B * 3, "quot": 1 / (A * A + 1) / B, "neg": -A,
                "abs": abs(B), "pow": A ** 2, "rpow": 2 ** A, "mod": B % 1.5, "mm": A @ B.T, "lt": A < B,
                "ge": A >= 0.5, "eq": A == A, "ne": A != B, "and": (A > 0) & (B > 0), "not": ~(A > 0)}
    for name, value in expected.items():
        assert got[name].dtype == value.dtype, name
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-6, err_msg=name)


def test_scalars_promote_as_in_torch():
    g = kiln.GraphBuilder("promotion")
    i = g.input("i", "i32", [2])
    assert (i * 2).dtype == "i32"
    assert (i * 0.5).dtype == "f32"
    assert (i / 2).dtype == "f32"
    assert (i < 1).dtype == "bool"


def test_printed_graph_parses_back():
    graph = small_graph()
    text = graph.print(full=True)
    again = kiln.parse(text)
    assert again.print(full=True) == text
    assert str(graph) == graph.print() and "elided" in str(graph)  # the 3x20 parameter
    elided = kiln.parse(str(graph))  # an elided parameter parses back as one without a value
    assert 'param "w" : f32[3,20]' in str(elided) and [o.name for o in elided.outputs] == ["y", "z"]
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(kiln.Session(again).run({"x": x})["y"], kiln.Session(graph).run({"x": x})["y"])


def test_dot_and_json_views():
    graph = small_graph()
    assert graph.dot().startswith("digraph") and "matmul" in graph.dot()
    document = json.loads(graph.json())
    assert document["name"] == "small"
    assert [n["op"] for n in document["nodes"]][:2] == ["param", "matmul"]


def test_graph_inputs_outputs_and_names():
    graph = small_graph()
    assert graph.name == "small"
    assert [(i.name, i.shape, i.kiln_dtype) for i in graph.inputs] == [("x", (2, 3), "f32")]
    assert [o.name for o in graph.outputs] == ["y", "z"]
    g = kiln.GraphBuilder()
    v = g.input("v", np.float64, np.int64(4))
    assert v.dtype == "f64" and v.shape == (4,) and v.name == "v"
    assert "output0" in [o.name for o in g.finish([kiln.exp(v)]).outputs]


def test_generic_ops_take_their_attributes_as_keywords():
    g = kiln.GraphBuilder()
    x = g.input("x", "f32", [2, 5])
    values, indices = kiln.topk(x, k=2, axis=1, largest=0)
    assert values.shape == (2, 2) and indices.dtype == "i64"
    assert kiln.op("elu", [x], alpha=0.5).shape == (2, 5)
    assert "alpha: float" in kiln.elu.__doc__


@pytest.mark.parametrize("build, kind, words", [
    (lambda g, x: x + g.input("q", "f32", [4, 4]), kiln.Error, ["add", "[2,3]", "[4,4]"]),
    (lambda g, x: kiln.matmul(x, x), kiln.Error, ["matmul", "f32[2,3]"]),
    (lambda g, x: kiln.reshape(x, [5]), kiln.Error, ["reshape"]),
    (lambda g, x: kiln.op("add", [x, g.input("i", "i32", [2, 3])]), kiln.Error, ["add", "f32[2,3]", "i32[2,3]"]),
    (lambda g, x: x & x, kiln.Error, ["and", "f32"]),
    (lambda g, x: kiln.elu(x, beta=1.0), TypeError, ["elu", "unknown attribute 'beta'", "alpha"]),
    (lambda g, x: kiln.elu(x, alpha="big"), TypeError, ["elu", "'alpha'", "float"]),
    (lambda g, x: kiln.topk(x), kiln.Error, ["topk", "k"]),
    (lambda g, x: kiln.op("no_such_op", [x]), ValueError, ["no_such_op"]),
    (lambda g, x: kiln.relu("x"), TypeError, ["relu"]),
    (lambda g, x: g.input("w", "f17", [2]), TypeError, ["dtype", "f17"]),
    (lambda g, x: g.input("w", "f32", "two"), TypeError, ["shape"]),
    (lambda g, x: g.param("w", np.array(["a"])), TypeError, ["param"]),
    (lambda g, x: x + kiln.GraphBuilder("other").input("o", "f32", [2, 3]), kiln.Error, ["different GraphBuilders"]),
    (lambda g, x: bool(x > 0), TypeError, ["truth value", "kiln.where"]),
])
def test_mistakes_raise_with_kilns_message(build, kind, words):
    g = kiln.GraphBuilder("mistakes")
    x = g.input("x", "f32", [2, 3])
    with pytest.raises(kind) as raised:
        build(g, x)
    for word in words:
        assert word in str(raised.value), (word, str(raised.value))


def test_finished_builder_and_wrong_feeds():
    g = kiln.GraphBuilder()
    x = g.input("x", "f32", [2])
    graph = g.finish([x * 2])
    with pytest.raises(kiln.Error, match="finish"):
        g.input("late", "f32", [1])
    with pytest.raises(ValueError, match="missing input 'x'"):
        kiln.evaluate(graph, {})
    with pytest.raises(TypeError, match="'x'"):
        kiln.evaluate(graph, {"x": np.ones(2, np.float64)})
    with pytest.raises(ValueError, match="pipeline"):
        kiln.compile(graph, pipeline="training")
    with pytest.raises(TypeError, match="kiln.Graph"):
        kiln.compile("graph.kir")


def test_nn_mlp_compiles_and_runs():
    kiln.nn.manual_seed(0)
    model = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.ReLU(), kiln.nn.Linear(8, 3))
    model.eval()
    g = kiln.GraphBuilder("mlp")
    graph = g.finish({"logits": model(g.input("x", "f32", [5, 4]))})
    state = model.state_dict()
    assert list(state) == ["0.weight", "0.bias", "2.weight", "2.bias"] and state["0.weight"].shape == (8, 4)
    assert model.num_parameters == 4 * 8 + 8 + 8 * 3 + 3
    np.testing.assert_array_equal(model[0].weight, state["0.weight"])
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    expected = np.maximum(x @ state["0.weight"].T + state["0.bias"], 0) @ state["2.weight"].T + state["2.bias"]
    np.testing.assert_allclose(kiln.compile(graph, threads=2).run({"x": x})["logits"], expected, rtol=1e-4, atol=1e-6)


def test_nn_conv_net_and_state_dict_round_trip():
    kiln.nn.manual_seed(1)
    model = kiln.nn.Sequential(kiln.nn.Conv2d(3, 4, 3, padding=1), kiln.nn.BatchNorm2d(4), kiln.nn.ReLU(),
                               kiln.nn.MaxPool2d(2), kiln.nn.Flatten(), kiln.nn.Linear(4 * 4 * 4, 2))
    model.eval()
    state = {name: (value + 0.5).astype(value.dtype) for name, value in model.state_dict().items()}
    model.load_state_dict(state)
    np.testing.assert_array_equal(model.state_dict()["1.running_mean"], state["1.running_mean"])
    g = kiln.GraphBuilder("convnet")
    graph = g.finish([model(g.input("image", "f32", [2, 3, 8, 8]))])
    image = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
    expected = kiln.evaluate(graph, {"image": image})["output0"]
    np.testing.assert_allclose(kiln.Session(graph).run({"image": image})["output0"], expected, rtol=1e-4, atol=1e-5)
    with pytest.raises(kiln.Error, match="weight"):
        model.load_state_dict({"0.weight": np.zeros((1, 1), np.float32)}, strict=False)
    with pytest.raises(AttributeError, match="no parameter"):
        model[0].gamma
