#!/usr/bin/env bash
# One GPU session: the `gpu` tests, the book's measurements and the gate calibration, in
# one go, with every log under OUT_DIR. Run from the repository root on a machine with an
# NVIDIA GPU, PyCUDA and nbgrader (pip install -r requirements-gpu.txt), e.g.
#
#   bash benchmarks/gpu_session.sh /tmp/gpu-out             # everything
#   bash benchmarks/gpu_session.sh out tests bench          # only some steps (or STEPS=...)
#
# Steps: tests (the `gpu` tests of the runtime and the grader), class (the nbgrader class
# run in this process with speed gates: tests/test_classroom.py), corpus (the bad-submission
# corpus's GPU cases), bench (tilelab bench: every GPU experiment -> OUT_DIR/data), calibrate
# (tilelab calibrate -> OUT_DIR/gates.json), cluster (the Dask executor's `gpu` tests in
# tests/test_class_cluster.py: a LocalCUDACluster worker per GPU; needs dask-cuda), scale
# (benchmarks/class_scale.py --gpu with 1 worker, this process, and 2 Dask workers: needs
# two GPUs; SCALE_STUDENTS learners, 24 by default; every task's time and the median
# seconds of each grading step in OUT_DIR/scale.json), checktimes (`tilelab check` on the
# GPU: p50/p95 per exercise and the median seconds of each grading step), locktests (the
# `gpu` test of tests/test_gpulock.py: three graders sharing one GPU through its lock each
# measure speed and read counters), countersload
# (tilelab bench counters_load: the lesson gate's counts alone and beside a process that
# keeps the GPU busy; where all are equal, the later steps of this run count with
# TILELAB_COUNTERS_LOCK=shared, else alone), startload (tilelab bench start_load: the
# grader's speed run alone and beside other processes' CUDA starts and ends, plain and
# under each GPU tool; where all are equal, the later steps of this run start CUDA with
# TILELAB_START_LOCK=none, else shared), pergpu (tilelab bench gpu_sharing: class_scale
# on one GPU with 1, 2, 4 and 8 tasks at once, PERGPU_STUDENTS learners, 4 by default,
# the first setting's run PERGPU_BASE_STUDENTS of them (default all):
# submissions per minute, grades identical, the cost of 1,000 learners x 5 kernels on one
# GPU and on 8 -> OUT_DIR/data/gpu_sharing.json), sharedgpu (tilelab bench shared_gpu:
# verdicts on the wrong side of the gate with two graders on one GPU, without and with the
# GPU's lock),
# hostile (tilelab check on the GPU of each replaying and lesson-skipping kernel of
# tests/fixtures/submissions, then the `gpu` tests of the replay-proof speed run and of the
# counters, which print ncu's time per kernel; OUT_DIR/hostile.json holds each verdict),
# book (every GPU measurement the chapters read but the counters, in one `tilelab bench`
# process -> OUT_DIR/data, the most needed first: device, cublas_check, sgemm, matmul,
# transpose, bank_wide, bank_stride, elementwise, occupancy, sass, shared_bw, divergence,
# waves, latency, racecheck; each experiment's seconds in book.log; about 6 minutes on an
# H200), bookcounters (the rest of the chapters' files -> OUT_DIR/data: counters under
# Nsight Compute, then without a GPU sgemm_ptxas, emu_analysis and model from the files
# in OUT_DIR/data, then `tilelab calibrate`; about 5 minutes; run it after book into the
# same OUT_DIR, or copy book's OUT_DIR/data there first), datacheck (whether
# OUT_DIR/data describes one GPU and today's kernels: the test
# tests/test_data_provenance.py runs the same check on book/data),
# road (the road to cuBLAS alone: the Nsight Compute counters of every course kernel,
# chapter 6's included, matmul.json and the sgemm table with the ablations and step 6 ->
# OUT_DIR/data; then, without a GPU, `tilelab bench model --out book/data` once the files
# are in book/data), sweep (benchmarks/sgemm_sweep.py: the configurations of the road's last
# steps checked, timed against cuBLAS and the best profiled by ncu -> OUT_DIR/sgemm_sweep.json;
# SWEEP_SET=2 for the second, narrower set), sandbox (what each sandbox sees, its cgroup caps and a GPU kernel
# graded inside its cgroup), notebooks (every solutions notebook run top to bottom on the
# GPU, each step's hidden tests and speed gates included: times in OUT_DIR/notebooks.json),
# fidelity (benchmarks/fidelity_diff.py --gpu --no-emulator: FIDELITY_COUNT generated
# kernels, 2400 by default, built by nvcc and run on the GPU, no module started after
# FIDELITY_SECONDS; the GPU's outcomes -> OUT_DIR/fidelity/gpu_outcomes.jsonl as they come:
# compare the emulator with them on any machine, `fidelity_diff.py --truth FILE`).
# A summary table is printed last.
set -uo pipefail
known="tests sandbox hostile class corpus bench book bookcounters datacheck road sweep calibrate \
cluster scale checktimes locktests countersload startload pergpu sharedgpu notebooks fidelity"
out="${1:?usage: gpu_session.sh OUT_DIR [STEP ...]}"
if [[ " $known " == *" $out "* ]]; then  # a step where the folder goes: nothing is run
  echo "gpu_session.sh: the first argument is the output folder, not a step ($out);" \
       "usage: gpu_session.sh OUT_DIR [STEP ...]" >&2
  exit 2
fi
shift
steps="${*:-${STEPS:-tests sandbox hostile class corpus bench calibrate notebooks}}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
# the code revision every data file records (a GPU machine's copy of the tree has no .git:
# pass TILELAB_REVISION and TILELAB_DIRTY from the checkout the copy came from)
if [ -z "${TILELAB_REVISION:-}" ] && git rev-parse HEAD >/dev/null 2>&1; then
  export TILELAB_REVISION=$(git rev-parse HEAD)
  [ -n "$(git status --porcelain --untracked-files=no)" ] && export TILELAB_DIRTY=1 || export TILELAB_DIRTY=0
fi
echo "code revision: ${TILELAB_REVISION:-unknown} (dirty: ${TILELAB_DIRTY:-unknown})"
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
    sandbox) run_step sandbox "${SANDBOX_LIMIT:-300}" "$py" -m pytest -p no:cacheprovider \
             -o addopts= -rA -s tests/test_limits.py tests/test_sandbox_view.py \
             tests/test_bubblewrap.py ;;
    class) run_step class "${CLASS_LIMIT:-500}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -s tests/test_classroom.py ;;
    bench) run_step bench "${BENCH_LIMIT:-900}" "$py" -m tilelab.cli bench device cublas_check \
             matmul transpose elementwise bank_stride bank_wide occupancy sass racecheck \
             shared_bw divergence waves latency sgemm counters sgemm_ptxas emu_analysis model \
             --out "$out/data" ;;
    book) run_step book "${BOOK_LIMIT:-530}" "$py" -m tilelab.cli bench device cublas_check \
             sgemm matmul transpose bank_wide bank_stride elementwise occupancy sass \
             shared_bw divergence waves latency racecheck --out "$out/data"
       [ -f "$out/data/sgemm.json" ] && "$py" benchmarks/sgemm_table.py "$out/data" ;;
    bookcounters) run_step bookcounters "${BOOKCOUNTERS_LIMIT:-530}" bash -c "\"\$1\" -m \
             tilelab.cli bench counters sgemm_ptxas emu_analysis model --out \"\$2/data\"; \
             \"\$1\" -m tilelab.cli calibrate --write \"\$2/gates.json\" --out \"\$2/data\"" \
             _ "$py" "$out" ;;
    datacheck) run_step datacheck 60 "$py" -c "import sys; from tilelab.experiments import \
             datacheck; p = datacheck.problems(sys.argv[1]); print('\n'.join(p) or \
             'one GPU, today\'s kernels'); sys.exit(bool(p))" "$out/data" ;;
    road) run_step road "${ROAD_LIMIT:-900}" "$py" -m tilelab.cli bench counters matmul sgemm \
             --out "$out/data" ;;
    sweep) run_step sweep "${SWEEP_LIMIT:-580}" "$py" benchmarks/sgemm_sweep.py --gpu \
             --set "${SWEEP_SET:-1}" --out "$out" --ncu 4 ;;
    calibrate) run_step calibrate "${CALIBRATE_LIMIT:-300}" "$py" -m tilelab.cli calibrate \
             --write "$out/gates.json" --out "$out/data" ;;
    cluster) run_step cluster "${CLUSTER_LIMIT:-200}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA tests/test_class_cluster.py ;;
    scale) run_step scale "${SCALE_LIMIT:-540}" "$py" benchmarks/class_scale.py --gpu \
             --students "${SCALE_STUDENTS:-24}" --workers 1 2 --json "$out/scale.json" ;;
    checktimes) run_step checktimes "${CHECKTIMES_LIMIT:-100}" "$py" benchmarks/check_times.py \
             --backend gpu --repeat "${CHECKTIMES_REPEAT:-3}" --exercise naive tiled ;;
    locktests) run_step locktests "${LOCKTESTS_LIMIT:-150}" "$py" -m pytest -m gpu \
             -p no:cacheprovider -o addopts= -rA -s tests/test_gpulock.py ;;
    countersload) run_step countersload "${COUNTERSLOAD_LIMIT:-150}" "$py" -m tilelab.cli bench \
             counters_load --out "$out/data"
       if [ -f "$out/data/counters_load.json" ]; then
         "$py" -c "import json,sys; [print(r['exercise'], r['kernel'], '| equal' if r['equal'] \
             else '| DIFFERENT ' + r['differing'], '|', r['load_launches'], 'busy launches', \
             r['error']) for r in json.load(open(sys.argv[1]))['rows']]" "$out/data/counters_load.json"
         TILELAB_COUNTERS_LOCK=$("$py" -m tilelab.experiments.counters_load setting \
             "$out/data/counters_load.json") && export TILELAB_COUNTERS_LOCK
         echo "counted launches from here on: TILELAB_COUNTERS_LOCK=$TILELAB_COUNTERS_LOCK"
       fi ;;
    startload) run_step startload "${STARTLOAD_LIMIT:-240}" "$py" -m tilelab.cli bench \
             start_load --out "$out/data"
       if [ -f "$out/data/start_load.json" ]; then
         "$py" -c "import json,sys; [print(r['kind'], '| equal' if r['equal'] else \
             '| DIFFERENT ' + r['differing'], '| shift', r['shift'], '% | alone spread', \
             r['alone_spread'], '% |', r['starts'], 'starts', r['error']) \
             for r in json.load(open(sys.argv[1]))['rows']]" "$out/data/start_load.json"
         TILELAB_START_LOCK=$("$py" -m tilelab.experiments.start_load setting \
             "$out/data/start_load.json") && export TILELAB_START_LOCK
         echo "CUDA starts from here on: TILELAB_START_LOCK=$TILELAB_START_LOCK"
       fi ;;
    pergpu) export TILELAB_GPU_SHARING_STUDENTS="${PERGPU_STUDENTS:-4}"
       export TILELAB_GPU_SHARING_BASE_STUDENTS="${PERGPU_BASE_STUDENTS:-}"
       if [ -z "${TILELAB_COUNTERS_LOCK:-}" ] && [ -f "$out/data/counters_load.json" ]; then
         TILELAB_COUNTERS_LOCK=$("$py" -m tilelab.experiments.counters_load setting \
             "$out/data/counters_load.json") && export TILELAB_COUNTERS_LOCK
       fi
       if [ -z "${TILELAB_START_LOCK:-}" ] && [ -f "$out/data/start_load.json" ]; then
         TILELAB_START_LOCK=$("$py" -m tilelab.experiments.start_load setting \
             "$out/data/start_load.json") && export TILELAB_START_LOCK
       fi
       echo "counted launches: TILELAB_COUNTERS_LOCK=${TILELAB_COUNTERS_LOCK:-alone}," \
            "CUDA starts: TILELAB_START_LOCK=${TILELAB_START_LOCK:-shared}"
       run_step pergpu "${PERGPU_LIMIT:-330}" "$py" -m tilelab.cli bench gpu_sharing \
             --out "$out/data"
       grep -A6 "tasks per GPU |" "$out/pergpu.log"
       grep -E "median step seconds|grades identical" "$out/pergpu.log" ;;
    sharedgpu) run_step sharedgpu "${SHAREDGPU_LIMIT:-180}" "$py" -m tilelab.cli bench shared_gpu \
             --out "$out/data" && "$py" -c "import json,sys; [print(r['variant'], '|', r['setting'], '|', \
             r['wrong_side'], 'of', r['verdicts'], 'on the wrong side') for r in \
             json.load(open(sys.argv[1]))['rows']]" "$out/data/shared_gpu.json" ;;
    fidelity) run_step fidelity "${FIDELITY_LIMIT:-420}" "$py" benchmarks/fidelity_diff.py --gpu \
             --no-emulator --seconds "${FIDELITY_SECONDS:-360}" --count "${FIDELITY_COUNT:-2400}" \
             --out "$out/fidelity" ;;
    notebooks) run_step notebooks "${NOTEBOOKS_LIMIT:-400}" "$py" benchmarks/run_notebooks.py \
             --backend gpu --json "$out/notebooks.json" ;;
    corpus) run_step corpus "${CORPUS_LIMIT:-300}" "$py" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -s tests/test_corpus.py ;;
    hostile) run_step hostile "${HOSTILE_LIMIT:-590}" bash -c "\"\$1\" benchmarks/hostile_gpu.py \
             --json \"\$2/hostile.json\"; \"\$1\" -m pytest -m gpu -p no:cacheprovider \
             -o addopts= -rA -s tests/test_gpu_grading.py tests/test_lesson_gate.py \
             tests/test_grade.py -k 'replay or speed_run or ncu or counters or racing'" _ "$py" "$out" ;;
    *) echo "unknown step $s ($known)"
       exit 2 ;;
  esac
done
echo
echo "step        result"
for s in $steps; do printf '%-12s %s\n' "$s" "${status[$s]:-not run}"; done
[ -f "$out/datacheck.log" ] && cat "$out/datacheck.log"
for s in tests sandbox class corpus cluster; do
  [ -f "$out/$s.log" ] && echo "$s: $(grep -E '^=+ .*(passed|failed|error|skipped).* =+$' "$out/$s.log" | tail -1)"
done
