"""PyTorch eager CPU inference only: median ms of one forward pass under no_grad, timed as
../shared/peers/torch_bench.py times it (2 warm-up runs, then the median of 10), without its
training step, which takes most of that script's time on the large workloads.

usage: python3 torch_infer.py PEERS_DIR THREADS NAME[,NAME...]
Unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for this command, or OpenBLAS runs slow kernels.
"""
import statistics
import sys
import time

sys.path.insert(0, sys.argv[1])
import torch  # noqa: E402
import models  # noqa: E402  (the seed workloads, from the peers folder)

torch.set_num_threads(int(sys.argv[2]))
only = sys.argv[3].split(",")
for name, (module, shape) in models.workloads().items():
    if name not in only:
        continue
    torch.manual_seed(0)
    x = torch.randn(*shape)
    module.eval()
    times = []
    with torch.no_grad():
        module(x), module(x)
        for _ in range(10):
            start = time.perf_counter()
            module(x)
            times.append(time.perf_counter() - start)
    print(f"{name:22s} infer_ms {statistics.median(times) * 1e3:9.2f}", flush=True)
