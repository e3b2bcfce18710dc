"""The graph API from Python: kiln.GraphBuilder builds a kiln.Graph op by op, kiln.Value is a
value of the graph under construction, and Python's operators on Values are the graph API's.

    g = kiln.GraphBuilder("mlp")
    x = g.input("x", "f32", [8, 4])
    w = g.param("w", np.ones((3, 4), np.float32))
    graph = g.finish([kiln.relu(kiln.linear(x, w)) * 2])
    session = kiln.compile(graph)                     # a kiln.Session

The operators are the C++ Var's (frontend/Math.h): + - * / % ** with a number on either side,
comparisons giving bool Values, & | ^ on bool Values, unary - and ~ (logical not), @ (matmul).
A Value has no truth value: `if a == b` is a TypeError, not a silent True.
"""
from kiln import _kiln
from kiln._kiln import ops as _ops
from kiln._kiln import Graph, GraphBuilder, Value, evaluate, parse

_BINARY_OPERATORS = {
    "add": _ops.add, "sub": _ops.sub, "mul": _ops.mul, "truediv": _ops.div, "mod": _ops.mod,
    "pow": _ops.pow, "matmul": _ops.matmul, "and": _ops.bitwise_and, "or": _ops.bitwise_or,
    "xor": _ops.bitwise_xor,
}
_COMPARISONS = {"eq": _ops.eq, "ne": _ops.ne, "lt": _ops.lt, "le": _ops.le, "gt": _ops.gt, "ge": _ops.ge}


def _operators(name, function):
    setattr(Value, f"__{name}__", lambda a, b: function(a, b))
    setattr(Value, f"__r{name}__", lambda a, b: function(b, a))


for _name, _function in _BINARY_OPERATORS.items():
    _operators(_name, _function)
for _name, _function in _COMPARISONS.items():
    setattr(Value, f"__{_name}__", lambda a, b, f=_function: f(a, b))
Value.__neg__ = lambda a: _ops.neg(a)
Value.__abs__ = lambda a: _ops.abs(a)
Value.__invert__ = lambda a: _ops.logical_not(a)
Value.__hash__ = object.__hash__  # by identity, though == builds an op


def _no_truth_value(value):
    raise TypeError(f"{value!r} is symbolic and has no truth value; use kiln.where to select by a condition")


Value.__bool__ = _no_truth_value
del _name, _function


def compile(graph, pipeline="inference", threads=None, cache_dir=None):
    """Compiles `graph` (a kiln.Graph) for this CPU: the same kiln.Session as kiln.Session(graph)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"kiln.compile takes a kiln.Graph, got {type(graph).__name__}")
    if pipeline != "inference":
        raise ValueError(f"unknown pipeline {pipeline!r}: a Session compiles the 'inference' pipeline "
                         "(kiln.compile_training_step compiles a training step)")
    return _kiln.Session(graph, threads=threads, cache_dir=cache_dir)


__all__ = ["Graph", "GraphBuilder", "Value", "compile", "evaluate", "parse"]
