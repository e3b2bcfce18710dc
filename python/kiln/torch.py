"""PyTorch modules compiled and trained by kiln (Debian's torch 1.13).

    import kiln.torch
    fast = kiln.torch.compile(module, (example_input,))     # a callable on torch tensors
    y = fast(x)

    losses = kiln.torch.train(module, torch.nn.CrossEntropyLoss(), kiln.optim.SGD(0.01),
                              [(x0, labels0), (x1, labels1), ...])  # module now holds the result

The route is an ONNX export held in memory (torch.onnx.export into bytes) that kiln's importer
reads: whatever torch cannot export, or kiln cannot import, is a kiln.Error that names the
module and the op (the exporter's node names are the modules' paths: "/layer1/layer1.0/conv1/Conv").
Shapes are static: the example inputs fix them.

Tensors cross without copies where they can: a contiguous CPU tensor of the model's dtype is
read in place through numpy (Tensor.numpy() shares its memory), and outputs come back as
tensors over kiln's own output buffers (torch.from_numpy).

Training exports the module in training mode: BatchNorm normalises by the batch's statistics
and its running statistics are written back on every step as torch updates them (momentum
blend, the unbiased variance), Dropout draws a fresh mask per step. The parameters torch does
not train (requires_grad=False) are frozen: their backward is not built. write_back() copies
the trained parameters and buffers into the module (train() does so at the end).
"""
import io
import warnings

import numpy as np
import torch

from kiln import _kiln
from kiln import optim as _optim
from kiln.training import LOSSES, compile_training_step

OPSET = 15

# torch's loss modules and functions as kiln's losses (mean reduction only).
_LOSSES = {
    torch.nn.CrossEntropyLoss: "cross_entropy", torch.nn.functional.cross_entropy: "cross_entropy",
    torch.nn.MSELoss: "mse", torch.nn.functional.mse_loss: "mse",
    torch.nn.NLLLoss: "nll", torch.nn.functional.nll_loss: "nll",
}


def _what(module):
    return f"{type(module).__name__}"


def _as_tuple(inputs):
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _export(module, example_inputs, training):
    """The module as a serialized ONNX model, with inputs input0, input1, ... The module's
    state and mode are left as they were (tracing in training mode runs a forward pass that
    would update BatchNorm's running statistics)."""
    import onnx

    inputs = _as_tuple(example_inputs)
    state = {name: value.clone() for name, value in module.state_dict().items()}
    was_training = module.training
    buffer = io.BytesIO()
    mode = torch.onnx.TrainingMode.TRAINING if training else torch.onnx.TrainingMode.EVAL
    try:
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")  # the exporter's notes on num_batches_tracked and the like
            torch.onnx.export(module, inputs, buffer, input_names=[f"input{i}" for i in range(len(inputs))],
                              opset_version=OPSET, training=mode, do_constant_folding=not training)
    except Exception as error:  # torch's exporter raises several types; one kiln.Error names them all
        raise _kiln.Error(f"kiln.torch: module {_what(module)} does not export to ONNX: "
                          f"{type(error).__name__}: {error}".strip()) from error
    finally:
        module.load_state_dict(state)
        module.train(was_training)
    return onnx.load_from_string(buffer.getvalue())


def _import(model, module, what):
    try:
        return _kiln.import_onnx(model.SerializeToString())
    except _kiln.Error as error:
        raise _kiln.Error(f"kiln.torch.{what}: module {_what(module)}: {error}") from error


def _to_numpy(tensor, name):
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(f"{name} is on {tensor.device}; kiln runs on the CPU")
    return tensor.detach().contiguous().numpy()  # a view when it already is contiguous


class CompiledModule:
    """What kiln.torch.compile returns: call it on torch tensors shaped like the example inputs;
    it returns a tensor, or a tuple when the module returns several."""

    def __init__(self, session, inputs, outputs, what):
        self.session, self._inputs, self._outputs, self._what = session, inputs, outputs, what

    def __call__(self, *inputs):
        if len(inputs) != len(self._inputs):
            raise TypeError(f"{self._what} takes {len(self._inputs)} inputs, got {len(inputs)}")
        feeds = {name: _to_numpy(value, name) for name, value in zip(self._inputs, inputs)}
        results = self.session.run(feeds)
        tensors = tuple(torch.from_numpy(results[name]) for name in self._outputs)
        return tensors[0] if len(tensors) == 1 else tensors

    def __repr__(self):
        return f"<kiln.torch.CompiledModule {self._what}: {self.session!r}>"


def compile(module, example_inputs, threads=None, cache_dir=None):
    """Compiles `module`'s forward pass (in eval mode) with kiln for inputs shaped like
    `example_inputs` (a tensor or a tuple of them); returns a CompiledModule."""
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"kiln.torch.compile takes a torch.nn.Module, got {type(module).__name__}")
    model = _export(module, example_inputs, training=False)
    graph = _import(model, module, "compile")
    session = _kiln.Session(graph, threads=threads, cache_dir=cache_dir)
    return CompiledModule(session, [info.name for info in session.inputs], [info.name for info in session.outputs],
                          _what(module))


def _batch_norm_statistics(model):
    """Makes each BatchNorm's new running statistics (training mode) outputs of `model`, as
    torch computes them, and returns the (output, parameter) pairs a training step writes back.

    ONNX's BatchNormalization blends the batch's biased variance into running_var; torch blends
    the unbiased one, var * n / (n - 1) over the n values per channel. So running_var's output is
    the ONNX one rescaled: rv' = out * n / (n - 1) - rv * momentum / (n - 1)."""
    from onnx import TensorProto, helper, shape_inference

    shapes = {info.name: [d.dim_value for d in info.type.tensor_type.shape.dim]
              for info in shape_inference.infer_shapes(model).graph.value_info}
    shapes.update({info.name: [d.dim_value for d in info.type.tensor_type.shape.dim] for info in model.graph.input})
    initializers = {tensor.name: tensor for tensor in model.graph.initializer}
    nodes, writes = [], []
    for node in model.graph.node:
        attributes = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type != "BatchNormalization" or not attributes.get("training_mode"):
            continue
        mean, var = node.input[3], node.input[4]
        if len(node.output) < 3 or mean not in initializers or var not in initializers:
            raise _kiln.Error(f"kiln.torch.train: BatchNormalization node '{node.name}' does not update running "
                              "statistics held as parameters")
        shape = shapes.get(node.input[0])
        if not shape or not all(shape):
            raise _kiln.Error(f"kiln.torch.train: the input of '{node.name}' has no static shape")
        n = int(np.prod(shape)) // shape[1]
        momentum = attributes.get("momentum", 0.9)
        scale, kept = f"{var}.kiln_scale", f"{var}.kiln_kept"
        nodes += [
            helper.make_node("Identity", [node.output[1]], [f"{mean}.new"]),
            helper.make_node("Constant", [], [scale + "_c"], value_float=n / max(n - 1, 1)),
            helper.make_node("Constant", [], [kept + "_c"], value_float=momentum / max(n - 1, 1)),
            helper.make_node("Mul", [node.output[2], scale + "_c"], [scale]),
            helper.make_node("Mul", [var, kept + "_c"], [kept]),
            helper.make_node("Sub", [scale, kept], [f"{var}.new"]),
        ]
        for name, source in ((f"{mean}.new", mean), (f"{var}.new", var)):
            model.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                                    list(initializers[source].dims)))
            writes.append((name, source))
    model.graph.node.extend(nodes)
    return writes


def _loss_name(loss_fn):
    """kiln's loss for `loss_fn`: a torch loss module or function, or kiln's own name ("mean":
    the mean of the output, with no target)."""
    if isinstance(loss_fn, str):
        if loss_fn not in LOSSES:
            raise ValueError(f"unknown loss {loss_fn!r}: one of {', '.join(map(repr, LOSSES))}")
        return loss_fn
    kind = _LOSSES.get(loss_fn) or _LOSSES.get(type(loss_fn))
    if kind is None:
        raise TypeError(f"kiln.torch trains with CrossEntropyLoss, MSELoss or NLLLoss (or their functions, or a kiln "
                        f"loss name), not {getattr(loss_fn, '__name__', type(loss_fn).__name__)}")
    if isinstance(loss_fn, torch.nn.Module):
        if getattr(loss_fn, "reduction", "mean") != "mean":
            raise ValueError(f"kiln.torch trains with reduction='mean', not {loss_fn.reduction!r}")
        if getattr(loss_fn, "weight", None) is not None or getattr(loss_fn, "label_smoothing", 0.0):
            raise ValueError("kiln.torch's losses take no class weights or label smoothing")
    return kind


class Trainer:
    """Trains a torch.nn.Module with a kiln training step compiled for batches shaped like
    `example_inputs` (a tensor or a tuple): step(inputs, target) runs one update and returns the
    loss; write_back() puts the parameters and buffers into the module. `optimizer` is a
    kiln.optim optimizer or a torch.optim one (its hyper-parameters are read, not its state).
    reference=True runs the step on kiln's reference evaluator (exact and slow), for checks."""

    def __init__(self, module, loss_fn, optimizer, example_inputs, threads=None, cache_dir=None, reference=False):
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"kiln.torch.Trainer takes a torch.nn.Module, got {type(module).__name__}")
        self.module = module
        loss = _loss_name(loss_fn)
        if isinstance(optimizer, torch.optim.Optimizer):
            optimizer = _optim.from_torch(optimizer)
        model = _export(module, example_inputs, training=True)
        buffers = _batch_norm_statistics(model)
        graph = _import(model, module, "train")
        frozen = [name for name, p in module.named_parameters() if not p.requires_grad]
        try:
            self.step = compile_training_step(graph, loss, optimizer, buffers=buffers, frozen=frozen or None,
                                              threads=threads, cache_dir=cache_dir, reference=reference)
        except _kiln.Error as error:
            raise _kiln.Error(f"kiln.torch.train: module {_what(module)}: {error}") from error
        # Tracing in training mode ran a forward pass, whose running statistics the exported
        # initializers hold; the module's own state (restored since) is where training starts.
        for name, tensor in module.state_dict().items():
            if name in self.step:
                self.step[name] = tensor.detach().numpy()
        self._inputs = [info.name for info in self.step.inputs if info.name != "target"]
        self._written_steps = 0

    def step_on(self, inputs, target=None):
        """One update on a batch: `inputs` a tensor or tuple of tensors, `target` the labels
        (int64 class indices) or target values (None for a loss without: "mean", "sum").
        Returns the loss before the update."""
        feeds = {name: _to_numpy(value, name) for name, value in zip(self._inputs, _as_tuple(inputs))}
        if target is not None:
            feeds["target"] = _to_numpy(target, "target")
        return self.step.step(feeds)

    def write_back(self):
        """Copies every parameter and buffer the step holds into the module (in place, under
        torch.no_grad) and advances BatchNorm's num_batches_tracked by the steps taken."""
        parameters = self.step.parameters
        with torch.no_grad():
            for name, tensor in self.module.state_dict(keep_vars=True).items():
                if name in parameters:
                    tensor.copy_(torch.from_numpy(parameters[name]))
                elif name.endswith("num_batches_tracked"):
                    tensor += self.step.step_count - self._written_steps
        self._written_steps = self.step.step_count


def train(module, loss_fn, optimizer, batches, threads=None, cache_dir=None, reference=False):
    """Trains `module` on `batches` (an iterable of (inputs, target) pairs, every one shaped as
    the first; target None for a loss that takes none) with `loss_fn` (torch.nn.CrossEntropyLoss,
    MSELoss, NLLLoss or their functions, or kiln's "mean" or "sum" of the output) and
    `optimizer` (kiln.optim or torch.optim), then writes the result into the module.
    Returns the loss of each step."""
    trainer, losses = None, []
    for inputs, target in batches:
        if trainer is None:
            trainer = Trainer(module, loss_fn, optimizer, inputs, threads=threads, cache_dir=cache_dir,
                              reference=reference)
        losses.append(trainer.step_on(inputs, target))
    if trainer is not None:
        trainer.write_back()
    return losses


__all__ = ["compile", "train", "Trainer", "CompiledModule", "OPSET"]
