"""Export zoo models to ONNX, each with its seeded inputs and PyTorch's output beside it.

usage: python3 export.py OUT NAME[,NAME...]|all|small
writes OUT/NAME.onnx, OUT/NAME.in<i>.npy (one per input, in input order; the ONNX inputs are
named in0, in1, ...) and OUT/NAME.out.npy. A model whose files all exist is kept. Weights and
inputs come from torch.manual_seed(0), so every export of a model is the same.
"""
import os
import sys

import numpy as np
import torch

import models


def make_inputs(specs):
    tensors = []
    for spec in specs:
        if spec[0] == 'i64':
            _, shape, high = spec
            tensors.append(torch.randint(0, high, shape, dtype=torch.int64))
        else:
            tensors.append(torch.randn(*spec))
    return tensors


def randomize_norms(model):
    """Fresh BatchNorm layers are the identity in eval mode; random statistics and affine
    parameters make the check exercise them (scales near 1 keep activations bounded)."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            with torch.no_grad():
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                if m.affine:
                    m.weight.uniform_(0.8, 1.2)
                    m.bias.uniform_(-0.1, 0.1)


def export(out, name, entry):
    files = [f'{out}/{name}.onnx', f'{out}/{name}.out.npy'] + [f'{out}/{name}.in{i}.npy' for i in range(len(entry.inputs))]
    if all(os.path.exists(f) for f in files):
        return
    torch.manual_seed(0)
    model = entry.build()
    randomize_norms(model)
    model.eval()
    inputs = make_inputs(entry.inputs)
    with torch.no_grad():
        y = model(*inputs)
    names = [f'in{i}' for i in range(len(inputs))]
    tmp = f'{out}/.{name}.onnx'
    torch.onnx.export(model, tuple(inputs), tmp, opset_version=17, input_names=names, output_names=['out'],
                      do_constant_folding=True)
    for i, x in enumerate(inputs):
        np.save(f'{out}/{name}.in{i}.npy', x.numpy())
    np.save(f'{out}/{name}.out.npy', y.numpy())
    os.replace(tmp, f'{out}/{name}.onnx')
    print('exported', name, flush=True)


def main():
    out, which = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    zoo = models.zoo()
    if which == 'all':
        names = list(zoo)
    elif which == 'small':
        names = [n for n, e in zoo.items() if e.small]
    else:
        names = which.split(',')
    unknown = [n for n in names if n not in zoo]
    if unknown:
        sys.exit(f'export.py: unknown zoo model(s) {", ".join(unknown)}')
    torch.set_num_threads(1)
    for name in names:
        export(out, name, zoo[name])


if __name__ == '__main__':
    main()
