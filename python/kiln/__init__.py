"""kiln from Python: ONNX models (and kiln's own) compiled for this CPU and run on numpy arrays,
and graphs built op by op.

    import numpy as np
    import kiln

    session = kiln.Session("model.onnx")            # or the model's bytes; threads=, cache_dir=
    x = np.zeros(session.inputs[0].shape, session.inputs[0].dtype)
    outputs = session.run({session.inputs[0].name: x})  # {output name: numpy array}

    g = kiln.GraphBuilder("scale")                  # the graph API (kiln/graph.py)
    y = kiln.relu(g.input("x", "f32", [2, 3])) * 2
    session = kiln.compile(g.finish({"y": y}))

    step = kiln.compile_training_step(graph, loss="cross_entropy",   # training (kiln/training.py)
                                      optimizer=kiln.optim.SGD(0.01, momentum=0.9))
    kiln.train(step, {"x": xs, "target": labels}, epochs=3, shuffle=True)

kiln.torch (imported on its own: it needs torch) compiles and trains torch.nn.Modules.

The compiled extension kiln._kiln holds the classes and functions; this package re-exports
them: the ops (kiln/ops.py) as kiln.<op> and kiln.ops.<op>, the modules as kiln.nn.
"""
import ctypes as _ctypes
import ctypes.util as _ctypes_util

# Open MPI loads its components with dlopen, and they need libmpi's symbols visible globally:
# loaded as a dependency of this extension (Python opens extensions RTLD_LOCAL), libmpi's are
# not, and MPI_Init fails to open its components. Loading libmpi first, RTLD_GLOBAL, avoids
# that; a kiln built without MPI (or a machine without libmpi) needs nothing.
_libmpi = _ctypes_util.find_library("mpi")
if _libmpi:
    try:
        _ctypes.CDLL(_libmpi, mode=_ctypes.RTLD_GLOBAL)
    except OSError:
        pass

from kiln._kiln import DataParallel, Error, Session, TensorInfo, TrainingStep, import_onnx, load  # noqa: E402
from kiln._kiln import nn
from kiln import ops, optim
from kiln.graph import Graph, GraphBuilder, Value, compile, evaluate, parse
from kiln.training import compile_training_step, train
from kiln.ops import *  # noqa: F401,F403 (the ops, as torch puts its functions beside its classes)

# Tracebacks and reprs name the package users import, not the extension inside it.
for _exported in (Error, Session, TensorInfo, TrainingStep, Graph, GraphBuilder, Value):
    _exported.__module__ = "kiln"
del _exported

__all__ = ["DataParallel", "Error", "Session", "TensorInfo", "TrainingStep", "import_onnx", "load", "nn", "ops", "optim", "Graph",
           "GraphBuilder", "Value", "compile", "evaluate", "parse", "compile_training_step", "train"] + ops.__all__
