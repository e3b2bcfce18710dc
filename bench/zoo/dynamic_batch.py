"""Shapes that vary (issue 26): zoo models exported with a symbolic batch, compiled once by kiln
and run at batch sizes a server receives, against kiln's static compile at each size and ONNX
Runtime running the same dynamic model, in one run.

usage: python3 dynamic_batch.py --kiln-bin BUILD [--out DIR] [--models resnet50,gpt2_s64,...]
                                [--sizes 1,2,3,5,8,13,32] [--threads 1,2] [--reps N]

Per model and thread count:
  - kiln dynamic: `kiln-compile` once (a fresh compile cache, so the compile is real) writes one
    MODEL.so for every batch; `kiln-run MODEL.so --input ...` times each size (median of REPS);
  - kiln static: `kiln-run MODEL.onnx --input ...` at each size (the batch bound, then compiled
    for that size: the compile kiln did per size before, cached on disk after its first run);
  - ORT: one session on the dynamic model, every size in turn (bench/zoo/ort_sweep.js);
  - the sweep, as a server sees it: one process opening the ONNX model (kiln.Session: import,
    compile into a fresh cache, load) and running every size (a first run and REPS timed runs
    each), against ORT's session and the same runs.
Every size's kiln output is checked against the static compile's (rtol 1e-4). Prints a markdown
table per model.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def export_dynamic(out, name):
    """NAME_dyn.onnx with the batch of its one input and output named N."""
    import torch
    import export
    import models
    path = f'{out}/{name}_dyn.onnx'
    if os.path.exists(path):
        return path
    entry = models.zoo()[f'{name}_b1']  # the batch-1 entry; the export makes its batch symbolic
    torch.manual_seed(0)
    model = entry.build()
    export.randomize_norms(model)
    model.eval()
    inputs = export.make_inputs(entry.inputs)
    tmp = f'{out}/.{name}_dyn.onnx'
    names = [f'in{i}' for i in range(len(inputs))]
    axes = {n: {0: 'N'} for n in names + ['out']}
    torch.onnx.export(model, tuple(inputs), tmp, opset_version=17, input_names=names, output_names=['out'],
                      dynamic_axes=axes, do_constant_folding=True)
    os.replace(tmp, path)
    return path


def make_inputs(out, name, n, rng):
    """NAME_x<n>_<i>.npy per input at batch n, as the zoo entry declares them (float, or int64
    token ids below their bound)."""
    import models
    paths = []
    for i, spec in enumerate(models.zoo()[f'{name}_b1'].inputs):
        path = f'{out}/{name}_x{n}_{i}.npy'
        if not os.path.exists(path):
            if spec[0] == 'i64':
                _, shape, high = spec
                np.save(path, rng.integers(0, high, [n] + list(shape[1:])).astype(np.int64))
            else:
                np.save(path, rng.standard_normal([n] + list(spec[1:])).astype(np.float32))
        paths.append(path)
    return paths


def field(text, key):
    m = re.search(rf'^{key} (\S+)', text, re.M)
    if not m:
        raise RuntimeError(f'no {key} in:\n{text[-2000:]}')
    return float(m.group(1))


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f'{" ".join(cmd)} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}')
    return p.stdout + p.stderr


SWEEP = r'''
import sys, time, numpy as np, kiln
model, threads, reps, paths = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
start = time.perf_counter()
session = kiln.Session(model, threads=threads)
names = [info.name for info in session.inputs]
for group in paths:
    feeds = {name: np.load(path) for name, path in zip(names, group.split(','))}
    session.run(feeds)
    for _ in range(reps):
        session.run(feeds)
print('sweep_ms %.1f' % ((time.perf_counter() - start) * 1e3))
'''


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--kiln-bin', required=True)
    parser.add_argument('--out', default=None)
    parser.add_argument('--models', default='resnet50,mobilenet_v2')
    parser.add_argument('--sizes', default='1,2,3,5,8,13,32')
    parser.add_argument('--threads', default='1,2')
    parser.add_argument('--reps', type=int, default=5)
    args = parser.parse_args()
    kiln_bin = os.path.abspath(args.kiln_bin)
    out = os.path.abspath(args.out or os.path.join(kiln_bin, 'dynamic'))
    os.makedirs(out, exist_ok=True)
    sizes = [int(s) for s in args.sizes.split(',')]
    node_env = dict(os.environ, NODE_PATH=os.path.expanduser('~/.cache/kiln-peers/node_modules'))
    for name in args.models.split(','):
        model = export_dynamic(out, name)
        rng = np.random.default_rng(0)
        inputs = {n: make_inputs(out, name, n, rng) for n in sizes}
        bind = lambda n: [a for i, p in enumerate(inputs[n]) for a in ('--input', f'in{i}={p}')]
        for threads in [int(t) for t in args.threads.split(',')]:
            cache = tempfile.mkdtemp(prefix='kiln-dynamic-cache-')
            env = dict(os.environ, KILN_CACHE_DIR=cache, PYTHONPATH=os.path.join(kiln_bin, 'python'))
            so = f'{out}/{name}_dyn_t{threads}.so'
            start = time.perf_counter()
            run([f'{kiln_bin}/kiln-compile', model, '-o', so], env)
            compile_ms = (time.perf_counter() - start) * 1e3
            rows = []
            for n in sizes:
                dyn = run(['taskset', '-c', '0' if threads == 1 else '0,1', f'{kiln_bin}/kiln-run', so] + bind(n) +
                          ['--threads', str(threads), '--bench', str(args.reps), '--output', f'out={out}/dyn_out.npy'], env)
                sta = run(['taskset', '-c', '0' if threads == 1 else '0,1', f'{kiln_bin}/kiln-run', model] + bind(n) +
                          ['--threads', str(threads), '--bench', str(args.reps), '--check', f'out={out}/dyn_out.npy'], env)
                rows.append((n, field(dyn, 'median_ms'), field(sta, 'median_ms'), field(dyn, 'arena_bytes'),
                             field(sta, 'arena_bytes')))
            ort = run(['taskset', '-c', '0' if threads == 1 else '0,1', 'node', f'{HERE}/ort_sweep.js', str(threads),
                       str(args.reps), model] + [','.join(inputs[n]) for n in sizes], node_env)
            ort_ms = {int(re.search(r'_x(\d+)_0\.npy', line).group(1)): float(line.split()[3])
                      for line in ort.splitlines() if line.startswith('size_ms')}
            sweep_env = dict(env, KILN_CACHE_DIR=tempfile.mkdtemp(prefix='kiln-sweep-cache-'))
            kiln_sweep = run(['taskset', '-c', '0' if threads == 1 else '0,1', sys.executable, '-c', SWEEP, model,
                              str(threads), str(args.reps)] + [','.join(inputs[n]) for n in sizes], sweep_env)
            shutil.rmtree(sweep_env['KILN_CACHE_DIR'], ignore_errors=True)
            shutil.rmtree(cache, ignore_errors=True)
            print(f'\n### {name}, {threads} thread{"s" if threads > 1 else ""}: one compile serves every batch'
                  f' (kiln-compile writes its .so in {compile_ms / 1e3:.1f} s)\n')
            print('| batch | kiln dynamic ms | kiln static ms | dynamic / static | ORT ms | kiln dynamic / ORT |'
                  ' arena dynamic / static |')
            print('| ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
            for n, d, s, ad, ast in rows:
                print(f'| {n} | {d:.2f} | {s:.2f} | {d / s:.2f} | {ort_ms[n]:.2f} | {d / ort_ms[n]:.2f} | '
                      f'{ad / 2**20:.1f} / {ast / 2**20:.1f} MiB |')
            ks, os_ = field(kiln_sweep, 'sweep_ms'), field(ort, 'sweep_ms')
            print(f'\nWhole sweep (one process: open the ONNX model, compiling it, then a first run and {args.reps}'
                  f' timed runs per size): kiln {ks / 1e3:.2f} s, ORT {os_ / 1e3:.2f} s, kiln/ORT {ks / os_:.2f}',
                  flush=True)


if __name__ == '__main__':
    main()
