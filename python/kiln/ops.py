"""Every op of kiln's op table as a function on graph values (kiln.Value).

The functions come from three places, none of them written per op:
- the elementwise table (ir/ElementwiseOps.def): one function per row, named by its graph-API
  name in snake_case (relu, logical_not, maximum, bitwise_and, ...), numbers allowed on
  either side of a binary one;
- the graph API's other functions (frontend/Math.h, Movement.h, Functional.h) with torch's
  keywords: sum, mean, reshape, concat, matmul, conv2d, max_pool2d, softmax, layer_norm, ...;
- every other op of ir/Ops.def, defined below from the op table under its mnemonic with its
  attributes as keywords: kiln.ops.elu(x, alpha=0.5), kiln.ops.topk(x, k=3, axis=-1). A new op
  in the table is a new function here with no binding to write.

SPELLINGS maps each op's mnemonic to the function that creates it where the two differ.
"""
import keyword as _keyword

from kiln._kiln import ops as _bound

def _op_function(mnemonic, attrs):
    def function(*inputs, **attributes):
        return _bound.op(mnemonic, list(inputs), **attributes)

    described = ", ".join(f"{name}: {kind}{' (required)' if required else ''}" for name, kind, required in attrs)
    function.__name__ = function.__qualname__ = mnemonic
    function.__doc__ = (f"The op {mnemonic} of kiln's op table on its input Values; attributes: "
                        f"{described or 'none'}.")
    return function


# Ops users do not create by name: they appear here so that the op-table test knows every op.
NOT_FUNCTIONS = {
    "param": "a graph's parameter: GraphBuilder.param(name, array)",
    "constant": "a constant tensor: GraphBuilder.constant(array)",
    "iota": "has no operand to find its graph by: GraphBuilder.iota(shape, axis)",
    "random_uniform": "draws from the graph's random offset: GraphBuilder.random_uniform(shape, seed)",
    "kernel": "a fusion group, formed by the compiler's fuse pass",
}

SPELLINGS = dict(_bound._op_spellings)
OP_TABLE = _bound._op_table()

__all__ = [name for name in dir(_bound) if not name.startswith("_")]  # op and the bound functions
globals().update((name, getattr(_bound, name)) for name in __all__)
for _mnemonic, _min, _max, _attrs in OP_TABLE:
    if _mnemonic in SPELLINGS or _mnemonic in NOT_FUNCTIONS:
        continue
    if _mnemonic in __all__:  # a frontend function of that name (matmul, reshape, softmax, ...)
        SPELLINGS[_mnemonic] = _mnemonic
        continue
    assert not _keyword.iskeyword(_mnemonic), f"op {_mnemonic} needs a spelling that is no Python keyword"
    globals()[_mnemonic] = _op_function(_mnemonic, _attrs)
    SPELLINGS[_mnemonic] = _mnemonic
    __all__.append(_mnemonic)
del _mnemonic, _min, _max, _attrs
