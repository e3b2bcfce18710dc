"""PyTorch eager inference (no_grad) on one zoo model, fed its saved inputs: median ms of REPS
runs after 3 warm-ups.  usage: torch_zoo.py THREADS REPS NAME ZOO_DIR"""
import os
import statistics
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import models  # noqa: E402

threads, reps, name, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
torch.set_num_threads(threads)
entry = models.zoo()[name]
torch.manual_seed(0)
model = entry.build().eval()
inputs = []
while os.path.exists(f'{folder}/{name}.in{len(inputs)}.npy'):
    inputs.append(torch.from_numpy(np.load(f'{folder}/{name}.in{len(inputs)}.npy')))
with torch.no_grad():
    for _ in range(3):
        model(*inputs)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        model(*inputs)
        times.append((time.perf_counter() - start) * 1e3)
print(f'torch_ms {statistics.median(times):.3f}')
