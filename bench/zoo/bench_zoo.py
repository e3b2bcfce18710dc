#!/usr/bin/env python3
"""The model zoo side by side: kiln, ONNX Runtime and PyTorch eager on every zoo model
(bench/zoo/models.py) at 1 and 2 threads, in one run; writes the zoo section of
bench/results.md (between its zoo markers, leaving the rest of the file as it is).

usage: bench_zoo.py [--names A,B|all|small] [--threads 1,2] [--rounds R] [--zoo DIR]
                    [--kiln-bin DIR] [--node-modules DIR] [--out FILE] [--no-torch] [--update]

Per model: export (cached in --zoo), check kiln's compiled output against PyTorch's (rtol 1e-4,
atol 1e-5 times the output's largest magnitude, at least 1e-5: untrained activations grow
large), then rounds of kiln, ORT and PyTorch interleaved, each in its own process; a figure is
the median of the per-round medians. Peak RSS: kiln-run's and ORT's own process (the Node.js
runtime included for ORT). Only ratios of one run mean anything on a shared machine.
--update re-measures only --names and keeps every other model's row of the zoo section already
in --out (the header then names the models re-measured, and when).
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SYSTEM_PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PEER_ENV_DROP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
BEGIN, END = "<!-- zoo:begin -->", "<!-- zoo:end -->"


def log(message):
    print(f"[zoo {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run(cmd, env=None, timeout=1800):
    try:
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        log(f"timed out: {' '.join(cmd)}")
        return None
    if done.returncode != 0:
        log(f"failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.strip()[-1500:]}")
        return None
    return done.stdout + done.stderr


def field(text, name):
    match = re.search(rf"^{name}\s+([0-9.eE+-]+)", text or "", re.M)
    return float(match.group(1)) if match else None


class Zoo:
    def __init__(self, args):
        self.args = args
        self.kiln_run = os.path.join(args.kiln_bin, "kiln-run")

    def stem(self, name):
        return os.path.join(self.args.zoo, name)

    def inputs(self, name):
        flags, i = [], 0
        while os.path.exists(f"{self.stem(name)}.in{i}.npy"):
            flags += ["--input", f"in{i}={self.stem(name)}.in{i}.npy"]
            i += 1
        return flags

    def peer_env(self, threads):
        env = {k: v for k, v in os.environ.items() if k not in PEER_ENV_DROP}
        env["OMP_NUM_THREADS"] = env["OPENBLAS_NUM_THREADS"] = str(threads)
        env["NODE_PATH"] = self.args.node_modules
        return env

    def check(self, name):
        """(ok, message): kiln's compiled output against PyTorch's."""
        import numpy as np
        want = np.load(f"{self.stem(name)}.out.npy")
        atol = 1e-5 * max(1.0, float(np.abs(want).max()))
        out = run([self.kiln_run, f"{self.stem(name)}.onnx"] + self.inputs(name) +
                  ["--check", f"out={self.stem(name)}.out.npy", "--rtol", "1e-4", "--atol", f"{atol:g}"])
        if out is None:
            return False, "kiln-run failed"
        line = next((l for l in out.splitlines() if l.startswith("check out:")), "no check line")
        return "check out: ok" in line, line.replace("check out: ", "")

    def kiln(self, name, threads, reps):
        out = run([self.kiln_run, f"{self.stem(name)}.onnx", "--threads", str(threads), "--bench", str(reps)]
                  + self.inputs(name))
        if out is None:
            return None
        return {k: field(out, k) for k in ("median_ms", "peak_rss_bytes", "weight_bytes", "arena_bytes")}

    def ort(self, name, threads, reps):
        out = run(["node", os.path.join(HERE, "ort_zoo.js"), str(threads), str(reps), f"{self.stem(name)}.onnx"],
                  env=self.peer_env(threads))
        return {"median_ms": field(out, "ort_ms"), "peak_rss_bytes": field(out, "peak_rss_bytes")} if out else None

    def torch(self, name, threads, reps):
        out = run([SYSTEM_PYTHON, os.path.join(HERE, "torch_zoo.py"), str(threads), str(reps), name, self.args.zoo],
                  env=self.peer_env(threads))
        return {"median_ms": field(out, "torch_ms")} if out else None


def cell(text):
    """A table cell's number (bold or not), or None for '-'."""
    text = text.strip().strip("*")
    return None if text in ("", "-") else float(text)


def previous_rows(path, threads_list):
    """The zoo section already in `path`, per model: whether its check passed, its two table
    rows as they stand, and its kiln/ORT and kiln/PyTorch ratios per thread count (for the
    family means); {} when there is none."""
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN not in text or END not in text:
        return {}
    rows = {}
    for line in text[text.index(BEGIN):text.index(END)].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 + 5 * len(threads_list) and cells[2] in ("ok", "**mismatch**"):
            ratios = {t: (cell(cells[6 + 5 * i]), cell(cells[7 + 5 * i])) for i, t in enumerate(threads_list)}
            rows[cells[0]] = {"ok": cells[2] == "ok", "row": line, "ratios": ratios, "memory": None}
        elif len(cells) == 6 and cells[0] in rows:
            rows[cells[0]]["memory"] = line
    return rows


def median_of(rounds, key):
    values = [r[key] for r in rounds if r and r.get(key) is not None]
    return statistics.median(values) if values else None


def ratio(a, b):
    return a / b if a and b else None


def fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def main():
    import models
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--names", default="all")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--zoo", default=os.path.join(REPO, "build", "zoo"))
    parser.add_argument("--kiln-bin", default=os.path.join(REPO, "build"))
    parser.add_argument("--node-modules", default=os.path.join(
        os.environ.get("KILN_PEERS_CACHE", os.path.expanduser("~/.cache/kiln-peers")), "node_modules"))
    parser.add_argument("--out", default=os.path.join(REPO, "bench", "results.md"))
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--update", action="store_true")
    args = parser.parse_args()

    zoo = models.zoo()
    names = (list(zoo) if args.names == "all" else [n for n, e in zoo.items() if e.small] if args.names == "small"
             else args.names.split(","))
    threads_list = [int(t) for t in args.threads.split(",")]
    os.makedirs(args.zoo, exist_ok=True)
    log(f"exporting {len(names)} models into {args.zoo}")
    subprocess.run([SYSTEM_PYTHON, os.path.join(HERE, "export.py"), args.zoo, ",".join(names)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    engines = Zoo(args)
    started = time.time()

    checks = {}
    for name in names:
        checks[name] = engines.check(name)
        log(f"{name}: {'ok' if checks[name][0] else 'MISMATCH'} {checks[name][1]}")

    samples = {}  # (name, threads, engine) -> list of per-round results
    for rnd in range(args.rounds):
        for name in names:
            # Slow models get fewer timed runs, so that a round stays short.
            first = samples.get((name, 1, "kiln"), [None])[0]
            reps = 11 if not first or not first["median_ms"] or first["median_ms"] < 100 else 5
            for threads in threads_list:
                for engine in ("kiln", "ort") + (() if args.no_torch else ("torch",)):
                    result = getattr(engines, engine)(name, threads, reps)
                    samples.setdefault((name, threads, engine), []).append(result)
            log(f"round {rnd + 1}/{args.rounds}: {name}")

    measured = list(names)
    kept = previous_rows(args.out, threads_list) if args.update else {}
    kept = {name: row for name, row in kept.items() if name not in measured and name in zoo}
    for name, row in kept.items():
        checks[name] = (row["ok"], "kept")
    names = [name for name in zoo if name in measured or name in kept]
    date_line = (f"- date: {time.strftime('%Y-%m-%d %H:%M')} ({(time.time() - started) / 60:.1f} min); "
                 f"{args.rounds} rounds, engines interleaved, median of per-round medians (ms)")
    if kept:
        date_line = (f"- {', '.join(measured)} re-measured {time.strftime('%Y-%m-%d %H:%M')} "
                     f"({(time.time() - started) / 60:.1f} min, {args.rounds} rounds); the other rows are kept from "
                     f"the run before, whose line follows")
        before = []
        for line in open(args.out).read().split(BEGIN, 1)[1].splitlines():
            if line.startswith("- models:"):
                break
            if line.startswith("- "):
                before.append(line.replace("- date:", "- the run before:", 1))
        date_line = "\n".join([date_line] + before)
    lines = [BEGIN, "## Model zoo", "", date_line,
             "- models: `bench/zoo/models.py` (torchvision 0.14 and PyTorch modules, seeded random weights), "
             "exported at opset 17; inputs from the export, the same for every engine",
             "- check: kiln compiled against PyTorch's output, rtol 1e-4, atol 1e-5 x max|y|", ""]
    header = "| model | family | check | " + " | ".join(
        f"kiln {t}t | ORT {t}t | torch {t}t | kiln/ORT {t}t | kiln/torch {t}t" for t in threads_list) + " |"
    lines += [header, "|" + " --- |" * (3 + 5 * len(threads_list))]
    families = {}
    for name in names:
        if name in kept:  # its row as the run before printed it, and that run's ratios
            lines.append(kept[name]["row"])
            for t in threads_list:
                families.setdefault(zoo[name].family, {}).setdefault(t, []).append(kept[name]["ratios"][t][0])
                families[zoo[name].family].setdefault(f"torch{t}", []).append(kept[name]["ratios"][t][1])
            continue
        row = [name, zoo[name].family, "ok" if checks[name][0] else "**mismatch**"]
        for t in threads_list:
            k = median_of(samples.get((name, t, "kiln"), []), "median_ms")
            o = median_of(samples.get((name, t, "ort"), []), "median_ms")
            p = median_of(samples.get((name, t, "torch"), []), "median_ms")
            ro, rp = ratio(k, o), ratio(k, p)
            families.setdefault(zoo[name].family, {}).setdefault(t, []).append(ro)
            families[zoo[name].family].setdefault(f"torch{t}", []).append(rp)
            mark = lambda r: fmt(r) if r is None or r <= 1 else f"**{fmt(r)}**"
            row += [fmt(k), fmt(o), fmt(p), mark(ro), mark(rp)]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "Geometric means of kiln/ORT (and kiln/PyTorch) per family:", "",
              "| family | models | " + " | ".join(f"kiln/ORT {t}t | kiln/torch {t}t" for t in threads_list) + " |",
              "|" + " --- |" * (2 + 2 * len(threads_list))]
    for family, per in families.items():
        row = [family, str(len(per[threads_list[0]]))]
        for t in threads_list:
            row += [fmt(geomean(per[t])), fmt(geomean(per[f"torch{t}"]))]
        lines.append("| " + " | ".join(row) + " |")
    allr = {t: [r for per in families.values() for r in per[t]] for t in threads_list}
    lines.append("| **all** | " + str(len(names)) + " | " +
                 " | ".join(f"{fmt(geomean(allr[t]))} | -" for t in threads_list) + " |")
    lines += ["", "Memory at 1 thread: kiln-run's peak RSS against its weights + arena, and ORT's process peak (MB):",
              "", "| model | weights | arena | kiln peak | limit 1.3x(w+a)+64 | ORT peak |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    mb = lambda b: None if b is None else b / 1e6
    for name in names:
        if name in kept:
            if kept[name]["memory"]:
                lines.append(kept[name]["memory"])
            continue
        k = samples.get((name, threads_list[0], "kiln"), [])
        o = samples.get((name, threads_list[0], "ort"), [])
        w, a = median_of(k, "weight_bytes"), median_of(k, "arena_bytes")
        peak, orp = median_of(k, "peak_rss_bytes"), median_of(o, "peak_rss_bytes")
        limit = 1.3 * (w + a) + 64e6 if w is not None and a is not None else None
        over = peak is not None and limit is not None and (peak > limit or (orp and peak > orp))
        cell = fmt(mb(peak), 1) if not over else f"**{fmt(mb(peak), 1)}**"
        lines.append(f"| {name} | {fmt(mb(w), 1)} | {fmt(mb(a), 1)} | {cell} | {fmt(mb(limit), 1)} | {fmt(mb(orp), 1)} |")
    lines.append(END)

    text = open(args.out).read() if os.path.exists(args.out) else ""
    section = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    log(f"wrote the zoo section of {args.out}")
    return 0 if all(ok for ok, _ in checks.values()) else 1


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
