"""kiln.train(..., data_parallel=kiln.DataParallel()) under mpirun -np 2 (CTest python/data-parallel).

Every rank trains a split step of batch 8 (blobs.py's classifier) on its half of each update of 16 samples (SGD with
momentum, 2 epochs, shuffled), with the ranks' parameters compared after every update
(check_identical). Rank 0 then trains the same model in this process alone, a whole step of
batch 16 on the same data and order, and requires the data-parallel parameters to be those
within rtol 1e-5 (the sums over ranks and over one batch round differently). The same for a
step over any batch (batch "N" in tiles of 8), whose short last batch each rank takes its share
of as it is. Exits non-zero, with a line saying what differed, otherwise.
"""
import sys

import numpy as np

import kiln
from blobs import classifier_data, classifier_step


def main():
    group = kiln.DataParallel(timeout=60, check_identical=True)
    if group.size != 2:
        sys.exit(f"data_parallel_check.py: run under mpirun -np 2, got {group.size} rank(s)")
    shared = classifier_step(8, threads=1, split=True)
    history = kiln.train(shared, classifier_data(96, 5), epochs=2, shuffle=True, seed=3, progress=False,
                         data_parallel=group)
    if shared.step_count != 12 or group.identical_checks != 12:
        sys.exit(f"rank {group.rank}: {shared.step_count} updates and {group.identical_checks} identity checks, "
                 "expected 12 of each")
    any_batch(group)
    if group.rank != 0:
        return
    alone = classifier_step(16, threads=1)
    want = kiln.train(alone, classifier_data(96, 5), epochs=2, shuffle=True, seed=3, progress=False)
    for got, expected in zip(history, want):
        if not np.isclose(got["loss"], expected["loss"], rtol=1e-5):
            sys.exit(f"epoch {got['epoch']}: mean loss {got['loss']} on 2 ranks, {expected['loss']} in one process")
    for name in alone.trained_parameters:
        if not np.allclose(shared[name], alone[name], rtol=1e-5, atol=1e-6):
            worst = np.abs(shared[name] - alone[name]).max()
            sys.exit(f"{name}: 2 ranks and one process differ by up to {worst:.3g}")
    print(f"2 ranks match one process: {len(alone.trained_parameters)} parameters after 12 updates, "
          f"epoch losses {[round(r['loss'], 6) for r in history]}")


def any_batch(group):
    """A step over batch "N" (tiles of 8) on 2 ranks, updates of 16 over 100 samples: each rank
    takes its share of every batch, the short last one (4 samples, 2 each) as it is; rank 0
    then trains it alone and the two must agree."""
    shared = classifier_step("N", threads=1, batch_tile=8)
    history = kiln.train(shared, classifier_data(100, 6), batch_size=16, epochs=1, shuffle=True, seed=4,
                         progress=False, data_parallel=group)
    if shared.step_count != 7:
        sys.exit(f"rank {group.rank}: {shared.step_count} updates of any batch, expected 7")
    if group.rank != 0:
        return
    alone = classifier_step("N", threads=1, batch_tile=8)
    want = kiln.train(alone, classifier_data(100, 6), batch_size=16, epochs=1, shuffle=True, seed=4, progress=False)
    if history[0]["samples"] != 100 or not np.isclose(history[0]["loss"], want[0]["loss"], rtol=1e-5):
        sys.exit(f"any batch: {history[0]} on 2 ranks, {want[0]} in one process")
    for name in alone.trained_parameters:
        if not np.allclose(shared[name], alone[name], rtol=1e-5, atol=1e-6):
            sys.exit(f"any batch: {name}: 2 ranks and one process differ by up to "
                     f"{np.abs(shared[name] - alone[name]).max():.3g}")
    print("2 ranks match one process over any batch: 100 samples in 7 updates of 16")


if __name__ == "__main__":
    main()
