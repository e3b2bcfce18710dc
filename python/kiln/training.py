"""Training from Python: kiln.compile_training_step compiles a graph's forward pass, a loss,
its backward pass and an optimizer's update into one kiln.TrainingStep (runtime/TrainingStep.h),
and kiln.train runs kiln's training loop (runtime/Trainer.h) over numpy arrays or .npy files.

    g = kiln.GraphBuilder("mlp")
    model = kiln.nn.Sequential(kiln.nn.Linear(4, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 3))
    graph = g.finish({"logits": model(g.input("x", "f32", [32, 4]))})
    step = kiln.compile_training_step(graph, loss="cross_entropy", optimizer=kiln.optim.SGD(0.1))
    loss = step.step({"x": x_batch, "target": label_batch})     # one update
    history = kiln.train(step, {"x": x_all, "target": labels_all}, epochs=3, shuffle=True)

The step was compiled for one batch size (its inputs' first dim); the loop reads the dataset in
batches of that size (times `accumulate`, gradients summed over micro-batches, on a step
compiled with split=True). A graph whose batch is a symbol (g.input("x", "f32", [g.dim("N"), 4]),
or an ONNX model's dynamic batch) compiles once into a step that takes batches of any size, in
tiles of `batch_tile` rows; kiln.train then takes `batch_size`, and a short last batch as it is.
"""
from kiln import _kiln
from kiln import optim
from kiln.progress import epoch_line, make_bar

LOSSES = ("mean", "sum", "mse", "cross_entropy", "nll", "value")


def compile_training_step(graph, loss="mean", optimizer=None, *, output=None, target_name="target",
                          ignore_index=None, params=None, frozen=None, buffers=None, split=False, reference=False,
                          batch_tile=32, threads=None, cache_dir=None):
    """Compiles a training step of `graph` (a kiln.Graph: built with kiln.GraphBuilder, or
    kiln.import_onnx of a model) that starts from the graph's parameter values.

    loss: "mean", "sum" or "value" of an output; "mse" against a target; "cross_entropy" or
        "nll" of [N, C] logits (log-probabilities) against [N] int64 class labels. The target
        is the input `target_name`. `output` picks the output (its index or name; default 0).
        `ignore_index`: labels of that value add nothing (torch's ignore_index).
    optimizer: kiln.optim.SGD, Adam or AdamW (default SGD(lr=1e-3)).
    params / frozen: names of the parameters to train / not to train (default: every float
        parameter the loss depends on); a frozen parameter's backward is not built at all.
    buffers: (output name, parameter name) pairs written back on every step, beyond those the
        graph's builder recorded (BatchNorm's running statistics in training mode).
    split: compile gradients and update apart, as gradient accumulation needs (kiln.train's
        accumulate > 1). reference: run on the reference evaluator (exact and slow).
    batch_tile: for a graph whose one symbol is its batch (its samples computed apart: no
        BatchNorm over the batch), the rows each tile of a batch computes; the step takes
        batches of any size, each update the one a step compiled for that size would make.
    """
    if not isinstance(graph, _kiln.Graph):
        raise TypeError(f"compile_training_step takes a kiln.Graph, got {type(graph).__name__}")
    if loss not in LOSSES and loss.replace("-", "_") not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}: one of {', '.join(map(repr, LOSSES))}")
    return _kiln._compile_training_step(graph, loss, optimizer if optimizer is not None else optim.SGD(1e-3),
                                        output=output, target_name=target_name, ignore_index=ignore_index,
                                        params=params, frozen=frozen, buffers=buffers, split=split,
                                        reference=reference, batch_tile=batch_tile, threads=threads,
                                        cache_dir=cache_dir)


def train(step, data, *, epochs=1, shuffle=False, seed=0, validation=None, lr_schedule="constant", accumulate=1,
          batch_size=None, drop_last=False, save_every=0, save_path=None, stop_after=0, progress=True,
          data_parallel=None):
    """Trains `step` for `epochs` over `data` ({input name: array}, the target too; the first
    dim of every array is the sample dim; numpy arrays, copied once, or paths of .npy files,
    memory-mapped) and returns one dict per epoch: epoch, loss (the epoch's mean training loss),
    samples, seconds, val_loss and val_accuracy (with `validation`, data as `data`; accuracy
    for cross_entropy and nll; else None).

    shuffle/seed: each epoch's order, a function of (seed, epoch) alone. lr_schedule:
    "constant", "step:K:G" or "cosine[:WARMUP]" over the run's updates. A short last batch is
    used when the loss ignores a label value (ignore_index) or the step takes any batch, else
    dropped (drop_last: always). batch_size: samples per update, for a step over any batch
    (a static step's is its batch times `accumulate` and the ranks).
    save_every/save_path: a checkpoint every K updates and at the end; a step loaded from one
    (step.load) continues the run exactly. stop_after: stop after that many updates.
    progress: a progress bar (tqdm when importable) and one line per epoch.
    data_parallel: a kiln.DataParallel group (the script run under mpirun, the step split):
    every rank trains on its share of each update, the data being the whole dataset on every
    rank; rank 0 alone shows progress.
    """
    if not isinstance(step, _kiln.TrainingStep):
        raise TypeError(f"kiln.train takes a kiln.TrainingStep, got {type(step).__name__}")
    if data_parallel is not None and not isinstance(data_parallel, _kiln.DataParallel):
        raise TypeError(f"kiln.train: data_parallel takes a kiln.DataParallel, got {type(data_parallel).__name__}")
    bar = make_bar() if progress and (data_parallel is None or data_parallel.rank == 0) else None
    return _kiln._train(step, dict(data), epochs=epochs, shuffle=shuffle, seed=seed, accumulate=accumulate,
                        batch_size=batch_size or 0, drop_last=drop_last, lr_schedule=lr_schedule, save_every=save_every, save_path=save_path,
                        stop_after=stop_after, validation=None if validation is None else dict(validation),
                        on_progress=bar.update if bar else None,
                        on_epoch=(lambda report: bar.end_epoch(epoch_line(report, epochs))) if bar else None,
                        data_parallel=data_parallel)


__all__ = ["compile_training_step", "train"]
