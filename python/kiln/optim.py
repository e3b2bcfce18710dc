"""Optimizers for kiln.compile_training_step, with torch.optim's names, arguments and defaults.

    step = kiln.compile_training_step(graph, loss="cross_entropy",
                                      optimizer=kiln.optim.SGD(0.01, momentum=0.9))

They only describe the update: the compiled step applies it (passes/autodiff/TrainingGraph.h),
so the optimizer's state lives in the step (TrainingStep.optimizer_state). from_torch reads a
torch.optim optimizer's hyper-parameters, so that a torch training script's optimizer can be
handed to kiln.torch.train as it is.
"""


def _check_lr(lr):
    if not lr >= 0:  # also refuses NaN
        raise ValueError(f"lr must be a number >= 0, got {lr!r}")
    return float(lr)


class SGD:
    """torch.optim.SGD: p -= lr * (g + weight_decay * p), with momentum (and dampening, nesterov)."""
    kind = "sgd"

    def __init__(self, lr, momentum=0.0, weight_decay=0.0, nesterov=False, dampening=0.0):
        self.lr = _check_lr(lr)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.nesterov, self.dampening = bool(nesterov), float(dampening)

    def __repr__(self):
        return (f"kiln.optim.SGD(lr={self.lr}, momentum={self.momentum}, weight_decay={self.weight_decay}, "
                f"nesterov={self.nesterov}, dampening={self.dampening})")


class Adam:
    """torch.optim.Adam: weight_decay is an L2 penalty added to the gradient."""
    kind = "adam"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        self.lr = _check_lr(lr)
        self.beta1, self.beta2 = (float(b) for b in betas)
        self.eps, self.weight_decay = float(eps), float(weight_decay)

    def __repr__(self):
        return (f"kiln.optim.{type(self).__name__}(lr={self.lr}, betas=({self.beta1}, {self.beta2}), eps={self.eps}, "
                f"weight_decay={self.weight_decay})")


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay, p *= 1 - lr * weight_decay (default 1e-2)."""
    kind = "adamw"

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(lr, betas, eps, weight_decay)


def from_torch(optimizer):
    """The kiln optimizer with the hyper-parameters of a torch.optim SGD, Adam or AdamW (of its
    first parameter group; kiln trains every parameter with one set). TypeError for another."""
    kind = type(optimizer).__name__
    group = optimizer.param_groups[0]
    if kind == "SGD":
        return SGD(group["lr"], group["momentum"], group["weight_decay"], group["nesterov"], group["dampening"])
    if kind in ("Adam", "AdamW"):
        if group.get("amsgrad"):
            raise TypeError(f"torch.optim.{kind} with amsgrad=True has no kiln equivalent")
        return (Adam if kind == "Adam" else AdamW)(group["lr"], group["betas"], group["eps"], group["weight_decay"])
    raise TypeError(f"kiln trains with SGD, Adam or AdamW, not torch.optim.{kind}")


__all__ = ["SGD", "Adam", "AdamW", "from_torch"]
