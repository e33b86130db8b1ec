"""On a GPU a speed gate is passed only with the lesson, judged from the GPU's own counters
(Nsight Compute over the timed nvcc build at the speed shape); the emulator's count of the
same source is feedback beside them. Without a GPU, the parser and the rules are tested on
hand-written ncu output (tests/fixtures/ncu, a fixture, not a measurement); the `gpu` tests
read the real counters."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from support import running

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.catalog.variants import VARIANTS
from tilelab.device.backend import Backend
from tilelab.experiments import counters_load
from tilelab.grading import counters, pipeline, traffic
from tilelab.grading.gpu_steps import count_traffic, grade_lesson
from tilelab.grading.judge import Kind
from tilelab.grading.steps import Run
from tilelab.grading.verdict import Verdict

NCU = Path(__file__).parent / "fixtures" / "ncu"


def recorded(name: str) -> dict[str, float]:
    """The counts of a hand-written ncu CSV, as :func:`counters.measure` returns them."""
    launches = counters.parse((NCU / f"{name}.csv").read_text())
    assert len(launches) == 1
    names = {v: k for k, v in counters.METRICS.items()}
    return {names[m]: v for m, v in launches[0].items()}


def timed(exercise_id: str, speedup: float, counts: dict[str, float] | None = None) -> Run:
    """A GPU grade as the timed run leaves it: right at every shape, timed at ``speedup``;
    ``counts``: what its Nsight Compute run read (None: no run started ahead)."""
    ex = exercises.get(exercise_id)
    run = Run(ex, SimpleNamespace(name=Backend.GPU), ex.reference.source(),
              pipeline.names(pipeline.GPU_ORDER), text=ex.reference.source())
    run.find(Kind.CHECKED, step="check_outputs")
    run.find(Kind.TIMED, step="time_speed", speed_measured=True, speedup=speedup)
    if speedup < ex.gate:
        run.find(Kind.SLOW, "speed: under the gate", step="time_speed")
    if counts is not None:
        run.counting = SimpleNamespace(result=lambda: counts, marks={}, stop=lambda: None)
    run.step = "grade_lesson"
    return run


def lesson(run: Run) -> Verdict:
    """The verdict once the lesson step has judged ``run``."""
    grade_lesson(run)
    return run.so_far()


def variant(exercise_id: str, key: str) -> str:
    return next(v for v in VARIANTS[exercise_id] if v.key == key).source()


def test_ncus_csv_is_read_into_the_lessons_figures():
    c = recorded("transpose_padded-unpadded")
    assert set(c) == set(counters.METRICS)
    f = counters.figures(exercises.get("transpose_padded"), c)
    assert f["shared_wavefronts_per_load"] == pytest.approx(32.3, abs=0.01)
    assert f["shared_wavefronts_per_store"] == 1.0
    assert f["sectors_per_load_request"] == f["sectors_per_store_request"] == 4.0
    assert f["sector_bytes_per_byte_moved"] == pytest.approx(1.0)


@pytest.mark.parametrize("exercise_id,fixture,skips", [
    ("transpose_padded", "transpose_padded-unpadded", "bank conflicts"),
    ("transpose_padded", "transpose_padded-padded", None),
    ("transpose_shared", "transpose_shared-strided_reads", "32.0 sectors per request"),
    ("transpose_shared", "transpose_padded-padded", None),
])
def test_the_lesson_is_judged_from_the_counters(exercise_id, fixture, skips):
    ex = exercises.get(exercise_id)
    v = lesson(timed(exercise_id, ex.gate + 1, recorded(fixture)))
    assert v.counters == counters.figures(ex, recorded(fixture))
    if skips is None:
        assert v.speed_passed, v.messages
    else:
        assert not v.speed_passed and skips in " ".join(v.messages)


def test_wide_coalesced_loads_are_not_mistaken_for_a_strided_walk():
    """float4 loads: 16 sectors per request, but no more bytes than the problem moves."""
    ex = exercises.get("transpose_shared")
    c = recorded("transpose_padded-padded")
    for kind in ("ld", "st"):
        c[f"global_{kind}_requests"] /= 4
    f = counters.figures(ex, c)
    assert f["sectors_per_load_request"] == 16.0
    assert counters.skipped_lesson(ex, f) is None


@pytest.mark.parametrize("sectors_per_32_mads,skips", [
    (5, None),  # the naive kernel: one sector of A, four of B
    (33, "33.0 bytes per multiply-add"),  # threadIdx.x along rows
])
def test_a_matrix_products_coalescing_is_judged_by_bytes_per_multiply_add(sectors_per_32_mads,
                                                                         skips):
    ex = exercises.get("naive")
    mads = ex.problem.flops(ex.speed_shape) / 2
    c = dict.fromkeys(counters.METRICS, 0.0)
    c["global_ld_sectors"] = mads / 32 * sectors_per_32_mads
    c["global_ld_requests"] = mads / 32 * 2
    f = counters.figures(ex, c)
    why = counters.skipped_lesson(ex, f)
    assert why is None if skips is None else skips in why
    tiled = exercises.get("tiled")  # coalesced or not, no tile is reused
    assert counters.skipped_lesson(tiled, counters.figures(tiled, c)) is not None
    if skips is None:
        assert "no tile is reused" in counters.skipped_lesson(tiled, counters.figures(tiled, c))


def test_a_kernel_with_no_shared_access_fails_a_padding_lesson():
    ex = exercises.get("transpose_padded")
    c = recorded("transpose_shared-strided_reads")
    c["global_ld_sectors"] = c["global_ld_requests"] * 4  # coalesced, and no tile at all
    assert "no shared-memory access" in counters.skipped_lesson(ex, counters.figures(ex, c))


def test_a_transpose_without_shared_memory_earns_no_points_for_the_tile_lesson():
    """transpose_shared's lesson is the tile: a kernel whose counters show coalesced global
    traffic but no shared load and store (as the strided-reads transpose's would, if its
    reads were coalesced) is refused by the counters, whatever its speed; the reference's
    recorded counts pass."""
    ex = exercises.get("transpose_shared")
    c = recorded("transpose_shared-strided_reads")
    c["global_ld_sectors"] = c["global_ld_requests"] * 4
    c["shared_ld_requests"] = c["shared_st_requests"] = 0.0
    assert "no shared-memory load and store" in counters.skipped_lesson(
        ex, counters.figures(ex, c))
    strided = recorded("transpose_shared-strided_reads")  # as counted: its reads strided
    assert "not coalesced" in counters.skipped_lesson(ex, counters.figures(ex, strided))


def test_the_counters_are_told_beside_the_emulators_prediction():
    ex = exercises.get("transpose_padded")
    f = counters.figures(ex, recorded("transpose_padded-unpadded"))
    text = counters.describe(f, {"sectors_per_load_request": 4.0,
                                 "sectors_per_store_request": 4.0}, 32.0)
    assert "32.30 / 1.00 shared wavefronts" in text and "4096 x 4096" in text
    assert "the emulator predicted 4.00 / 4.00" in text and "32.00" in text


@pytest.mark.parametrize("params,euid,expected", [
    ("RmProfilingAdminOnly: 1\nRmGpuComputeExecTimeout: 0\n", 65534, True),
    ("RmProfilingAdminOnly: 1\n", 0, False),
    ("RmProfilingAdminOnly: 0\n", 65534, False),
])
def test_counters_restricted_to_administrators_are_told_apart(params, euid, expected):
    assert counters.restricted(params, euid) is expected


def test_restricted_counters_are_refused_before_grading_with_what_to_do(tmp_path, monkeypatch):
    """The driver's parameters as the NVIDIA module writes them; ncu stands in as a real
    program on PATH (the check never runs it)."""
    if counters.find_ncu() is None:
        (tmp_path / "ncu").write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / "ncu").chmod(0o755)
        monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    params = tmp_path / "params"
    params.write_text("RmProfilingAdminOnly: 1\n")
    why = counters.problem("TILELAB_LESSON_WITHOUT_COUNTERS", params, euid=65534)
    assert "NVreg_RestrictProfilingToAdminUsers" in why
    assert "TILELAB_LESSON_WITHOUT_COUNTERS=1" in why
    params.write_text("RmProfilingAdminOnly: 0\n")
    assert counters.problem("TILELAB_LESSON_WITHOUT_COUNTERS", params, euid=65534) is None


def test_without_ncu_grading_is_refused_unless_lessons_go_unmeasured(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu here
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if counters.find_ncu() is not None:
        pytest.skip("ncu found outside PATH")
    monkeypatch.delenv(settings.LESSON_WITHOUT_COUNTERS.name, raising=False)
    with pytest.raises(counters.CountersUnavailable, match=r"ncu is not installed.*=1"):
        counters.preflight()
    monkeypatch.setenv(settings.LESSON_WITHOUT_COUNTERS.name, "1")
    counters.preflight()


def test_unread_counters_leave_the_lesson_not_measured_never_the_emulators(tmp_path,
                                                                           monkeypatch):
    """No ncu: a kernel fast enough keeps no speed points, and the verdict says why; the
    emulator's count (which would pass it) decides nothing."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if counters.find_ncu() is not None:
        pytest.skip("ncu found outside PATH")
    ex = exercises.get("transpose_padded")
    v = lesson(timed(ex.id, ex.gate + 1))
    assert not v.speed_passed and "lesson was not measured" in " ".join(v.messages)
    assert v.counters and "error" in v.counters


def test_the_emulators_count_is_feedback_that_names_a_strided_walk():
    ex = exercises.get("transpose_shared")
    counted = count_traffic(ex, variant("transpose_shared", "strided_reads"),
                            np.random.default_rng(3))
    assert isinstance(counted, dict), counted
    assert "sectors per request" in traffic.skipped_lesson(counted, ex.reuses_tiles)


# ------------------------------------------------ on a GPU: the real counters


@pytest.mark.gpu
@pytest.mark.parametrize("exercise_id,key,passes", [
    ("transpose_padded", "reference", True),
    ("transpose_shared", "strided_reads", False),
    ("transpose_shared", "reference", True),
    ("matmul_at_padded", "reference", True),
])
def test_ncu_reads_the_lesson_of_the_timed_build(exercise_id, key, passes):
    ex = exercises.get(exercise_id)
    t0 = time.perf_counter()
    f = counters.figures(ex, counters.measure(ex.id, variant(exercise_id, key)))
    print(f"{exercise_id}/{key}: ncu took {time.perf_counter() - t0:.2f} s;",
          counters.describe(f, None, None))
    assert (counters.skipped_lesson(ex, f) is None) is passes


@pytest.mark.gpu
@pytest.mark.parametrize("exercise_id,key", [("transpose_padded", "unpadded"),
                                            ("tiled", "reference")])
def test_the_counts_the_lesson_gate_reads_are_the_same_beside_a_busy_process(exercise_id, key):
    """Whether a class run may count beside other tasks' untimed work
    (TILELAB_COUNTERS_LOCK=shared): counted alone, then while a second process launches
    kernels back to back on the same GPU (``tilelab bench counters_load`` does every case)."""
    row = counters_load.case(exercise_id, key)
    print(f"{exercise_id}/{key}: {row['load_launches']} busy launches meanwhile;",
          "equal" if row["equal"] else f"DIFFERENT: {row['differing']}", row["error"])
    assert not row["error"] and row["load_launches"] > 0
    assert row["equal"], (row["differing"], row["alone"], row["under_load"])


@pytest.mark.gpu
def test_ncu_counts_the_unpadded_tiles_conflicts():
    ex = exercises.get("transpose_padded")
    src = (Path(__file__).parent / "fixtures" / "submissions"
           / "transpose_padded-unpadded.cu").read_text()
    f = counters.figures(ex, counters.measure(ex.id, src))
    print(counters.describe(f, None, None))
    assert f["shared_wavefronts_per_load"] > 16
    assert "bank conflicts" in counters.skipped_lesson(ex, f)


@pytest.mark.gpu
@pytest.mark.parametrize(("exercise_id", "key"), [
    (e, v.key) for e, vs in VARIANTS.items() for v in vs if v.must == "pass"])
def test_no_correct_variant_is_refused_by_its_counters(exercise_id, key):
    ex = exercises.get(exercise_id)
    f = counters.figures(ex, counters.measure(ex.id, variant(exercise_id, key)))
    assert counters.skipped_lesson(ex, f) is None, counters.describe(f, None, None)


def test_ncu_counts_one_timed_launch_drawn_after_those_a_graded_run_makes_first():
    """The counted process launches as a graded run does: once at every graded shape, then
    a speed run's launches; ncu counts one drawn among the timed ones, the one the worker
    profiles after its warm-up (ncu profiles nothing from the start)."""
    from tilelab.device.bench import REPEAT, WARMUP

    ex = exercises.get("transpose_padded")
    cmd = counters.command("ncu", ex, "k.cu", 17)
    assert cmd[cmd.index("--counted") + 1] == str(len(ex.shapes) + 17)
    assert cmd[cmd.index("--profile-from-start") + 1] == "off"
    assert cmd[cmd.index("--launch-count") + 1] == str(counters.PROFILED) == "2"
    assert "--launch-skip" not in cmd
    assert cmd[cmd.index("--launches") + 1] == str(WARMUP + REPEAT)
    assert cmd[cmd.index("--at") + 1] == "speed"
    # each counted launch alone on a shared GPU unless set otherwise; the clocks left as
    # they are (a clock the profiler locked would slow another task's timed launches)
    assert cmd[cmd.index("--lock") + 1] == "alone"
    assert cmd[cmd.index("--clock-control") + 1] == "none"
    # the worker is ended once the counted launch is read only where asked (teardowns that
    # take no lock): a killed process's teardown holds none
    assert "--kill" not in cmd
    killing = counters.command("ncu", ex, "k.cu", 17, kill=True)
    assert killing[killing.index("--kill") + 1] == "on"
    assert killing.index("--kill") < killing.index(sys.executable)
    shared = counters.command("ncu", ex, "k.cu", 17, "shared")
    assert shared[shared.index("--lock") + 1] == "shared"
    # ncu's own section files are not read where a folder is named (the metrics are)
    assert "--section-folder" not in cmd
    sections = counters.command("ncu", ex, "k.cu", 17, sections="empty")
    at = sections.index("--section-folder")
    assert sections[at + 1] == "empty" and at < sections.index(sys.executable)
    draws = {counters.draw() for _ in range(400)}
    assert min(draws) >= WARMUP and max(draws) < WARMUP + REPEAT and len(draws) > REPEAT // 2


def test_a_counting_names_an_empty_folder_of_its_own_for_ncus_sections():
    """Nsight Compute reads no section files as it starts (about 0.3 s of a check on an
    H200): the folder it is given is the counting's own, and empty."""
    counting = counters.Counting("naive")
    try:
        folder = Path(counting.source).parent / "sections"
        assert folder.is_dir() and not any(folder.iterdir())
        if counting.sidecar is not None:  # ncu is installed: it was told so
            argv = counting.sidecar.proc.args
            assert argv[argv.index("--section-folder") + 1] == str(folder)
    finally:
        counting.stop()
    assert not folder.exists()


def test_the_counted_run_gives_every_speed_launch_inputs_no_other_launch_saw():
    """As the timed run draws them (windows of two random pools), not a fresh random
    matrix per launch: the counted process's 30 launches at the speed shape cost seconds of
    CPU otherwise, all of it while this GPU's one profiler is held."""
    from tilelab.device.bench import REPEAT, WARMUP
    from tilelab.grading.worker import launch_plan

    ex = exercises.get("transpose_padded")
    once, sets = launch_plan(ex.id, "speed", WARMUP + REPEAT, (), np.random.default_rng(2))
    assert [s for s, _ in once] == list(ex.shapes) and len(sets) == WARMUP + REPEAT
    firsts = [sets[i]["in"].ravel()[:64].tobytes() for i in range(len(sets))]
    assert len(set(firsts)) == WARMUP + REPEAT
    assert all(sets[i]["in"].shape == ex.speed_shape for i in range(len(sets)))
    sanitize, none = launch_plan(ex.id, "sanitize", 1, (18, 38), np.random.default_rng(2))
    assert [s for s, _ in sanitize] == [(18, 38)] and none is None


def ncu_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, program: str | bytes) -> Path:
    """``program`` as the only ncu the grader finds (skips where another is found first)."""
    ncu = tmp_path / "ncu"
    if isinstance(program, bytes):
        ncu.write_bytes(program)
    else:
        ncu.write_text(program)
    ncu.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    if counters.find_ncu() != str(ncu):
        pytest.skip("another ncu is found first")
    return ncu


def test_an_ncu_that_reads_nothing_leaves_the_lesson_not_measured(tmp_path, monkeypatch):
    """Two profilers on one GPU: ncu runs but prints no table (as seen on an H100 with two
    graders and no lock). The lesson is not measured, never an internal grader error."""
    ncu_on_path(tmp_path, monkeypatch, "#!/bin/sh\necho '==ERROR== Profiling failed because "
                "a driver resource was unavailable.' >&2\nexit 1\n")
    with pytest.raises(counters.CountersUnavailable, match="driver resource was unavailable"):
        counters.measure("transpose_padded", exercises.get("transpose_padded").reference.source())
    ex = exercises.get("transpose_padded")
    v = lesson(timed(ex.id, ex.gate + 1))
    assert not v.speed_passed and "lesson was not measured" in " ".join(v.messages)
    assert "driver resource" in v.counters["error"]


def ncu_table(*launches: tuple[str, float]) -> str:
    """ncu's CSV details of profiled launches, each a kernel's name and the value of every
    metric the grader names."""
    rows = ['"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"']
    rows += [f'"{i}","{name}","{metric}","","{value}"' for i, (name, value) in enumerate(launches)
             for metric in counters.METRICS.values()]
    return "\n".join(rows)


def test_the_counts_are_the_counted_launchs_never_the_warm_ups(tmp_path, monkeypatch):
    """ncu profiles the worker's warm-up launch (an empty kernel, its first-profile set-up
    done outside the counted launch's hold), then the counted one: the lesson reads the
    second; any other number of profiled launches reads nothing."""
    two = ncu_table((counters.WARM_UP_KERNEL, 0.0), ("transpose_padded", 7.0))
    ncu_on_path(tmp_path, monkeypatch, f"#!/bin/sh\ncat <<'EOF'\n{two}\nEOF\n")
    ex = exercises.get("transpose_padded")
    counts = counters.measure(ex.id, ex.reference.source())
    assert set(counts) == set(counters.METRICS) and set(counts.values()) == {7.0}
    one = ncu_table(("transpose_padded", 7.0))
    ncu_on_path(tmp_path, monkeypatch, f"#!/bin/sh\ncat <<'EOF'\n{one}\nEOF\n")
    with pytest.raises(counters.CountersUnavailable, match="profiled 1 launches, expected 2"):
        counters.measure(ex.id, ex.reference.source())


def test_counting_started_early_and_not_needed_ends_with_all_it_started(tmp_path, monkeypatch):
    """The grader starts ncu beside its sanitizer and speed run; a kernel that turns out
    slow or wrong has it stopped unread: ncu and its launched worker end, its files go."""
    pids = tmp_path / "pids"
    ncu_on_path(tmp_path, monkeypatch, f"#!/bin/sh\nsleep 600 &\necho $$ $! > {pids}\nwait\n")
    counting = counters.Counting("tiled")
    counting.go(exercises.get("tiled").reference.source())
    for _ in range(3000):
        if pids.exists() and len(pids.read_text().split()) == 2:
            break
        time.sleep(0.01)
    procs = [int(p) for p in pids.read_text().split()]
    folder = Path(counting._tmp.name)
    assert (folder / "kernel.cu").exists()
    counting.stop()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(p) for p in procs):
        time.sleep(0.05)
    assert not any(running(p) for p in procs) and not folder.exists()


@pytest.mark.parametrize("start_lock,kills", [("none", True), ("shared", False)])
def test_ncu_ends_its_worker_early_only_where_teardowns_take_no_lock(tmp_path, monkeypatch,
                                                                     start_lock, kills):
    """With TILELAB_START_LOCK=none ncu ends the worker once its counted launch is read;
    with shared (the default) the worker ends itself, its teardown under the GPU's lock."""
    argv = tmp_path / "argv"
    ncu_on_path(tmp_path, monkeypatch, f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv}\n')
    monkeypatch.setenv(settings.START_LOCK.name, start_lock)
    counting = counters.Counting("tiled")
    counting.go(exercises.get("tiled").reference.source())
    with pytest.raises(counters.CountersUnavailable):
        counting.result()  # the stand-in prints no table
    got = argv.read_text().splitlines()
    assert ("--kill" in got) == kills and got[-1] == "--wait"
    if kills:
        assert got[got.index("--kill") + 1] == "on"


def test_an_ncu_that_cannot_be_started_leaves_the_lesson_not_measured(tmp_path, monkeypatch):
    """An ncu on PATH that is no program: the grade goes on, the lesson is not measured
    and the verdict says why."""
    ncu_on_path(tmp_path, monkeypatch, b"\x7fELF not really")
    ex = exercises.get("transpose_padded")
    counting = counters.Counting(ex.id)
    with pytest.raises(counters.CountersUnavailable, match="could not be started"):
        counting.result()
    v = lesson(timed(ex.id, ex.gate + 1))
    assert not v.speed_passed and "could not be started" in v.counters["error"]


@pytest.mark.parametrize("equal,expected", [(True, "shared"), (False, "alone")])
def test_the_counters_load_data_file_names_the_setting_its_rows_support(equal, expected):
    """The data file's description says which TILELAB_COUNTERS_LOCK its rows support (the
    setting a class run reads from them), worked out from the rows."""
    rows = [{"exercise": e, "kernel": k, "equal": equal or e != "tiled", "load_launches": 9}
            for e, k in counters_load.CASES]
    text = counters_load.description(rows, 64.0)
    assert f"Setting this supports: {expected}. Took 64 s." in text
    assert counters_load.setting(rows) == expected
