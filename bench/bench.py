#!/usr/bin/env python3
"""kiln side by side with ONNX Runtime and PyTorch eager, in one run; writes bench/results.md.

usage: bench.py [--names A,B] [--train-names A,B] [--threads 1,2] [--rounds R] [--train-rounds R]
                [--seeds DIR] [--zoo DIR] [--kiln-bin DIR] [--peers DIR] [--node-modules DIR] [--out FILE]
                [--no-infer] [--no-train] [--no-sgemm] [--no-compile] [--no-python]
                [--precision-names A,B] [--no-precision]

For each workload and thread count the three engines run interleaved in rounds (kiln, ORT,
PyTorch, then again), each in its own process with its own warm-up; a figure is the median of
the per-round medians, so a burst of load from other jobs on a shared machine skews one round
rather than one engine. Five inference rounds by default: on the shared 2-core machines a slow
spell of the second core lasts seconds, a whole round, and with three rounds two such rounds
of one engine decided a ratio whose true margin was 5-9% (ResNet-50 at 2 threads: kiln 39.1,
45.2, 53.7 ms against ORT 41.1, 43.8, 41.9). Then training steps (forward, loss = mean of the output, backward, SGD
lr 1e-3), kiln against PyTorch eager (the peers' torch_bench.py), interleaved the same way:
ONNX workloads through `kiln-run MODEL --train mean`, resnet18_bN through kiln-train-bench,
which builds ResNet-18 with kiln's nn API with BatchNorm in training mode as PyTorch's model
is (the ONNX export folds BatchNorm into the convolutions). Then square SGEMM, kiln
(kiln-gemm-bench) against OpenBLAS (through numpy), and kiln's compile time for ResNet-50
(cold: empty KILN_CACHE_DIR; cached: second run). Last, what the Python package adds to a
run: kiln.Session.run and run_into on a one-kernel graph against kiln-run's C++ run of it.
Then kiln in bf16 (`--precision bf16`) and in int8 (the model quantized by kiln-quantize, and ORT
on the same file) against kiln in f32, interleaved, with the error `kiln-run --compare-precision`
reports (SNR, top-1 agreement); int8's accuracy over many inputs is bench/quantized_accuracy.py's.
Only ratios from one run mean anything: the machines are shared and their speed drifts.
"""
import argparse
import datetime
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

WORKLOADS = ["mlp_b1024", "lenet5_b64", "resnet18_b1", "resnet18_b8", "resnet50_b1", "vgg16_b1",
             "bert_mini_s128_b8", "bert_base_s128"]
# The low-precision comparison: kiln --precision bf16 against kiln f32 (issue 28's models).
# From the seeds, and MobileNetV2 from the zoo (bench/zoo; exported when missing).
PRECISION_WORKLOADS = ["mlp_b1024", "resnet50_b1", "vgg16_b1", "bert_base_s128", "mobilenet_v2_b1"]
TRAIN_WORKLOADS = ["mlp_b1024", "lenet5_b64", "resnet18_b8", "bert_mini_s128_b8"]
# Trained through the nn API (kiln-train-bench resnet18 --batch N), not through their ONNX export.
NN_TRAIN_MODEL = re.compile(r"^resnet18_b([0-9]+)$")
TRAIN_LR = "1e-3"  # torch_bench.py's SGD learning rate
SGEMM_SIZES = [256, 512, 1024, 2048]
# OpenBLAS picks slower kernels with these set (see ../shared/peers/README.md): peers run without.
PEER_ENV_DROP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
# Debian's python3 has torch and numpy linked to OpenBLAS; a pyenv shim on PATH may not.
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable

OPENBLAS_SGEMM = r"""
import sys, time, statistics, numpy as np
for n in map(int, sys.argv[1:]):
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype=np.float32); b = rng.random((n, n), dtype=np.float32)
    c = a @ b
    ts = []
    deadline = time.perf_counter() + 0.6
    while len(ts) < 5 or time.perf_counter() < deadline:
        s = time.perf_counter(); np.matmul(a, b, out=c); ts.append(time.perf_counter() - s)
    print(n, 2.0 * n ** 3 / statistics.median(ts) / 1e9, flush=True)
"""

# The one-kernel graph whose run the Python overhead is measured on, and the timing in Python
# (the build tree's package, argv: graph, timed calls); kiln-run --bench times the C++ side.
ONE_KERNEL_KIR = """graph @add(%x: f32[4,8], %y: f32[4,8]) -> (f32[4,8]) {
  %z = add(%x, %y) : f32[4,8]
  return %z
}
"""
PYTHON_OVERHEAD = r"""
import sys, time, statistics, numpy as np, kiln
session = kiln.Session(sys.argv[1], threads=1)
feeds = {i.name: np.ones(i.shape, i.dtype) for i in session.inputs}
outputs = {o.name: np.empty(o.shape, o.dtype) for o in session.outputs}
for label, call in (("run", lambda: session.run(feeds)), ("run_into", lambda: session.run_into(feeds, outputs))):
    for _ in range(500):
        call()
    times = []
    for _ in range(int(sys.argv[2])):
        start = time.perf_counter_ns(); call(); times.append(time.perf_counter_ns() - start)
    print(label + "_us", statistics.median(times) / 1000, flush=True)
"""
PYTHON_OVERHEAD_CALLS = 5000
PYTHON_OVERHEAD_ROUNDS = 3


def log(message):
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def peer_env(threads):
    env = {k: v for k, v in os.environ.items() if k not in PEER_ENV_DROP}
    env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
    return env


def run(cmd, env=None, cwd=None, timeout=900):
    """stdout of cmd, or None (with the reason logged) when it fails."""
    try:
        done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"timed out: {' '.join(cmd)}")
        return None, ""
    except OSError as error:  # a tool that is not built
        log(f"cannot run {cmd[0]}: {error}")
        return None, str(error)
    if done.returncode != 0:
        log(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.strip()[-2000:]}")
        return None, done.stderr
    return done.stdout, done.stderr


class Engines:
    def __init__(self, args):
        self.args = args
        self.kiln_run = os.path.join(args.kiln_bin, "kiln-run")
        self.gemm_bench = os.path.join(args.kiln_bin, "kiln-gemm-bench")
        self.train_bench = os.path.join(args.kiln_bin, "kiln-train-bench")
        self.kiln_fell_back = set()  # workloads kiln ran on the reference evaluator

    def model(self, name):
        """The seed's ONNX file, or the zoo model's when the seeds have none of that name."""
        seed = os.path.join(self.args.seeds, name + ".onnx")
        zoo = os.path.join(self.args.zoo, name + ".onnx")
        return zoo if not os.path.exists(seed) and os.path.exists(zoo) else seed

    def kiln(self, name, threads, precision="f32", path=None):
        # About 10 timed runs; fewer for the slow workloads keeps a round short.
        reps = 5 if name in ("vgg16_b1", "resnet18_b8", "bert_base_s128") else 11
        out, err = run([self.kiln_run, path or self.model(name), "--threads", str(threads), "--bench", str(reps),
                        "--precision", precision])
        if out is None:
            return None
        if "reference evaluator instead" in err:
            self.kiln_fell_back.add(name)
        match = re.search(r"^median_ms\s+([0-9.]+)", out, re.M)
        return float(match.group(1)) if match else None

    def graph_names(self, name):
        """The seed's input names and output names."""
        import onnx  # Debian's python3-onnx, which the seeds' export needs too
        graph = onnx.load(self.model(name), load_external_data=False).graph
        return [i.name for i in graph.input], [o.name for o in graph.output]

    def sample_binding(self, name):
        """"INPUT=FILE" binding the seed's one input to its input file, or None."""
        inputs, _ = self.graph_names(name)
        sample = os.path.join(self.args.seeds, name + ".input.npy")
        if not os.path.exists(sample):  # a zoo model's saved input (bench/zoo/export.py)
            sample = os.path.join(self.args.zoo, name + ".in0.npy")
        return f"{inputs[0]}={sample}" if len(inputs) == 1 and os.path.exists(sample) else None

    def quantize(self, name, folder):
        """The seed quantized by kiln-quantize (static QDQ, min-max, calibrated on the seed's input
        file), or None."""
        binding = self.sample_binding(name)
        path = os.path.join(folder, name + ".int8.onnx")
        if binding is None:
            return None
        out, _ = run([os.path.join(self.args.kiln_bin, "kiln-quantize"), self.model(name), "--calibrate", binding,
                      "-o", path], timeout=1800)
        return path if out is not None else None

    def int8_snr(self, name, path, folder):
        """SNR in dB of the quantized model's first output against the f32 model's, both compiled
        by kiln on the seed's input file."""
        import numpy as np
        binding, first = self.sample_binding(name), self.graph_names(name)[1][0]
        outputs = []
        for model, tag in ((self.model(name), "f32"), (path, "int8")):
            target = os.path.join(folder, f"{name}.{tag}.out.npy")
            done, _ = run([self.kiln_run, model, "--input", binding, "--output", f"{first}={target}"])
            if done is None or not os.path.exists(target):
                return None
            outputs.append(np.load(target).astype(np.float64))
        noise = ((outputs[1] - outputs[0]) ** 2).sum()
        return f"{10 * np.log10((outputs[0] ** 2).sum() / noise):.1f}" if noise > 0 else "inf"

    def precision_error(self, name):
        """kiln-run --compare-precision's line for the model's first output: (SNR dB, top-1 text)."""
        out, _ = run([self.kiln_run, self.model(name), "--compare-precision", "--threads", "2"], timeout=1800)
        match = re.search(r"SNR ([0-9.inf]+) dB(?:, top-1 agreement ([0-9]+/[0-9]+) rows)?", out or "")
        return (match.group(1), match.group(2) or "n/a") if match else (None, None)

    def kiln_train_command(self, name, threads, steps):
        """The command timing `steps` kiln training steps of `name` (after a warm-up step)."""
        nn_model = NN_TRAIN_MODEL.match(name)
        if nn_model:
            return [self.train_bench, "resnet18", "--batch", nn_model.group(1), "--lr", TRAIN_LR,
                    "--threads", str(threads), "--bench", str(steps)]
        return [self.kiln_run, self.model(name), "--train", "mean", "--optimizer", "sgd", "--lr", TRAIN_LR,
                "--steps", "1", "--threads", str(threads), "--bench", str(steps)]

    def kiln_train(self, name, threads):
        """(median ms of one training step, None) or (None, the error kiln printed)."""
        if NN_TRAIN_MODEL.match(name) and not os.path.exists(self.train_bench):
            return None, f"no {self.train_bench} (cmake --build {self.args.kiln_bin} --target kiln-train-bench)"
        steps = 3 if NN_TRAIN_MODEL.match(name) else 5 if name.startswith("bert") else 11
        out, err = run(self.kiln_train_command(name, threads, steps), timeout=1800)
        match = re.search(r"^median_ms\s+([0-9.]+)", out or "", re.M)
        if match:
            return float(match.group(1)), None
        lines = [line.strip() for line in (err or "").splitlines() if line.strip()]
        return None, lines[-1] if lines else "no median_ms in its output"

    def ort(self, name, threads, path=None):
        env = peer_env(threads)
        env["NODE_PATH"] = self.args.node_modules
        out, _ = run(["node", os.path.join(self.args.peers, "ort_bench.js"), str(threads), path or self.model(name)],
                     env=env)
        match = re.search(r"ort_ms\s+([0-9.]+)", out or "")
        return float(match.group(1)) if match else None

    def torch(self, name, threads):
        """(inference ms, training step ms or None): the peers' torch_bench.py with --torch-train,
        else bench/torch_infer.py, which times inference the same way and skips the training step."""
        if self.args.torch_train:
            cmd = [SYSTEM_PYTHON, "torch_bench.py", str(threads), name]
        else:
            cmd = [SYSTEM_PYTHON, os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_infer.py"),
                   self.args.peers, str(threads), name]
        out, _ = run(cmd, env=peer_env(threads), cwd=self.args.peers)
        infer = re.search(r"infer_ms\s+([0-9.]+)", out or "")
        train = re.search(r"train_step_ms\s+([0-9.]+)", out or "")
        return (float(infer.group(1)) if infer else None, float(train.group(1)) if train else None)

    def torch_train(self, name, threads):
        """PyTorch eager's training step ms (torch_bench.py: SGD lr 1e-3, loss = out.mean())."""
        out, _ = run([SYSTEM_PYTHON, "torch_bench.py", str(threads), name], env=peer_env(threads), cwd=self.args.peers)
        match = re.search(r"train_step_ms\s+([0-9.]+)", out or "")
        return float(match.group(1)) if match else None

    def kiln_sgemm(self, threads):
        out, _ = run([self.gemm_bench, "--threads", str(threads)] + [str(n) for n in SGEMM_SIZES])
        return {int(m.group(1)): float(m.group(2))
                for m in re.finditer(r"^sgemm\s+(\d+)\s+threads\s+\d+\s+[0-9.]+ ms\s+([0-9.]+) GFLOP/s", out or "", re.M)}

    def openblas_sgemm(self, threads):
        out, _ = run([SYSTEM_PYTHON, "-c", OPENBLAS_SGEMM] + [str(n) for n in SGEMM_SIZES], env=peer_env(threads))
        return {int(n): float(g) for n, g in (line.split() for line in (out or "").splitlines())}

    def compile_times(self, name):
        """[(wall s, load s, compile s) cold, the same cached]: one `kiln-run --bench 1` each, with
        kiln-run's own load_ms (ONNX import) and compile_ms (passes, codegen, and the system
        compiler or the disk cache's load)."""
        cache = tempfile.mkdtemp(prefix="kiln-bench-cache.")
        try:
            env = dict(os.environ, KILN_CACHE_DIR=cache)
            rows = []
            for _ in range(2):
                start = time.perf_counter()
                out, _ = run([self.kiln_run, self.model(name), "--threads", "1", "--bench", "1"], env=env,
                             timeout=1800)
                wall = time.perf_counter() - start if out is not None else None
                load = re.search(r"^load_ms\s+([0-9.]+)", out or "", re.M)
                compiled = re.search(r"^compile_ms\s+([0-9.]+)", out or "", re.M)
                rows.append((wall, float(load.group(1)) / 1000 if load else None,
                             float(compiled.group(1)) / 1000 if compiled else None))
            return rows
        finally:
            shutil.rmtree(cache, ignore_errors=True)

    def python_overhead(self, kir):
        """{"cxx": us, "run": us, "run_into": us}: the median of one run of the graph in `kir`
        on 1 thread, by kiln-run --bench (C++ runInto on a warm executable) and through the
        build tree's Python package; None for what could not run."""
        out, _ = run([self.kiln_run, kir, "--threads", "1", "--bench", str(PYTHON_OVERHEAD_CALLS)])
        match = re.search(r"^median_ms\s+([0-9.]+)", out or "", re.M)
        times = {"cxx": float(match.group(1)) * 1000 if match else None}
        env = dict(os.environ, PYTHONPATH=os.path.join(self.args.kiln_bin, "python"))
        out, _ = run([SYSTEM_PYTHON, "-c", PYTHON_OVERHEAD, kir, str(PYTHON_OVERHEAD_CALLS)], env=env)
        for label in ("run", "run_into"):
            match = re.search(rf"^{label}_us\s+([0-9.]+)", out or "", re.M)
            times[label] = float(match.group(1)) if match else None
        return times


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}" if value < 100 else f"{value:.0f}"


def ratio(a, b):
    return f"{a / b:.2f}" if a is not None and b else "n/a"


def machine_description():
    # The CPU family and model number tell machines with the same model name apart: shared
    # hosts here say "AMD EPYC" for both Zen 4 (family 25) and Zen 5 (family 26), whose peaks
    # differ by 2x, so runs on the two must not be compared.
    model, cores, family, number = "unknown", str(os.cpu_count()), None, None
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in lscpu.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "Model name":
                model = value.strip()
            elif key.strip() == "CPU(s)":
                cores = value.strip()
            elif key.strip() == "CPU family":
                family = value.strip()
            elif key.strip() == "Model":
                number = value.strip()
        if family and number:
            model += f" (family {family}, model {number})"
        flags = re.search(r"^Flags:\s*(.*)$", lscpu, re.M)
        simd = [f for f in ("avx2", "fma", "avx512f") if flags and f in flags.group(1).split()]
    except OSError:
        simd = []
    return model, cores, simd


def measure_inference(engines, names, threads_list, rounds):
    # Compile every model once first (kiln caches it on disk) so no round pays for the compiler.
    for name in names:
        log(f"kiln: compiling {name} (cached on disk for the rounds)")
        run([engines.kiln_run, engines.model(name), "--threads", "1"], timeout=1800)
    rows = []
    for name in names:
        for threads in threads_list:
            samples = {"kiln": [], "ort": [], "torch": [], "train": []}
            for r in range(rounds):
                samples["kiln"].append(engines.kiln(name, threads))
                samples["ort"].append(engines.ort(name, threads))
                infer, train = engines.torch(name, threads)
                samples["torch"].append(infer)
                samples["train"].append(train)
                log(f"{name} threads {threads} round {r + 1}: kiln {samples['kiln'][-1]} ort {samples['ort'][-1]} "
                    f"torch {infer} train {train}")
            rows.append((name, threads, {k: median(v) for k, v in samples.items()}))
    return rows


def measure_training(engines, names, threads_list, rounds):
    """Rows (name, threads, kiln ms, PyTorch ms, kiln's error or None), rounds interleaved."""
    # One step each first: kiln compiles the training step then and caches it on disk.
    for name in names:
        log(f"kiln: compiling the training step of {name} (cached on disk for the rounds)")
        run(engines.kiln_train_command(name, 1, 1), timeout=1800)
    rows = []
    for name in names:
        for threads in threads_list:
            kiln, torch, error = [], [], None
            for r in range(rounds):
                ms, failure = engines.kiln_train(name, threads)
                kiln.append(ms)
                error = error or failure
                torch.append(engines.torch_train(name, threads))
                log(f"train {name} threads {threads} round {r + 1}: kiln {ms if failure is None else failure} "
                    f"torch {torch[-1]}")
            rows.append((name, threads, median(kiln), median(torch), error))
    return rows


def measure_precision(engines, names, threads_list, rounds, folder):
    """Rows (name, threads, {engine: ms}, bf16 SNR, bf16 top-1, int8 SNR), the engines interleaved:
    kiln f32, kiln bf16, and the seed quantized by kiln-quantize in kiln and in ORT."""
    quantized = {}
    for name in names:
        log(f"kiln: compiling {name} in bf16 and quantizing it (cached on disk for the rounds)")
        run([engines.kiln_run, engines.model(name), "--threads", "1", "--precision", "bf16"], timeout=1800)
        quantized[name] = engines.quantize(name, folder)
    rows = []
    for name in names:
        snr, top1 = engines.precision_error(name)
        int8 = quantized[name]
        int8_snr = engines.int8_snr(name, int8, folder) if int8 else None
        for threads in threads_list:
            samples = {"f32": [], "bf16": [], "int8": [], "ort_int8": []}
            for r in range(rounds):
                samples["f32"].append(engines.kiln(name, threads))
                samples["bf16"].append(engines.kiln(name, threads, "bf16"))
                if int8:
                    samples["int8"].append(engines.kiln(name, threads, path=int8))
                    samples["ort_int8"].append(engines.ort(name, threads, path=int8))
                log(f"precision {name} threads {threads} round {r + 1}: " +
                    " ".join(f"{k} {v[-1] if v else None}" for k, v in samples.items()))
            rows.append((name, threads, {k: median(v) if v else None for k, v in samples.items()}, snr, top1,
                         int8_snr))
    return rows


def precision_lines(rows):
    lines = ["<!-- precision:begin -->", "## Low precision: kiln bf16 and int8 against kiln f32, median ms", "",
             "bf16: `kiln-run MODEL --precision bf16` (GEMMs, GEMM-computed convolutions and F(2x2,3x3) Winograd with "
             "bf16 operands and f32 sums, their weights stored in bf16 at load); its error from `kiln-run MODEL "
             "--compare-precision` on kiln-run's random inputs, seed 0 (SNR of the first output against f32's, and its "
             "rows' top-1 agreement). int8: the seed quantized by `kiln-quantize` (static QDQ, min-max, calibrated on "
             "the seed's input file; MobileNetV2: the zoo's), run by kiln (int8 matmuls and convolutions on VNNI, "
             "qgemm and qconv2d, with their bias, residual, activation and requantisation applied in registers; "
             "depthwise layers summed in int32 from the bytes; max pools on bytes) and by ORT (`ort_bench.js`) on the same file; its SNR "
             "is its output against the f32 model's, on that input.", "",
             "| workload | threads | f32 | bf16 | bf16/f32 | bf16 SNR, dB | bf16 top-1 | int8 | int8/f32 | ORT int8 | "
             "kiln/ORT int8 | int8 SNR, dB |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, threads, m, snr, top1, int8_snr in rows:
        lines.append(f"| {name} | {threads} | {fmt(m['f32'])} | {fmt(m['bf16'])} | {ratio(m['bf16'], m['f32'])} | "
                     f"{snr or 'n/a'} | {top1 or 'n/a'} | {fmt(m['int8'])} | {ratio(m['int8'], m['f32'])} | "
                     f"{fmt(m['ort_int8'])} | {ratio(m['int8'], m['ort_int8'])} | {int8_snr or 'n/a'} |")
    lines.append("")
    lines.append("Ratios below 1 mean the first is faster.")
    lines.append("<!-- precision:end -->")
    return lines


def inference_lines(rows, engines, torch_train):
    lines = ["## Inference, median ms", "",
             "| workload | threads | kiln | ORT | PyTorch | kiln/ORT | kiln/PyTorch |"
             + (" PyTorch train step |" if torch_train else ""),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if torch_train else "")]
    for name, threads, m in rows:
        kiln = fmt(m["kiln"]) + (" (ref)" if name in engines.kiln_fell_back else "")
        lines.append(f"| {name} | {threads} | {kiln} | {fmt(m['ort'])} | {fmt(m['torch'])} | "
                     f"{ratio(m['kiln'], m['ort'])} | {ratio(m['kiln'], m['torch'])} |"
                     + (f" {fmt(m['train'])} |" if torch_train else ""))
    lines.append("")
    lines.append("Ratios below 1 mean kiln is faster.")
    if engines.kiln_fell_back:
        lines.append("(ref): kiln ran that workload on the reference evaluator (an op codegen does not support yet).")
    return lines


def training_lines(rows):
    lines = ["## Training step (forward, loss = mean, backward, SGD lr 1e-3), median ms", "",
             "kiln: `kiln-run MODEL.onnx --train mean --optimizer sgd --lr 1e-3 --threads N --bench R`; resnet18_bN "
             "(nn): `kiln-train-bench resnet18 --batch N`, ResNet-18 built with kiln's nn API, BatchNorm in training "
             "mode (the ONNX export folds it). PyTorch eager: the peers' `torch_bench.py` (`train_step_ms`: "
             "zero_grad, forward, out.mean().backward(), SGD step; model.train()).", "",
             "| workload | threads | kiln | PyTorch | kiln/PyTorch |", "| --- | ---: | ---: | ---: | ---: |"]
    for name, threads, kiln, torch, error in rows:
        label = name + (" (nn)" if NN_TRAIN_MODEL.match(name) else "")
        # A failure shows kiln's own message; `|` would end the table cell.
        kiln_cell = fmt(kiln) if kiln is not None or error is None else "fails: " + error.replace("|", "\\|")
        lines.append(f"| {label} | {threads} | {kiln_cell} | {fmt(torch)} | {ratio(kiln, torch)} |")
    lines.append("")
    lines.append("Ratios below 1 mean kiln is faster.")
    return lines


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--names", default=",".join(WORKLOADS), help="inference workloads")
    parser.add_argument("--train-names", default=",".join(TRAIN_WORKLOADS),
                        help="training workloads (resnet18_bN: built with kiln's nn API)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=5, help="inference rounds")
    parser.add_argument("--train-rounds", type=int, default=3, help="training rounds")
    parser.add_argument("--seeds", default=os.path.join(repo, "build", "seeds"))
    parser.add_argument("--kiln-bin", default=os.path.join(repo, "build"))
    parser.add_argument("--peers", default=os.environ.get("KILN_PEERS_DIR", os.path.join(repo, "..", "shared", "peers")))
    parser.add_argument("--node-modules", default=os.path.join(
        os.environ.get("KILN_PEERS_CACHE", os.path.expanduser("~/.cache/kiln-peers")), "node_modules"))
    parser.add_argument("--out", default=os.path.join(repo, "bench", "results.md"))
    parser.add_argument("--no-infer", action="store_true", help="skip the inference comparison")
    parser.add_argument("--no-train", action="store_true", help="skip the training step comparison")
    parser.add_argument("--no-sgemm", action="store_true")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--no-python", action="store_true", help="skip the Python binding's overhead")
    parser.add_argument("--zoo", default=os.path.join(repo, "build", "zoo"),
                        help="the model zoo's folder (bench/zoo/export.py), for precision workloads that are no seed")
    parser.add_argument("--precision-names", default=",".join(PRECISION_WORKLOADS),
                        help="workloads timed in bf16 against f32")
    parser.add_argument("--no-precision", action="store_true", help="skip the bf16 comparison")
    parser.add_argument("--torch-train", action="store_true",
                        help="in the inference table, also run the peers' torch_bench.py, which times one SGD "
                             "training step too (slow)")
    args = parser.parse_args()
    names = [] if args.no_infer else [n for n in args.names.split(",") if n]
    train_names = [] if args.no_train else [n for n in args.train_names.split(",") if n]
    threads_list = [int(t) for t in args.threads.split(",") if t]
    precision_names = [] if args.no_precision else [n for n in args.precision_names.split(",") if n]
    onnx_names = names + [n for n in train_names if not NN_TRAIN_MODEL.match(n)] + precision_names
    for name in precision_names:  # a zoo model: exported when missing
        if not os.path.exists(os.path.join(args.seeds, name + ".onnx")):
            if not os.path.exists(os.path.join(args.zoo, name + ".onnx")):
                log(f"exporting {name} to {args.zoo}")
                run([SYSTEM_PYTHON, os.path.join(repo, "bench", "zoo", "export.py"), args.zoo, name],
                    cwd=os.path.join(repo, "bench", "zoo"), timeout=1800)
            if os.path.exists(os.path.join(args.zoo, name + ".onnx")):
                onnx_names.remove(name)
    for name in dict.fromkeys(onnx_names):
        if not os.path.exists(os.path.join(args.seeds, name + ".onnx")):
            sys.exit(f"bench.py: no {name}.onnx in {args.seeds} (scripts/export-seeds.sh {args.seeds} {name})")
    engines = Engines(args)
    started = time.time()
    load_before = os.getloadavg()[0]

    rows = measure_inference(engines, names, threads_list, args.rounds)
    train_rows = measure_training(engines, train_names, threads_list, args.train_rounds)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-int8.") as folder:
        precision_rows = measure_precision(engines, precision_names, threads_list, args.rounds, folder)

    sgemm = []
    if not args.no_sgemm:
        for threads in threads_list:
            log(f"sgemm, {threads} threads")
            sgemm.append((threads, engines.kiln_sgemm(threads), engines.openblas_sgemm(threads)))

    compile_rows = []
    if not args.no_compile and names:
        compile_names = ["resnet50_b1"] if "resnet50_b1" in names else names[-1:]
        for name in compile_names:
            log(f"kiln: cold compile of {name}")
            compile_rows.append((name, *engines.compile_times(name)))

    python_rows = []
    if not args.no_python:
        if os.path.isdir(os.path.join(args.kiln_bin, "python", "kiln")):
            with tempfile.TemporaryDirectory(prefix="kiln-bench-python.") as folder:
                kir = os.path.join(folder, "add.kir")
                with open(kir, "w") as f:
                    f.write(ONE_KERNEL_KIR)
                for round_index in range(PYTHON_OVERHEAD_ROUNDS):
                    log(f"Python overhead, round {round_index + 1}")
                    python_rows.append(engines.python_overhead(kir))
        else:
            log(f"no Python package in {args.kiln_bin}/python (cmake --build {args.kiln_bin} --target _kiln): "
                "no Python overhead")

    model, cores, simd = machine_description()
    lines = ["# kiln benchmark", "",
             f"- date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')} "
             f"({(time.time() - started) / 60:.1f} min for this run)",
             f"- machine: {model}, {cores} CPUs{', ' + ' '.join(simd) if simd else ''}; load average "
             f"{load_before:.2f} at the start, {os.getloadavg()[0]:.2f} at the end (other jobs share the cores)",
             f"- rounds: {args.rounds} per inference workload and thread count ({args.train_rounds} per training "
             "workload), engines interleaved; each figure is the median of the per-round medians (ms)"]
    if rows:
        lines.append("- kiln: `kiln-run MODEL --threads N --bench R` (compiled model, cached on disk); ORT 1.30: "
                     "`ort_bench.js` (all graph optimisations); PyTorch eager: inference under no_grad "
                     "(`bench/torch_infer.py`, or the peers' `torch_bench.py` with its SGD training step under "
                     "--torch-train)")
    lines += ["- peers run without OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE; the machine is shared, so only the "
              "ratios of one run mean anything", ""]
    if rows:
        lines += inference_lines(rows, engines, args.torch_train)
    if train_rows:
        lines += ([""] if rows else []) + training_lines(train_rows)
    if precision_rows:
        lines += [""] + precision_lines(precision_rows)
    if sgemm:
        lines += ["", "## SGEMM, square, GFLOP/s", "",
                  "| n | threads | kiln | OpenBLAS (numpy) | kiln/OpenBLAS |", "| ---: | ---: | ---: | ---: | ---: |"]
        for threads, kiln, blas in sgemm:
            for n in SGEMM_SIZES:
                k, b = kiln.get(n), blas.get(n)
                lines.append(f"| {n} | {threads} | {fmt(k, 1)} | {fmt(b, 1)} | {ratio(k, b)} |")
        lines.append("")
        lines.append("Ratios above 1 mean kiln is faster.")
    if compile_rows:
        lines += ["", "## kiln compile time", "",
                  "One `kiln-run MODEL --threads 1 --bench 1`, cold (empty KILN_CACHE_DIR) then cached: the compile "
                  "(passes, codegen, and the system compiler or the disk cache's load) as kiln-run's compile_ms "
                  "reports it, the ONNX import (load_ms), and the whole process's wall time.", "",
                  "| workload | cold compile, s | cached compile, s | import, s | process cold, s | process cached, s |",
                  "| --- | ---: | ---: | ---: | ---: | ---: |"]
        for name, cold, cached in compile_rows:
            lines.append(f"| {name} | {fmt(cold[2], 3)} | {fmt(cached[2], 3)} | {fmt(cached[1], 3)} | "
                         f"{fmt(cold[0])} | {fmt(cached[0])} |")
    if python_rows:
        cxx, py_run, py_into = (median([row[k] for row in python_rows]) for k in ("cxx", "run", "run_into"))
        extra = (lambda t: fmt(t - cxx, 2) if t is not None and cxx is not None else "n/a")
        lines += ["", "## Python binding overhead", "",
                  f"A one-kernel graph (add of two f32[4,8]) on 1 thread, median of {PYTHON_OVERHEAD_CALLS} calls, "
                  f"median of {PYTHON_OVERHEAD_ROUNDS} rounds: kiln-run's C++ run (runInto on a warm executable) "
                  "against `kiln.Session.run(feeds)` (fresh output arrays) and `run_into(feeds, outputs)` from "
                  "Python.", "",
                  "| C++ run, us | Session.run, us | run extra, us | Session.run_into, us | run_into extra, us |",
                  "| ---: | ---: | ---: | ---: | ---: |",
                  f"| {fmt(cxx, 2)} | {fmt(py_run, 2)} | {extra(py_run)} | {fmt(py_into, 2)} | {extra(py_into)} |"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    # The model zoo's section (bench/zoo/bench_zoo.py) and the data-parallel one (`make
    # bench-ddp`, written by hand) are their own runs': keep them, and the low-precision one
    # when this run skipped it.
    old = open(args.out).read() if os.path.exists(args.out) else ""
    for section in ("zoo", "ddp") + (() if precision_rows else ("precision",)):
        begin, end = f"<!-- {section}:begin -->", f"<!-- {section}:end -->"
        if begin in old and end in old:
            lines += ["", old[old.index(begin):old.index(end) + len(end)]]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
