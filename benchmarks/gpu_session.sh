#!/usr/bin/env bash
# One GPU session: the `gpu` tests, the book's measurements and the gate calibration, in
# one go, with every log under OUT_DIR. Run from the repository root on a machine with an
# NVIDIA GPU, PyCUDA and nbgrader (pip install -r requirements-gpu.txt), e.g.
#
#   bash benchmarks/gpu_session.sh /tmp/gpu-out             # everything
#   STEPS="tests bench" bash benchmarks/gpu_session.sh out  # only some steps
#
# Steps: tests (the `gpu` tests of the runtime and the grader), class (the nbgrader class
# pipeline with speed gates), corpus (the bad-submission corpus's GPU cases), bench
# (tilelab bench: every GPU experiment -> OUT_DIR/data), calibrate (tilelab calibrate ->
# OUT_DIR/gates.json), cluster (the Dask cluster's `gpu` tests: a LocalCUDACluster worker per
# GPU; needs dask-cuda), scale (benchmarks/class_scale.py --gpu with 1 and 2 workers: needs
# two GPUs; SCALE_STUDENTS learners, 24 by default; every task's time and the median
# seconds of each grading step in OUT_DIR/scale.json), road (the road to cuBLAS alone: the
# Nsight Compute counters of every course kernel, chapter 6's included, matmul.json and the
# sgemm table with the ablations and step 6 -> OUT_DIR/data; then, without a GPU,
# `tilelab bench model --out book/data` once the files are in book/data). A summary table is printed last.
set -uo pipefail
out="${1:?usage: gpu_session.sh OUT_DIR}"
steps="${STEPS:-tests class corpus bench calibrate}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py="${PYTHON:-python3}"
declare -A status

run_step() {  # name, time limit (s), command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "=== $name ($*)"
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  status[$name]="rc=$rc $((SECONDS - t0))s"
  tail -n 25 "$out/$name.log"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for s in $steps; do
  case $s in
    tests) run_step tests "${TESTS_LIMIT:-600}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -v tests --ignore=tests/test_classroom.py \
             --ignore=tests/test_corpus.py ;;
    class) run_step class "${CLASS_LIMIT:-500}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -s tests/test_classroom.py ;;
    bench) run_step bench "${BENCH_LIMIT:-900}" "$py" -m tilelab.cli bench device matmul transpose \
             elementwise bank_stride occupancy sass racecheck shared_bw divergence \
             waves latency counters sgemm sgemm_ptxas --out "$out/data" ;;
    road) run_step road "${ROAD_LIMIT:-900}" "$py" -m tilelab.cli bench counters matmul sgemm \
             --out "$out/data" ;;
    calibrate) run_step calibrate "${CALIBRATE_LIMIT:-300}" "$py" -m tilelab.cli calibrate \
             --write "$out/gates.json" --out "$out/data" ;;
    cluster) run_step cluster "${CLUSTER_LIMIT:-200}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA tests/test_class_cluster.py ;;
    scale) run_step scale "${SCALE_LIMIT:-540}" "$py" benchmarks/class_scale.py --gpu \
             --students "${SCALE_STUDENTS:-24}" --workers 1 2 --json "$out/scale.json" ;;
    corpus) run_step corpus "${CORPUS_LIMIT:-300}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -s tests/test_corpus.py ;;
    *) echo "unknown step $s (tests class corpus bench road calibrate cluster scale)"; exit 2 ;;
  esac
done
echo
echo "step        result"
for s in $steps; do printf '%-11s %s\n' "$s" "${status[$s]:-not run}"; done
for s in tests class corpus cluster; do
  [ -f "$out/$s.log" ] && echo "$s: $(grep -E '^=+ .*(passed|failed|error|skipped).* =+$' "$out/$s.log" | tail -1)"
done
