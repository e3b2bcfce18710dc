"""The toy classifier the training tests share (test_training.py, data_parallel_check.py): four
Gaussian blobs in 8 dimensions and a small MLP compiled into a training step."""
import numpy as np

import kiln


def classifier_data(samples, seed):
    """Four Gaussian blobs in 8 dimensions: separable, so a linear model learns them."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, samples).astype(np.int64)
    centers = np.eye(4, 8, dtype=np.float32) * 4
    return {"x": (centers[labels] + rng.standard_normal((samples, 8))).astype(np.float32), "target": labels}


def classifier_step(batch=16, threads=2, **options):
    """8 -> 16 -> 4 with ReLU, cross-entropy, SGD(0.1, momentum 0.9), from kiln.nn's seed 0,
    at `batch` rows (a number, or a symbol's name: any batch); options go to
    kiln.compile_training_step (split=True, ...)."""
    kiln.nn.manual_seed(0)
    g = kiln.GraphBuilder("blobs")
    model = kiln.nn.Sequential(kiln.nn.Linear(8, 16), kiln.nn.ReLU(), kiln.nn.Linear(16, 4))
    graph = g.finish({"logits": model(g.input("x", "f32", [batch, 8]))})
    return kiln.compile_training_step(graph, "cross_entropy", kiln.optim.SGD(0.1, momentum=0.9), threads=threads,
                                      **options)
