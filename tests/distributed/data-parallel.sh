#!/usr/bin/env bash
# Data-parallel training on 2 ranks (kiln-run --data-parallel under mpirun; distributed/
# DataParallel.h), on the seed MLP of examples/train_classifier (no BatchNorm):
#  1. 2 ranks on global batch 128 (64 each) give, update for update, the losses, the validation
#     figures and the final parameters of 1 process compiled for batch 128, within rtol 1e-5; the
#     data (1000 samples) ends every epoch in a short batch (104), padded on each rank; the ranks'
#     parameters are bitwise identical at the end (the run checks it and says so); the same with
#     --accumulate 2 at batch 256 (2 micro-batches of 64 on each rank against 2 of 128); both
#     2-rank runs compare the ranks' parameters after every update (--check-identical), and
#     report the allreduce of each update (overlapping the backward pass) and its mean;
#  2. a run stopped after a checkpoint and resumed from it on 2 ranks ends where the
#     uninterrupted 2-rank run ends, byte for byte;
#  3. a rank that exits mid-run, or hangs, ends the job with a non-zero status within the
#     timeout, the hang with kiln's one-line message; a rank whose summed gradients are one ulp
#     off at update 3 is caught by --check-identical after that very update.
# Usage: data-parallel.sh BUILD_DIR [MPIRUN]. Open MPI's switches for running as root come from the test's
# environment (tests/CMakeLists.txt), not from here.
set -euo pipefail
build=$1
mpirun=${2:-mpirun}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$build/train_classifier" --write-data "$dir/d" >/dev/null
sed 's/\[64,/[128,/g' "$dir/d/mlp.kir" >"$dir/mlp128.kir" # the same MLP for one process at batch 128
grep -q 'f32\[128,1024\]' "$dir/mlp128.kir"

common=(--train cross-entropy --optimizer sgd --lr 0.05 --momentum 0.9 --data "x=$dir/d/val_x.npy"
        --labels "$dir/d/val_labels.npy" --batch-size 128 --epochs 2 --shuffle --seed 3 --threads 1)
mpi=("$mpirun" --oversubscribe -np 2 -x KILN_DATA_PARALLEL_FAULT)
export KILN_DATA_PARALLEL_FAULT=

fail() { echo "data-parallel: $*"; exit 1; }

# 1. One process at batch 128 against two ranks of 64.
"$build/kiln-run" "$dir/mlp128.kir" "${common[@]}" --log-every 1 --load "$dir/d/init" \
  --val "x=$dir/d/train_x.npy" --val-labels "$dir/d/train_labels.npy" --save "$dir/one.safetensors" \
  >"$dir/one.txt" 2>&1 || { cat "$dir/one.txt"; fail "the 1-process run failed"; }
"${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" --log-every 1 --load "$dir/d/init" \
  --val "x=$dir/d/train_x.npy" --val-labels "$dir/d/train_labels.npy" --save "$dir/two.safetensors" \
  --data-parallel --check-identical >"$dir/two.txt" 2>&1 || { cat "$dir/two.txt"; fail "the 2-rank run failed"; }
grep -q '^data: 1000 samples, batches of 128 over 2 ranks, 8 updates per epoch' "$dir/two.txt" ||
  { cat "$dir/two.txt"; fail "no data line for 2 ranks"; }
grep -q '^data parallel: the parameters are bitwise identical on all 2 ranks' "$dir/two.txt" ||
  { cat "$dir/two.txt"; fail "no bitwise-identity line"; }
grep -q '^data parallel: the parameters were bitwise identical on all 2 ranks after each of the 16 updates' "$dir/two.txt" ||
  { cat "$dir/two.txt"; fail "no per-update identity line"; }
[ "$(grep -c '^update ' "$dir/two.txt")" = 16 ] || { cat "$dir/two.txt"; fail "rank 0 alone should print 16 updates"; }
[ "$(grep -cE '^update [0-9]+ loss \S+ lr \S+ allreduce [0-9.]+ ms, [0-9]+% overlapped$' "$dir/two.txt")" = 16 ] ||
  { cat "$dir/two.txt"; fail "an update line without its allreduce figures"; }
grep -qE '^data parallel: allreduce of [0-9.]+ MB in [0-9]+ buckets? per update: [0-9.]+ ms in flight, [0-9]+% of it overlapped' \
  "$dir/two.txt" || { cat "$dir/two.txt"; fail "no allreduce summary"; }
# With accumulation: 1000 samples in 3 updates of 256 and one of 232 (116 a rank: 64 + 52 padded).
acc=(--batch-size 256 --accumulate 2 --epochs 1 --log-every 1 --load "$dir/d/init")
"$build/kiln-run" "$dir/mlp128.kir" "${common[@]}" "${acc[@]}" --save "$dir/one-acc.safetensors" >"$dir/one-acc.txt" 2>&1 ||
  { cat "$dir/one-acc.txt"; fail "the 1-process run with --accumulate failed"; }
"${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" "${acc[@]}" --save "$dir/two-acc.safetensors" \
  --data-parallel --check-identical >"$dir/two-acc.txt" 2>&1 || { cat "$dir/two-acc.txt"; fail "the 2-rank run with --accumulate failed"; }
grep -q '^data: 1000 samples, batches of 256 over 2 ranks (2 micro-batches of 64), 4 updates per epoch' "$dir/two-acc.txt" ||
  { cat "$dir/two-acc.txt"; fail "no data line for 2 ranks with --accumulate"; }
grep -q '^data parallel: the parameters were bitwise identical on all 2 ranks after each of the 4 updates' "$dir/two-acc.txt" ||
  { cat "$dir/two-acc.txt"; fail "no per-update identity line with --accumulate"; }
/usr/bin/python3 - "$dir" <<'PY'
import json, re, struct, sys
import numpy as np
d = sys.argv[1]
def figures(name):
    text = open(f"{d}/{name}.txt").read()
    losses = [float(m) for m in re.findall(r"^update \d+ loss (\S+)", text, re.M)]
    val = [(float(a), float(b)) for a, b in re.findall(r"val loss (\S+), val accuracy (\S+)%", text)]
    return np.array(losses), np.array(val)
def tensors(name):
    raw = open(f"{d}/{name}.safetensors", "rb").read()
    size = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + size])
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = {"F32": np.float32, "F64": np.float64, "I64": np.int64}[info["dtype"]]
        out[key] = np.frombuffer(raw[8 + size + begin:8 + size + end], dtype).reshape(info["shape"])
    return out
def compare(one_name, two_name, updates, validations):
    one, two = figures(one_name), figures(two_name)
    assert len(one[0]) == len(two[0]) == updates, (len(one[0]), len(two[0]))
    np.testing.assert_allclose(two[0], one[0], rtol=1e-5, err_msg="losses per update")
    assert len(one[1]) == len(two[1]) == validations
    if validations:
        np.testing.assert_allclose(two[1], one[1], rtol=1e-5, err_msg="validation loss and accuracy")
    a, b = tensors(one_name), tensors(two_name)
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for key in a:
        np.testing.assert_allclose(b[key], a[key], rtol=1e-5, atol=1e-7, err_msg=key)
    print(f"data-parallel: {updates} losses, {validations} validations and {len(a)} tensors of 2 ranks ({two_name}) "
          f"match 1 process within rtol 1e-5 (largest loss difference {np.max(np.abs(two[0] - one[0]) / np.abs(one[0])):.2e})")
compare("one", "two", 16, 2)
compare("one-acc", "two-acc", 4, 0)
PY

# 2. Stopped after update 6 (a checkpoint at 4 and at the stop) and resumed, on 2 ranks.
"${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" --load "$dir/d/init" --data-parallel \
  --save "$dir/part.safetensors" --save-every 4 --stop-after 6 >"$dir/part.txt" 2>&1 ||
  { cat "$dir/part.txt"; fail "the stopped run failed"; }
"${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" --load "$dir/part.safetensors" --data-parallel \
  --save "$dir/resumed.safetensors" >"$dir/resumed.txt" 2>&1 || { cat "$dir/resumed.txt"; fail "the resumed run failed"; }
grep -q '^resuming after update 6 of 16' "$dir/resumed.txt" || { cat "$dir/resumed.txt"; fail "no resume line"; }
cmp "$dir/two.safetensors" "$dir/resumed.safetensors" || fail "the resumed run ends elsewhere than the uninterrupted one"
echo "data-parallel: the run resumed after update 6 on 2 ranks ends byte for byte as the uninterrupted one"

# 3. Faults: each must end the job non-zero, well within the test's time. (--log-every: whole
# lines, no progress bar for the fault's line to land inside.)
for fault in exit hang; do
  start=$(date +%s)
  status=0
  KILN_DATA_PARALLEL_FAULT="$fault:1:3" "${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" \
    --load "$dir/d/init" --data-parallel --mpi-timeout 3 --log-every 1 >"$dir/$fault.txt" 2>&1 || status=$?
  seconds=$(($(date +%s) - start))
  [ "$status" -ne 0 ] || { cat "$dir/$fault.txt"; fail "a rank that ${fault}s left the job's status 0"; }
  [ "$seconds" -lt 60 ] || fail "a rank that ${fault}s took the job $seconds s to end"
  grep -q "rank 1 ${fault}s at update 3" "$dir/$fault.txt" || { cat "$dir/$fault.txt"; fail "the fault did not happen"; }
  if [ "$fault" = hang ]; then
    grep -q 'kiln data-parallel: rank 0 of 2 waited 3 s for the gradients (1 bucket); another rank died or hangs' \
      "$dir/$fault.txt" || { cat "$dir/$fault.txt"; fail "no timeout message"; }
  fi
  echo "data-parallel: a rank that ${fault}s at update 3 ends the job with status $status in $seconds s"
done

# A rank whose parameters drift: --check-identical stops the job at the update that did it.
status=0
KILN_DATA_PARALLEL_FAULT="skew:1:3" "${mpi[@]}" "$build/kiln-run" "$dir/d/mlp.kir" "${common[@]}" \
  --load "$dir/d/init" --data-parallel --check-identical --log-every 1 >"$dir/skew.txt" 2>&1 || status=$?
[ "$status" -ne 0 ] || { cat "$dir/skew.txt"; fail "parameters that differ across ranks left the job's status 0"; }
grep -qE "the parameters of rank 1 \(checksum [0-9a-f]+\) differ from rank 0's \([0-9a-f]+\) after update 3$" "$dir/skew.txt" ||
  { cat "$dir/skew.txt"; fail "--check-identical did not name update 3"; }
echo "data-parallel: a rank whose gradients are one ulp off at update 3 is caught after update 3"
