"""bench/zoo/bench_zoo.py --update: the rows it keeps from the zoo section already in the
results file, read back by previous_rows (each model's two table rows as they stand, its check
and its ratios for the family means), and nothing outside the section's markers."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "zoo"))
import bench_zoo  # noqa: E402

SECTION = """# results

| model | unrelated | table | before | the section |
| --- | --- | --- | --- | --- |
| lenet | 1 | 2 | 3 | 4 |

<!-- zoo:begin -->
## Model zoo

- date: 2026-11-29 16:12 (40.5 min); 2 rounds
- models: ...

| model | family | check | kiln 1t | ORT 1t | torch 1t | kiln/ORT 1t | kiln/torch 1t | kiln 2t | ORT 2t | torch 2t | kiln/ORT 2t | kiln/torch 2t |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
| resnet50_b1 | resnet | ok | 42.20 | 45.33 | 75.88 | 0.93 | 0.56 | 26.39 | 27.40 | 0.96 | 0.96 | 0.51 |
| mnasnet_b8 | mnasnet | **mismatch** | 45.47 | 38.73 | 473.95 | **1.17** | 0.10 | 24.11 | 22.01 | - | **1.10** | - |

| family | models | kiln/ORT 1t | kiln/torch 1t | kiln/ORT 2t | kiln/torch 2t |
| --- | --- | --- | --- | --- | --- |
| resnet | 1 | 0.93 | 0.56 | 0.96 | 0.51 |

| model | weights | arena | kiln peak | limit 1.3x(w+a)+64 | ORT peak |
| --- | ---: | ---: | ---: | ---: | ---: |
| resnet50_b1 | 102.1 | 5.2 | 163.9 | 203.5 | 347.8 |
| mnasnet_b8 | 17.5 | 32.1 | **300.3** | 128.4 | 186.3 |
<!-- zoo:end -->

| model | after | the | section | . |
| --- | --- | --- | --- | --- |
| after_b1 | 1 | 2 | 3 | 4 |
"""


def test_previous_rows_keep_each_model_as_printed(tmp_path):
    path = tmp_path / "results.md"
    path.write_text(SECTION)
    rows = bench_zoo.previous_rows(str(path), [1, 2])
    assert sorted(rows) == ["mnasnet_b8", "resnet50_b1"]  # not the family rows, nor tables outside
    resnet, mnasnet = rows["resnet50_b1"], rows["mnasnet_b8"]
    assert resnet["ok"] and not mnasnet["ok"]
    assert resnet["row"].startswith("| resnet50_b1 | resnet | ok | 42.20 |")
    assert resnet["memory"] == "| resnet50_b1 | 102.1 | 5.2 | 163.9 | 203.5 | 347.8 |"
    assert mnasnet["memory"].startswith("| mnasnet_b8 | 17.5 | 32.1 | **300.3** |")
    assert resnet["ratios"] == {1: (0.93, 0.56), 2: (0.96, 0.51)}
    assert mnasnet["ratios"] == {1: (1.17, 0.10), 2: (1.10, None)}  # bold and '-' cells


def test_previous_rows_without_a_section(tmp_path):
    path = tmp_path / "results.md"
    path.write_text("# results\n\nno zoo yet\n")
    assert bench_zoo.previous_rows(str(path), [1, 2]) == {}
    assert bench_zoo.previous_rows(str(tmp_path / "missing.md"), [1, 2]) == {}
