"""Top-1 agreement of a quantized model with its fp32 original on random held-out inputs, both
run by kiln-run (compiled). The models' leading input and output dims are made symbolic so that
a batch of any size runs in one kiln-run call.

usage: top1_agreement.py KILN_RUN FP32.onnx INT8.onnx WORKDIR --count N [--batch B] [--seed S]
                         [--min-rate R] [--min-snr DB] [--reference]
Prints "top1_agreement A/N = RATE, snr_db X, fp32_classes C, top5_overlap O": C counts the
distinct fp32 top-1 classes (an untrained model may pick one class for most random inputs,
which makes top-1 agreement easy), O is the mean share of the fp32 top 5 that the quantized
model's top 5 holds. Exits 1 when RATE < R or the SNR < DB."""
import argparse
import os
import subprocess
import sys

import numpy as np
import onnx


def batch_symbolic(src, dst):
    model = onnx.load(src)
    inits = {i.name for i in model.graph.initializer}
    for value in list(model.graph.input) + list(model.graph.output):
        if value.name in inits:
            continue
        dims = value.type.tensor_type.shape.dim
        if len(dims):
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "batch"
    onnx.save(model, dst)
    return model.graph.input[0].name, model.graph.output[0].name, \
        [d.dim_value for d in onnx.load(src).graph.input[0].type.tensor_type.shape.dim][1:]


def run(kiln_run, model, input_name, output_name, x_path, y_path, reference):
    cmd = [kiln_run, model, "--input", f"{input_name}={x_path}", "--output", f"{output_name}={y_path}"]
    if reference:
        cmd.append("--reference")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return np.load(y_path)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("kiln_run")
    parser.add_argument("fp32")
    parser.add_argument("int8")
    parser.add_argument("workdir")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--min-rate", type=float, default=0.0)
    parser.add_argument("--min-snr", type=float, default=-np.inf, help="fail below this output SNR in dB")
    parser.add_argument("--reference", action="store_true", help="run the int8 model on kiln's reference evaluator")
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    fp32 = os.path.join(args.workdir, "fp32.batch.onnx")
    int8 = os.path.join(args.workdir, "int8.batch.onnx")
    input_name, output_name, sample_shape = batch_symbolic(args.fp32, fp32)
    batch_symbolic(args.int8, int8)
    rng = np.random.default_rng(args.seed)
    agree = 0
    classes = set()
    overlap = 0.0
    signal = noise = 0.0
    done = 0
    while done < args.count:
        n = min(args.batch, args.count - done)
        x = rng.standard_normal([n] + sample_shape).astype(np.float32)
        x_path = os.path.join(args.workdir, "x.npy")
        np.save(x_path, x)
        want = run(args.kiln_run, fp32, input_name, output_name, x_path, os.path.join(args.workdir, "f.npy"), False)
        got = run(args.kiln_run, int8, input_name, output_name, x_path, os.path.join(args.workdir, "q.npy"),
                  args.reference)
        want2, got2 = want.reshape(n, -1), got.reshape(n, -1)
        agree += int((want2.argmax(1) == got2.argmax(1)).sum())
        classes.update(want2.argmax(1).tolist())
        top = min(5, want2.shape[1])
        for w, g in zip(np.argsort(-want2, 1)[:, :top], np.argsort(-got2, 1)[:, :top]):
            overlap += len(set(w) & set(g)) / top
        signal += float((want.astype(np.float64) ** 2).sum())
        noise += float(((want.astype(np.float64) - got) ** 2).sum())
        done += n
    rate = agree / done
    snr = 10 * np.log10(signal / noise) if noise > 0 else float("inf")
    print(f"top1_agreement {agree}/{done} = {rate:.4f}, snr_db {snr:.1f}, fp32_classes {len(classes)}, "
          f"top5_overlap {overlap / done:.4f}")
    if rate < args.min_rate:
        print(f"top-1 agreement {rate:.4f} is below {args.min_rate}", file=sys.stderr)
        sys.exit(1)
    if snr < args.min_snr:
        print(f"output SNR {snr:.1f} dB is below {args.min_snr} dB", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
