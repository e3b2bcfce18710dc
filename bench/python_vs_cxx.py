#!/usr/bin/env python3
"""What running a model through kiln's Python package costs against kiln-run --bench (the C++
runtime alone), on a whole model: ResNet-50 by default (issue 25 asks for Python within 2%).

usage: /usr/bin/python3 bench/python_vs_cxx.py [MODEL.onnx] [--kiln-bin build] [--threads 1]
                                               [--runs 20] [--rounds 5]

Without MODEL, torchvision's ResNet-50 (weights=None, batch 1, 3x224x224) is exported to a
temporary ONNX file. Each round times `kiln-run MODEL --bench RUNS` (its median_ms) and then
the same model in a fresh Python process (kiln.Session(MODEL).run, median of RUNS after a
warm-up run), both on the same thread count and compile cache; the figure is the median over
rounds of Python's median over kiln-run's. Rounds interleave the two, so the machine's drift
(it is shared) skews a round rather than one side. Not a timed test: `make bench` territory.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

PYTHON_RUN = r"""
import sys, time, statistics, numpy as np, kiln
session = kiln.Session(sys.argv[1], threads=int(sys.argv[2]))
feeds = {i.name: np.random.default_rng(0).standard_normal(i.shape).astype(i.dtype) for i in session.inputs}
session.run(feeds)  # the warm-up, as kiln-run's first run
times = []
for _ in range(int(sys.argv[3])):
    start = time.perf_counter(); session.run(feeds); times.append(time.perf_counter() - start)
print("median_ms", statistics.median(times) * 1000)
"""


def export_resnet50(folder):
    import torch
    import torchvision

    path = os.path.join(folder, "resnet50_b1.onnx")
    torch.onnx.export(torchvision.models.resnet50(weights=None).eval(), torch.randn(1, 3, 224, 224), path,
                      input_names=["x"], output_names=["y"], opset_version=15)
    return path


def median_ms(command, env=None):
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    match = re.search(r"^median_ms\s+([0-9.]+)", out, re.M)
    if not match:
        sys.exit(f"python_vs_cxx.py: no median_ms in the output of {' '.join(command)}:\n{out}")
    return float(match.group(1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", nargs="?")
    parser.add_argument("--kiln-bin", default=os.path.join(os.path.dirname(__file__), "..", "build"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=os.path.join(args.kiln_bin, "python"))
    with tempfile.TemporaryDirectory(prefix="kiln-python-vs-cxx.") as folder:
        model = args.model or export_resnet50(folder)
        ratios = []
        for round_index in range(args.rounds):
            cxx = median_ms([os.path.join(args.kiln_bin, "kiln-run"), model, "--threads", str(args.threads),
                             "--bench", str(args.runs)], env)
            python = median_ms([sys.executable, "-c", PYTHON_RUN, model, str(args.threads), str(args.runs)], env)
            ratios.append(python / cxx)
            print(f"round {round_index + 1}: kiln-run {cxx:.3f} ms, Python {python:.3f} ms ({python / cxx:.3f}x)",
                  flush=True)
    ratio = statistics.median(ratios)
    print(f"{os.path.basename(model)}: Python / kiln-run = {ratio:.3f} (median of {args.rounds} rounds; "
          f"{'within' if ratio <= 1.02 else 'beyond'} 2%)")


if __name__ == "__main__":
    main()
