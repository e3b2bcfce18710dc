"""kiln.train(..., data_parallel=kiln.DataParallel()) under mpirun -np 2 (CTest python/data-parallel).

Every rank trains a split step of batch 8 on its half of each update of 16 samples (SGD with
momentum, 2 epochs, shuffled), with the ranks' parameters compared after every update
(check_identical). Rank 0 then trains the same model in this process alone, a whole step of
batch 16 on the same data and order, and requires the data-parallel parameters to be those
within rtol 1e-5 (the sums over ranks and over one batch round differently). Exits non-zero,
with a line saying what differed, otherwise.
"""
import sys

import numpy as np

import kiln


def step_of(batch, split):
    kiln.nn.manual_seed(0)
    g = kiln.GraphBuilder("blobs")
    model = kiln.nn.Sequential(kiln.nn.Linear(8, 32), kiln.nn.ReLU(), kiln.nn.Linear(32, 4))
    graph = g.finish({"logits": model(g.input("x", "f32", [batch, 8]))})
    return kiln.compile_training_step(graph, "cross_entropy", kiln.optim.SGD(0.1, momentum=0.9), threads=1,
                                      split=split)


def data():
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 4, 96).astype(np.int64)
    centers = np.eye(4, 8, dtype=np.float32) * 3
    return {"x": (centers[labels] + rng.standard_normal((96, 8))).astype(np.float32), "target": labels}


def main():
    group = kiln.DataParallel(timeout=60, check_identical=True)
    if group.size != 2:
        sys.exit(f"data_parallel_check.py: run under mpirun -np 2, got {group.size} rank(s)")
    shared = step_of(8, split=True)
    history = kiln.train(shared, data(), epochs=2, shuffle=True, seed=3, progress=False, data_parallel=group)
    if shared.step_count != 12 or group.identical_checks != 12:
        sys.exit(f"rank {group.rank}: {shared.step_count} updates and {group.identical_checks} identity checks, "
                 "expected 12 of each")
    if group.rank != 0:
        return
    alone = step_of(16, split=False)
    want = kiln.train(alone, data(), epochs=2, shuffle=True, seed=3, progress=False)
    for got, expected in zip(history, want):
        if not np.isclose(got["loss"], expected["loss"], rtol=1e-5):
            sys.exit(f"epoch {got['epoch']}: mean loss {got['loss']} on 2 ranks, {expected['loss']} in one process")
    for name in alone.trained_parameters:
        if not np.allclose(shared[name], alone[name], rtol=1e-5, atol=1e-6):
            worst = np.abs(shared[name] - alone[name]).max()
            sys.exit(f"{name}: 2 ranks and one process differ by up to {worst:.3g}")
    print(f"2 ranks match one process: {len(alone.trained_parameters)} parameters after 12 updates, "
          f"epoch losses {[round(r['loss'], 6) for r in history]}")


if __name__ == "__main__":
    main()
