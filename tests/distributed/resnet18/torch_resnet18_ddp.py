"""PyTorch's side of the ResNet-18 data-parallel and freezing checks (ResNet18DataParallel.cpp).

usage: /usr/bin/python3 torch_resnet18_ddp.py OUT_DIR

torchvision's resnet18 with 10 classes and its initial weights (torch.manual_seed(0)), in
training mode (BatchNorm on each batch's own statistics), on 40 random 3x64x64 images with
random labels (64x64 rather than 224x224 keeps the test within a minute; every layer and every
BatchNorm is there, at 2x2 in the last stage), trained with cross-entropy and
SGD(lr=0.002, momentum=0.9) for 5 updates of 8 samples, in order. (kiln's losses drifted from
PyTorch's here, by 3e-3 at update 5, until training steps stopped computing convolutions by
Winograd, whose rounding BatchNorm over 4 samples and ReLU's kinks amplified; the test ran at
lr 0.0002 meanwhile.) The check tells local from global BatchNorm statistics (the first update's
losses differ by 2e-3) and a gradient sum from a mean.

  OUT_DIR/resnet18_ddp.safetensors     the initial state_dict (parameters and buffers)
  OUT_DIR/resnet18_ddp_x.npy, OUT_DIR/resnet18_ddp_labels.npy
                                       the 40 samples
  OUT_DIR/resnet18_ddp.ddp.losses      DistributedDataParallel over gloo, 2 processes, each on
                                       its contiguous half of every batch (4 samples: local
                                       BatchNorm statistics), one thread each: the loss of each
                                       update, the mean of the two ranks' losses
  OUT_DIR/resnet18_ddp.frozen.losses   one process, every parameter but fc's with
                                       requires_grad=False: the loss of each update

Files are written under temporary names and renamed, the frozen losses last, so their presence
means the set is complete.
"""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'training'))
from export_resnet18 import write_safetensors  # noqa: E402

UPDATES, BATCH, RANKS, SIZE, CLASSES, LR, MOMENTUM = 5, 8, 2, 64, 10, 0.002, 0.9


def initial():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=CLASSES)
    x = torch.randn(UPDATES * BATCH, 3, SIZE, SIZE)
    labels = torch.randint(0, CLASSES, (UPDATES * BATCH,))
    return model, x, labels


def write_losses(path, losses):
    with open(path + '.tmp', 'w') as file:
        file.writelines(f'{loss:.9g}\n' for loss in losses)
    os.replace(path + '.tmp', path)


def ddp_rank(rank, store, out):
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group('gloo', init_method=f'file://{store}', rank=rank, world_size=RANKS)
    model, x, labels = initial()
    model.train()
    ddp = torch.nn.parallel.DistributedDataParallel(model)  # broadcast_buffers: rank 0's running stats
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR, momentum=MOMENTUM)
    share = BATCH // RANKS
    losses = []
    for update in range(UPDATES):
        begin = update * BATCH + rank * share
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x[begin:begin + share]), labels[begin:begin + share])
        loss.backward()  # DDP averages the gradients over the ranks
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total.item() / RANKS)
    if rank == 0:
        write_losses(os.path.join(out, 'resnet18_ddp.ddp.losses'), losses)
        print('resnet18 ddp', ' '.join(f'{loss:.9g}' for loss in losses), flush=True)
    dist.destroy_process_group()


def frozen(out):
    torch.use_deterministic_algorithms(True)
    model, x, labels = initial()
    model.train()
    for name, parameter in model.named_parameters():
        parameter.requires_grad = name.startswith('fc.')
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=LR, momentum=MOMENTUM)
    losses = []
    for update in range(UPDATES):
        begin = update * BATCH
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x[begin:begin + BATCH]), labels[begin:begin + BATCH])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    write_losses(os.path.join(out, 'resnet18_ddp.frozen.losses'), losses)
    print('resnet18 frozen', ' '.join(f'{loss:.9g}' for loss in losses), flush=True)


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: torch_resnet18_ddp.py OUT_DIR')
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    model, x, labels = initial()
    write_safetensors(os.path.join(out, 'resnet18_ddp.safetensors'), model.state_dict())
    for name, array in (('x', x.numpy()), ('labels', labels.numpy())):
        np.save(os.path.join(out, f'resnet18_ddp_{name}.tmp.npy'), array)
        os.replace(os.path.join(out, f'resnet18_ddp_{name}.tmp.npy'), os.path.join(out, f'resnet18_ddp_{name}.npy'))
    with tempfile.TemporaryDirectory() as scratch:
        mp.spawn(ddp_rank, args=(os.path.join(scratch, 'store'), out), nprocs=RANKS, join=True)
    frozen(out)


if __name__ == '__main__':
    main()
