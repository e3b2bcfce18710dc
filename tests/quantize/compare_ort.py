"""kiln and ONNX Runtime on the same (QDQ) ONNX file and random inputs: prints the largest
absolute difference of the first output, the output SNR of kiln against ORT, and their top-1
agreement. A measurement, not part of `make test` (ORT is a peer: shared/peers/install-peers.sh).
usage: compare_ort.py KILN_RUN MODEL.onnx WORKDIR --count N [--node-path DIR]"""
import argparse
import os
import subprocess

import numpy as np

import top1_agreement

parser = argparse.ArgumentParser()
parser.add_argument("kiln_run")
parser.add_argument("model")
parser.add_argument("workdir")
parser.add_argument("--count", type=int, default=20)
parser.add_argument("--node-path", default=os.path.expanduser("~/.cache/kiln-peers/node_modules"))
args = parser.parse_args()
os.makedirs(args.workdir, exist_ok=True)
batch_model = os.path.join(args.workdir, "batch.onnx")
input_name, output_name, sample_shape = top1_agreement.batch_symbolic(args.model, batch_model)
x = np.random.default_rng(11).standard_normal([args.count] + sample_shape).astype(np.float32)
np.save(os.path.join(args.workdir, "x.npy"), x)
kiln = top1_agreement.run(args.kiln_run, batch_model, input_name, output_name, os.path.join(args.workdir, "x.npy"),
                          os.path.join(args.workdir, "kiln.npy"), False).reshape(args.count, -1)
x.tofile(os.path.join(args.workdir, "x.f32"))
subprocess.run(["node", os.path.join(os.path.dirname(__file__), "ort_run.js"), batch_model,
                os.path.join(args.workdir, "x.f32"), os.path.join(args.workdir, "ort.f32")], check=True,
               env=dict(os.environ, NODE_PATH=args.node_path))
ort = np.fromfile(os.path.join(args.workdir, "ort.f32"), np.float32).reshape(args.count, -1)
diff = np.abs(kiln - ort)
snr = 10 * np.log10((ort.astype(np.float64) ** 2).sum() / ((kiln.astype(np.float64) - ort) ** 2).sum())
print(f"kiln vs ORT on {args.count} inputs: max_abs_diff {diff.max():.4g} (output max {np.abs(ort).max():.4g}), "
      f"snr_db {snr:.1f}, top1_agreement {(kiln.argmax(1) == ort.argmax(1)).mean():.4f}")
