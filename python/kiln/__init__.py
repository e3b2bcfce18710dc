"""kiln from Python: ONNX models (and kiln's own) compiled for this CPU and run on numpy arrays.

    import numpy as np
    import kiln

    session = kiln.Session("model.onnx")            # or the model's bytes; threads=, cache_dir=
    x = np.zeros(session.inputs[0].shape, session.inputs[0].dtype)
    outputs = session.run({session.inputs[0].name: x})  # {output name: numpy array}

The compiled extension kiln._kiln holds the classes; this package re-exports them, and is where
the parts written in Python (the graph API, training, kiln.torch) will sit beside it.
"""
from kiln._kiln import Error, Session, TensorInfo, load

# Tracebacks and reprs name the package users import, not the extension inside it.
for _exported in (Error, Session, TensorInfo):
    _exported.__module__ = "kiln"
del _exported

__all__ = ["Error", "Session", "TensorInfo", "load"]
