"""The seed workloads through kiln.Session give exactly what kiln-run gives: the same compile
path, bit for bit (both on 2 threads, since a contraction's split of its reduction follows
the thread count). CTest runs this with the seed-small fixture, which exports the models."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import kiln

SEEDS = os.environ.get("KILN_SEEDS")
KILN_RUN = os.environ.get("KILN_RUN")


def bits(array):
    return array.view(np.dtype(f"u{array.dtype.itemsize}"))


@pytest.mark.parametrize("name", ["mlp_b1024", "lenet5_b64"])
def test_seed_matches_kiln_run_bit_for_bit(name, tmp_path):
    if not SEEDS or not KILN_RUN:
        pytest.skip("KILN_SEEDS and KILN_RUN are set by CTest (tests/CMakeLists.txt)")
    model = pathlib.Path(SEEDS) / f"{name}.onnx"
    feed = pathlib.Path(SEEDS) / f"{name}.input.npy"
    written = tmp_path / "y.npy"
    subprocess.run([KILN_RUN, str(model), "--threads", "2", "--input", f"x={feed}", "--output", f"y={written}"],
                   check=True, stdout=subprocess.DEVNULL)
    expected = np.load(written)
    x = np.load(feed)

    session = kiln.Session(model, threads=2)
    got = session.run({"x": x})["y"]
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.array_equal(bits(got), bits(expected))

    # The same model from its bytes, and written ahead of time and loaded back.
    from_bytes = kiln.Session(model.read_bytes(), threads=2).run({"x": x})["y"]
    assert np.array_equal(bits(from_bytes), bits(expected))
    session.save(tmp_path / f"{name}.so")
    loaded = kiln.load(tmp_path / f"{name}.so", threads=2).run({"x": x})["y"]
    assert np.array_equal(bits(loaded), bits(expected))
