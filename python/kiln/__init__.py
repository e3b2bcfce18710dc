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
from kiln._kiln import Error, Session, TensorInfo, TrainingStep, import_onnx, load
from kiln._kiln import nn
from kiln import ops, optim
from kiln.graph import Graph, GraphBuilder, Value, compile, evaluate, parse
from kiln.training import compile_training_step, train
from kiln.ops import *  # noqa: F401,F403 (the ops, as torch puts its functions beside its classes)

# Tracebacks and reprs name the package users import, not the extension inside it.
for _exported in (Error, Session, TensorInfo, TrainingStep, Graph, GraphBuilder, Value):
    _exported.__module__ = "kiln"
del _exported

__all__ = ["Error", "Session", "TensorInfo", "TrainingStep", "import_onnx", "load", "nn", "ops", "optim", "Graph",
           "GraphBuilder", "Value", "compile", "evaluate", "parse", "compile_training_step", "train"] + ops.__all__
