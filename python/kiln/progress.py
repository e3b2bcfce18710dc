"""The training loop's progress display: tqdm's bar when tqdm is importable, else a plain one
(one line redrawn in place on a terminal, nothing between epochs otherwise), and one line per
epoch with its mean loss and, with validation data, the validation loss and accuracy."""
import sys
import time

try:
    import tqdm as _tqdm
except ImportError:  # tqdm is optional (Debian's python3-tqdm)
    _tqdm = None


def epoch_line(report, epochs):
    line = f"epoch {report['epoch'] + 1}/{epochs}: loss {report['loss']:.6g}"
    if report.get("val_loss") is not None:
        line += f", val loss {report['val_loss']:.6g}"
    if report.get("val_accuracy") is not None:
        line += f", val accuracy {100 * report['val_accuracy']:.2f}%"
    return line + f" ({report['samples']} samples, {report['seconds']:.2f} s)"


class PlainBar:
    """A text bar on `stream` when it is a terminal, redrawn at most ten times a second."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.live = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.drawn_at = 0.0

    def update(self, p):
        now = time.monotonic()
        if not self.live or (now - self.drawn_at < 0.1 and p["update"] < p["updates"]):
            return
        self.drawn_at = now
        done = p["update"] / max(p["updates"], 1)
        rate = p["samples"] / p["seconds"] if p["seconds"] > 0 else 0.0
        eta = (p["epoch_samples"] - p["samples"]) / rate if rate > 0 else 0.0
        bar = "#" * int(24 * done) + "." * (24 - int(24 * done))
        self.stream.write(f"\repoch {p['epoch'] + 1}/{p['epochs']} [{bar}] {p['update']}/{p['updates']} "
                          f"loss {p['mean_loss']:.4g} {rate:.0f} samples/s ETA {eta:.0f} s ")
        self.stream.flush()

    def end_epoch(self, line):
        if self.live:
            self.stream.write("\r\033[K")
        print(line, flush=True)


class TqdmBar:
    def __init__(self):
        self.bar = None
        self.epoch = None

    def update(self, p):
        if self.epoch != p["epoch"]:
            self.epoch = p["epoch"]
            self.bar = _tqdm.tqdm(total=p["updates"], desc=f"epoch {p['epoch'] + 1}/{p['epochs']}", unit="batch",
                                  leave=False)
        self.bar.update(p["update"] - self.bar.n)
        self.bar.set_postfix(loss=f"{p['mean_loss']:.4g}", refresh=False)

    def end_epoch(self, line):
        if self.bar is not None:
            self.bar.close()
            self.bar, self.epoch = None, None
        _tqdm.tqdm.write(line)


def make_bar():
    return TqdmBar() if _tqdm is not None else PlainBar()
