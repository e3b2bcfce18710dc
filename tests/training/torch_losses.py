"""PyTorch's loss sequences for kiln's training checks on the seed ONNX exports.

usage: /usr/bin/python3 torch_losses.py SEEDS_DIR NAME[,NAME...]

For each seed NAME (mlp_b1024, lenet5_b64), exported by scripts/export-seeds.sh into SEEDS_DIR
as NAME.onnx + NAME.input.npy, this rebuilds the same torch module (the peers folder's models.py,
../shared/peers or $KILN_PEERS_DIR), loads the ONNX initializers into it by name (the exporter
keeps state_dict names), and trains it on the exported input:

  SEEDS_DIR/NAME.sgd.losses   loss = out.mean(), 5 steps of torch.optim.SGD(lr=0.01)
  SEEDS_DIR/NAME.adam.losses  loss = out.mean(), 2 steps of torch.optim.Adam(lr=0.001): the
                              second loss is the first Adam update's effect
  SEEDS_DIR/NAME.ce.losses    loss = cross_entropy(out, labels), 3 steps of
                              torch.optim.SGD(lr=0.01, momentum=0.9), with the labels
  SEEDS_DIR/NAME.labels.npy   sample i's class: i % 10 (i64)

one loss per line (the loss each step computes before its update, as kiln-run prints it).
Each file is written whole (renamed into place), so a concurrent reader never sees half a file.
"""
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch

here = os.path.dirname(os.path.abspath(__file__))
peers = os.environ.get('KILN_PEERS_DIR', os.path.join(here, '..', '..', '..', 'shared', 'peers'))
sys.path.insert(0, peers)
import models  # noqa: E402  (the seed workloads, as export_onnx.py builds them)

torch.set_num_threads(1)
torch.use_deterministic_algorithms(True)

# The runs checked: (file suffix, number of steps, optimizer factory, whether the loss is
# cross-entropy against the labels rather than the output's mean).
RUNS = [
    ('sgd', 5, lambda params: torch.optim.SGD(params, lr=0.01), False),
    ('adam', 2, lambda params: torch.optim.Adam(params, lr=0.001), False),
    ('ce', 3, lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9), True),
]


def load_module(seeds, name):
    """The workload's module with the ONNX export's initializers as its parameters."""
    module, _ = models.workloads()[name]
    graph = onnx.load(os.path.join(seeds, name + '.onnx')).graph
    initializers = {t.name: torch.from_numpy(onnx.numpy_helper.to_array(t).copy()) for t in graph.initializer}
    state = module.state_dict()
    missing = [key for key in state if key not in initializers]
    if missing:
        sys.exit(f'torch_losses.py: {name}.onnx lacks initializers for {missing}')
    module.load_state_dict({key: initializers[key] for key in state})
    return module


def train(seeds, name, steps, make_optimizer, labels):
    module = load_module(seeds, name)
    module.train()
    x = torch.from_numpy(np.load(os.path.join(seeds, name + '.input.npy')))
    optimizer = make_optimizer(module.parameters())
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        out = module(x)
        loss = torch.nn.functional.cross_entropy(out, labels) if labels is not None else out.mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def main():
    if len(sys.argv) != 3:
        sys.exit('usage: torch_losses.py SEEDS_DIR NAME[,NAME...]')
    seeds, names = sys.argv[1], sys.argv[2].split(',')
    for name in names:
        batch = np.load(os.path.join(seeds, name + '.input.npy'), mmap_mode='r').shape[0]
        labels = np.arange(batch, dtype=np.int64) % 10
        np.save(os.path.join(seeds, name + '.labels.tmp.npy'), labels)
        os.replace(os.path.join(seeds, name + '.labels.tmp.npy'), os.path.join(seeds, name + '.labels.npy'))
        for suffix, steps, make_optimizer, cross_entropy in RUNS:
            losses = train(seeds, name, steps, make_optimizer, torch.from_numpy(labels) if cross_entropy else None)
            path = os.path.join(seeds, f'{name}.{suffix}.losses')
            with open(path + '.tmp', 'w') as out:
                out.writelines(f'{loss:.9g}\n' for loss in losses)
            os.replace(path + '.tmp', path)
            print(name, suffix, ' '.join(f'{loss:.9g}' for loss in losses), flush=True)


if __name__ == '__main__':
    main()
