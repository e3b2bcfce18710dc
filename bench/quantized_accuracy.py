"""What int8 costs in accuracy: each model quantized by kiln-quantize on calibration inputs,
then kiln's int8 against kiln's f32 on held-out inputs, and against ONNX Runtime's int8.

usage: python3 quantized_accuracy.py [--names N,...] [--calibration 32] [--held-out 1000]
                                     [--ort-rows 100] [--seeds DIR] [--zoo DIR] [--kiln-bin DIR]
                                     [--out bench/results.md]

For each model: kiln-quantize (static QDQ, min-max) calibrated on --calibration random inputs
(seed 1); then --held-out other random inputs (seed 2), each run by kiln f32 and kiln int8
(the Python binding, one input per run). Reported per model: top-1 agreement of int8 with
f32, the number of distinct f32 top-1 classes among those inputs (the seeds' weights are
random, so a model may favour few classes and make agreement easy; the count says how much),
output SNR against f32 over all held-out inputs, and, on the first --ort-rows inputs, the
largest difference between kiln's int8 output and ORT's on the same QDQ file in output
quantization steps (the output's f32 range over the held-out inputs / 255) and the share of
outputs within one step. Writes its section of --out between its markers.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_NAMES = ["resnet50_b1", "vgg16_b1", "mobilenet_v2_b1", "bert_base_s128"]
# BERT-base's issue bar is its SNR; fewer held-out inputs keep its two compiled runs short.
HELD_OUT_CAP = {"bert_base_s128": 100}
BEGIN, END = "<!-- quantized-accuracy:begin -->", "<!-- quantized-accuracy:end -->"


def log(message):
    print(f"[quantized-accuracy] {message}", flush=True)


def model_path(args, name):
    for folder in (args.seeds, args.zoo):
        path = os.path.join(folder, name + ".onnx")
        if os.path.exists(path):
            return path
    return None


def input_spec(path):
    import onnx
    graph = onnx.load(path, load_external_data=False).graph
    first = graph.input[0]
    shape = [d.dim_value for d in first.type.tensor_type.shape.dim]
    if len(graph.input) != 1 or first.type.tensor_type.elem_type != 1 or 0 in shape or shape[0] != 1:
        return None
    return first.name, shape


def measure(args, name, folder):
    import kiln
    path = model_path(args, name)
    if path is None:
        log(f"{name}: no model in {args.seeds} or {args.zoo}, skipped")
        return None
    spec = input_spec(path)
    if spec is None:
        log(f"{name}: not one f32 input of batch 1, skipped")
        return None
    input_name, shape = spec
    calibration = np.random.default_rng(1).standard_normal([args.calibration] + shape[1:]).astype(np.float32)
    calibration_file = os.path.join(folder, name + ".calibration.npy")
    np.save(calibration_file, calibration)
    quantized = os.path.join(folder, name + ".int8.onnx")
    started = time.time()
    done = subprocess.run([os.path.join(args.kiln_bin, "kiln-quantize"), path, "--calibrate",
                           f"{input_name}={calibration_file}", "-o", quantized], capture_output=True, text=True)
    if done.returncode != 0:
        log(f"{name}: kiln-quantize failed: {done.stderr.strip()}")
        return None
    log(f"{name}: quantized in {time.time() - started:.0f} s")
    held_out = min(args.held_out, HELD_OUT_CAP.get(name, args.held_out))
    rng = np.random.default_rng(2)
    f32 = kiln.Session(path, threads=args.threads)
    int8 = kiln.Session(quantized, threads=args.threads)
    f32_out, int8_out, inputs, classifier = [], [], [], True
    started = time.time()
    for i in range(held_out):
        x = rng.standard_normal(shape).astype(np.float32)
        if i < args.ort_rows:
            inputs.append(x[0])
        out = next(iter(f32.run({input_name: x}).values()))
        classifier = out.ndim == 2  # [1, classes]: top-1 means something
        f32_out.append(out.reshape(-1))
        int8_out.append(next(iter(int8.run({input_name: x}).values())).reshape(-1))
    log(f"{name}: {held_out} held-out inputs in {time.time() - started:.0f} s")
    f32_out, int8_out = np.stack(f32_out).astype(np.float64), np.stack(int8_out).astype(np.float64)
    snr = 10 * np.log10((f32_out ** 2).sum() / max(((int8_out - f32_out) ** 2).sum(), 1e-300))
    agree = int((f32_out.argmax(1) == int8_out.argmax(1)).sum())
    classes = len(set(f32_out.argmax(1).tolist()))
    # The input-dependent part: both outputs less f32's mean output over the held-out inputs.
    mean = f32_out.mean(0)
    centred = int(((f32_out - mean).argmax(1) == (int8_out - mean).argmax(1)).sum())
    row = {"name": name, "held_out": held_out, "top1": agree, "classes": classes, "centred": centred, "snr": snr,
           "outputs": f32_out.shape[1], "classifier": classifier}
    # ORT on the same QDQ file, the first rows.
    inputs_file, ort_file = os.path.join(folder, name + ".ort-in.npy"), os.path.join(folder, name + ".ort-out.npy")
    np.save(inputs_file, np.stack(inputs).astype(np.float32))
    env = dict(os.environ, NODE_PATH=args.node_modules)
    done = subprocess.run(["node", os.path.join(REPO, "bench", "ort_outputs.js"), quantized, inputs_file, ort_file],
                          capture_output=True, text=True, env=env)
    if done.returncode == 0 and os.path.exists(ort_file):
        ort = np.load(ort_file).reshape(len(inputs), -1).astype(np.float64)
        step = (f32_out.max() - f32_out.min()) / 255
        difference = np.abs(int8_out[:len(inputs)] - ort) / step
        row.update(ort_rows=len(inputs), ort_max_steps=float(difference.max()),
                   ort_within=float((difference <= 1).mean()),
                   ort_top1=int((ort.argmax(1) == int8_out[:len(inputs)].argmax(1)).sum()),
                   ort_centred=int(((ort - mean).argmax(1) == (f32_out[:len(inputs)] - mean).argmax(1)).sum()),
                   kiln_centred=int(((int8_out[:len(inputs)] - mean).argmax(1) ==
                                     (f32_out[:len(inputs)] - mean).argmax(1)).sum()))
    else:
        log(f"{name}: ORT failed: {done.stderr.strip()}")
    log(f"{name}: {row}")
    return row


def section(rows, args, cpu):
    lines = [BEGIN, "## int8 accuracy: kiln-quantize's QDQ models against f32 and against ORT", "",
             f"`bench/quantized_accuracy.py`, {cpu}: each model quantized by `kiln-quantize` (min-max, u8 "
             f"activations, per-channel s8 weights) calibrated on {args.calibration} random inputs (seed 1), then "
             "run by kiln in f32 and in int8 on held-out random inputs (seed 2). The seeds' weights are random: "
             "\"classes\" counts the distinct f32 top-1 classes among the held-out inputs, so that an agreement "
             "made easy by a model that favours few classes shows, and \"centred\" compares the top-1 of both "
             "outputs less f32's mean output over those inputs (the part that depends on the input). ORT: the same QDQ file in ONNX Runtime on the "
             "first inputs; a step is the output's f32 range over the held-out inputs / 255.", "",
             "| model | held-out inputs | top-1 agreement int8 vs f32 | classes | centred top-1 | SNR vs f32, dB | "
             "ORT rows | "
             "largest kiln-ORT difference, steps | outputs within 1 step | top-1 kiln vs ORT | centred top-1 vs f32 on "
             "those rows, kiln / ORT |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    def share(count, total):
        return f"{count}/{total} ({100 * count / total:.1f}%)"

    for r in rows:
        top1 = r["classifier"]  # not for a model whose output is no row of class scores (BERT's hidden states)
        ort = (f"{r['ort_rows']} | {r['ort_max_steps']:.2f} | {100 * r['ort_within']:.2f}% | " +
               (f"{r['ort_top1']}/{r['ort_rows']} | {r['kiln_centred']} / {r['ort_centred']}" if top1 else "n/a | n/a")) \
            if "ort_rows" in r else "n/a | n/a | n/a | n/a | n/a"
        lines.append(f"| {r['name']} | {r['held_out']} | " +
                     (f"{share(r['top1'], r['held_out'])} | {r['classes']} | {share(r['centred'], r['held_out'])}"
                      if top1 else "n/a | n/a | n/a") + f" | {r['snr']:.1f} | {ort} |")
    lines.append(END)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", default=",".join(DEFAULT_NAMES))
    parser.add_argument("--calibration", type=int, default=32)
    parser.add_argument("--held-out", type=int, default=1000)
    parser.add_argument("--ort-rows", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seeds", default=os.path.join(REPO, "build", "seeds"))
    parser.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    parser.add_argument("--kiln-bin", default=os.path.join(REPO, "build"))
    parser.add_argument("--node-modules", default=os.path.join(
        os.environ.get("KILN_PEERS_CACHE", os.path.expanduser("~/.cache/kiln-peers")), "node_modules"))
    parser.add_argument("--out", default=os.path.join(REPO, "bench", "results.md"))
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(args.kiln_bin, "python"))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "this CPU")
    rows = []
    with tempfile.TemporaryDirectory(prefix="kiln-int8-accuracy.") as folder:
        for name in [n for n in args.names.split(",") if n]:
            row = measure(args, name, folder)
            if row:
                rows.append(row)
    text = open(args.out).read() if os.path.exists(args.out) else ""
    block = "\n".join(section(rows, args, cpu))
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(block)


if __name__ == "__main__":
    main()
