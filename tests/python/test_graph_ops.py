"""Every op family built from Python, compiled, run, and compared with the reference evaluator
(kiln.evaluate, rel 1e-4) and, where numpy has the op, with numpy. One graph per family, so a
family costs one compile (the compile cache makes later runs a load)."""
import numpy as np
import pytest

import kiln

RNG = np.random.default_rng(25)
X = RNG.uniform(0.1, 0.9, (4, 6)).astype(np.float32)  # inside every float-only op's domain
Y = RNG.uniform(-2.0, 2.0, (4, 6)).astype(np.float32)
IMAGE = RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)
FEEDS = {"x": X, "y": Y, "image": IMAGE}


def generated(mnemonic):
    """The kiln.ops function that the op table defines for `mnemonic`, if it is one."""
    function = getattr(kiln.ops, kiln.ops.SPELLINGS[mnemonic])
    return function if getattr(function, "__module__", None) == "kiln.ops" else None


UNARY_ROWS = [m for m, low, high, attrs in kiln.ops.OP_TABLE
              if m in kiln.ops.SPELLINGS and low == high == 1 and not attrs and not generated(m)]
# The table's ops with one input and only optional attributes that have no frontend spelling:
# their defaults are what these build.
GENERATED_UNARY = [m for m, low, high, attrs in kiln.ops.OP_TABLE
                   if m in kiln.ops.SPELLINGS and generated(m) and low <= 1 <= high
                   and not any(required for _, _, required in attrs)]

# The elementwise table's binary rows (and mod) on floats; the logical ones take bools below.
BINARY_ROWS = [m for m, low, high, attrs in kiln.ops.OP_TABLE
               if low == high == 2 and (not attrs or m == "mod") and not generated(m)
               and m not in ("and", "or", "xor", "matmul")]


def unary_family(x, y, image):
    return {m: getattr(kiln.ops, kiln.ops.SPELLINGS[m])(x) for m in UNARY_ROWS}


def generated_family(x, y, image):
    return {m: getattr(kiln.ops, m)(x) for m in GENERATED_UNARY}


def binary_family(x, y, image):
    outputs = {}
    for m in BINARY_ROWS:
        function = getattr(kiln.ops, kiln.ops.SPELLINGS[m])
        outputs[m] = function(x, y)
        outputs[m + "_scalar_left"] = function(1.5, y)
        outputs[m + "_scalar_right"] = function(x, 2)
    positive, bigger = x > 0.5, y > 0.0
    outputs.update(bitwise_and=positive & bigger, bitwise_or=positive | bigger, bitwise_xor=positive ^ bigger,
                   logical_and=kiln.logical_and(x, y), where=kiln.where(bigger, x, y), clamp=kiln.clamp(y, -1, 1),
                   cast=kiln.cast(y, "i32"), operators=-(x @ kiln.transpose(y, 0, 1) @ y) / 3 - 2 ** x + y % 1.5)
    return outputs


def reduction_family(x, y, image):
    outputs = {name: getattr(kiln, name)(y, axes=1) for name in ("sum", "mean", "prod", "max", "min")}
    outputs.update(sum_all=kiln.sum(y), mean_keep=kiln.mean(y, axes=[0], keepdims=True),
                   argmax=kiln.argmax(y, 1), argmin=kiln.argmin(y, 0, keepdims=True),
                   l2=kiln.reduce_l2(y, axes=[1]), log_sum_exp=kiln.reduce_log_sum_exp(y, axes=[0], keepdims=1),
                   cumsum=kiln.cumsum(y, axis=1), topk_values=kiln.topk(y, k=3)[0])
    return outputs


def movement_family(x, y, image):
    halves = kiln.split(y, [2, 4], axis=1)
    indices = kiln.cast(kiln.argmax(y, 1), "i64")
    return dict(reshape=kiln.reshape(y, [3, -1]), permute=kiln.permute(y, [1, 0]), broadcast=kiln.broadcast_to(
        kiln.reshape(kiln.slice(x, [0], [1]), [6]), [3, 6]),
        slice=kiln.slice(y, [1, 0], [3, 6], steps=[1, 2]), narrow=kiln.narrow(y, 1, 2, 3),
        pad=kiln.pad(y, [1, 0, 0, 2], mode="reflect"), concat=kiln.concat([x, y], 0), split=halves[1],
        chunk=kiln.chunk(y, 3, axis=1)[2], squeeze=kiln.squeeze(kiln.unsqueeze(y, 0)),
        flatten=kiln.flatten(image, 1), gather=kiln.gather(y, indices, 1),
        scatter_add=kiln.scatter_add(x, kiln.reshape(indices % 4, [1, 4]), kiln.slice(y, [0, 0], [1, 4]), 0),
        tile=kiln.tile(x, repeats=[1, 2]), trilu=kiln.trilu(y, upper=0), one_hot=kiln.one_hot(indices, kiln.reshape(kiln.slice(x, [0, 0], [1, 2]), [2]), depth=6),
        gather_elements=kiln.gather_elements(y, kiln.reshape(indices, [4, 1]), axis=1))


def network_family(x, y, image):
    weight = kiln.reshape(kiln.slice(kiln.concat([y, y, y], 0), [0, 0], [12, 6]), [4, 3, 2, 3])
    channels = kiln.reshape(kiln.slice(y, [0, 0], [1, 3]), [3])
    conv = kiln.conv2d(image, weight, stride=1, padding=[1, 0])
    return dict(matmul=kiln.matmul(x, kiln.transpose(y, 0, 1)), linear=kiln.linear(x, y),
                conv=conv, conv_transpose=kiln.conv_transpose(conv, weight, strides=[2, 2]),
                einsum=kiln.einsum(x, y, equation="ij,kj->ik"),
                max_pool=kiln.max_pool2d(image, 2), avg_pool=kiln.avg_pool2d(image, 3, stride=2, padding=1),
                batch_norm=kiln.batch_norm(image, channels, channels, channels, channels * channels + 0.5),
                layer_norm=kiln.layer_norm(y, -1), softmax=kiln.softmax(y), log_softmax=kiln.log_softmax(y, 0),
                gelu=kiln.gelu(y, approximate="tanh"), instance_norm=kiln.instance_norm(image, channels, channels),
                mse=kiln.mse_loss(x, y), cross_entropy=kiln.cross_entropy(y, kiln.argmax(x, 1)),
                resize=kiln.resize(image, sizes=[2, 3, 16, 16], mode="nearest"), leaky_relu=kiln.leaky_relu(y, alpha=0.2))


FAMILIES = [unary_family, generated_family, binary_family, reduction_family, movement_family, network_family]


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__)
def test_family_compiles_and_matches_the_reference_evaluator(family):
    g = kiln.GraphBuilder(family.__name__)
    outputs = family(g.input("x", "f32", X.shape), g.input("y", "f32", Y.shape), g.input("image", "f32", IMAGE.shape))
    assert outputs
    graph = g.finish(outputs)
    feeds = {info.name: FEEDS[info.name] for info in graph.inputs}
    expected = kiln.evaluate(graph, feeds)
    got = kiln.compile(graph, threads=2).run(feeds)
    assert set(got) == set(outputs)
    for name in outputs:
        assert got[name].dtype == expected[name].dtype, name
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-4, atol=1e-5, equal_nan=True, err_msg=name)


NUMPY = {
    "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y, "div": lambda x, y: x / y,
    "max": np.maximum, "min": np.minimum, "lt": lambda x, y: x < y, "mod": lambda x, y: np.mod(x, y),
}


def test_evaluator_matches_numpy():
    g = kiln.GraphBuilder("numpy")
    x, y = g.input("x", "f32", X.shape), g.input("y", "f32", Y.shape)
    w = g.param("w", Y.T.copy())
    outputs = {m: getattr(kiln, kiln.ops.SPELLINGS[m])(x, y) for m in NUMPY}
    outputs.update(exp=kiln.exp(x), tanh=kiln.tanh(y), sum=kiln.sum(y, axes=0), matmul=x @ w,
                   softmax=kiln.softmax(y), reshape=kiln.reshape(y, [6, 4]), scalar=2.5 * x - 1)
    got = kiln.evaluate(g.finish(outputs), {"x": X, "y": Y})
    expected = {m: f(X, Y) for m, f in NUMPY.items()}
    exp_y = np.exp(Y - Y.max(axis=-1, keepdims=True))
    expected.update(exp=np.exp(X), tanh=np.tanh(Y), sum=Y.sum(axis=0), matmul=X @ Y.T,
                    softmax=exp_y / exp_y.sum(axis=-1, keepdims=True), reshape=Y.reshape(6, 4), scalar=2.5 * X - 1)
    for name, value in expected.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-4, atol=1e-6, err_msg=name)
