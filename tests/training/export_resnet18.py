"""PyTorch's side of the ResNet-18 training check (tests/training/ResNet18Training.cpp).

usage: /usr/bin/python3 export_resnet18.py OUT_DIR

Writes, for torchvision's resnet18 with its initial weights (torch.manual_seed(0)) trained in
training mode (BatchNorm on batch statistics) on one random batch of 8 3x224x224 images:

  OUT_DIR/resnet18_train.safetensors  the initial state_dict (parameters and buffers, with
                                      torchvision's names), written by hand: the safetensors
                                      format is an 8-byte length, a JSON header and raw data,
                                      and Debian has no python3-safetensors
  OUT_DIR/resnet18_train.input.npy    the batch (torch.randn after the weights, same seed)
  OUT_DIR/resnet18_train.sgd.losses   the losses of 5 steps of torch.optim.SGD(lr=0.01) with
                                      loss = out.mean(), one per line (before each update)
  OUT_DIR/resnet18_train.buffers.safetensors
                                      the BatchNorm buffers (running_mean, running_var,
                                      num_batches_tracked) after those 5 steps

Each file is written under a temporary name and renamed, the losses file last, so its presence
means the set is complete.
"""
import json
import os
import struct
import sys

import numpy as np
import torch
import torchvision

STEPS, LR, BATCH = 5, 0.01, 8
SAFETENSORS_DTYPES = {torch.float32: 'F32', torch.float64: 'F64', torch.int64: 'I64'}


def write_safetensors(path, tensors):
    """tensors: name -> torch tensor; names sorted, data laid out in that order."""
    header, chunks, offset = {}, [], 0
    for name in sorted(tensors):
        array = tensors[name].detach().contiguous().cpu().numpy()
        data = array.astype(array.dtype.newbyteorder('<'), copy=False).tobytes()
        header[name] = {'dtype': SAFETENSORS_DTYPES[tensors[name].dtype], 'shape': list(array.shape),
                        'data_offsets': [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(',', ':')).encode()
    text += b' ' * (-len(text) % 8)  # the data section starts 8-byte aligned, as the format suggests
    with open(path + '.tmp', 'wb') as out:
        out.write(struct.pack('<Q', len(text)))
        out.write(text)
        for chunk in chunks:
            out.write(chunk)
    os.replace(path + '.tmp', path)


def main():
    if len(sys.argv) != 2:
        sys.exit('usage: export_resnet18.py OUT_DIR')
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    model = torchvision.models.resnet18()
    x = torch.randn(BATCH, 3, 224, 224)
    write_safetensors(os.path.join(out, 'resnet18_train.safetensors'), model.state_dict())
    np.save(os.path.join(out, 'resnet18_train.input.tmp.npy'), x.numpy())
    os.replace(os.path.join(out, 'resnet18_train.input.tmp.npy'), os.path.join(out, 'resnet18_train.input.npy'))

    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad()
        loss = model(x).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    buffers = {name: tensor for name, tensor in model.state_dict().items()
               if name.endswith(('.running_mean', '.running_var', '.num_batches_tracked'))}
    write_safetensors(os.path.join(out, 'resnet18_train.buffers.safetensors'), buffers)
    path = os.path.join(out, 'resnet18_train.sgd.losses')
    with open(path + '.tmp', 'w') as file:
        file.writelines(f'{loss:.9g}\n' for loss in losses)
    os.replace(path + '.tmp', path)
    print('resnet18 sgd', ' '.join(f'{loss:.9g}' for loss in losses), flush=True)


if __name__ == '__main__':
    main()
