"""The exercise registry and the command line's `list`."""

from __future__ import annotations

import json
import re

import pytest

from tilelab import cli
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, kernel_file, tiled_without_barrier


def test_every_exercise_is_consistent():
    for ex in exercises.EXERCISES.values():
        assert ex.reference.name == ex.kernel, ex.id
        assert f"void {ex.kernel}(" in ex.signature
        assert re.search(rf"void\s+(__launch_bounds__\(\w+\)\s*)?{ex.kernel}\(",
                         ex.reference.source()), ex.id
        assert ex.gate_reason and ex.teaches
        assert ex.gate > 1.0 if ex.speed_graded else ex.gate_reason == exercises.CORRECTNESS_ONLY
        assert ex.baseline.problem is ex.problem
        assert len(ex.shapes) >= 5
        if ex.id != "tiled_loop":  # the stage before the edges: whole tiles only
            assert (1,) * len(ex.problem.dims) in ex.shapes, "a 1x1 case"


def test_the_course_has_at_least_14_graded_steps_along_its_spine():
    ids = list(exercises.EXERCISES)
    assert len(ids) >= 14
    spine = ["naive", "tiled", "transpose_padded", "regblock"]
    assert [ids.index(i) for i in spine] == sorted(ids.index(i) for i in spine)
    assert list(exercises.ASSIGNMENTS) == ["01-naive", "02-tiled", "03-padded", "04-regblock"]
    # the tiled multiply is built in stages, each before the next
    stages = ["tile_pair", "first_tile", "tiled_loop", "tiled"]
    assert [ids.index(i) for i in stages] == sorted(ids.index(i) for i in stages)


def test_whole_tile_stage_has_only_whole_tiles_and_the_next_step_has_edges():
    assert all(s % 32 == 0 for shape in exercises.get("tiled_loop").shapes for s in shape)
    assert any(s % 32 for shape in exercises.get("tiled").shapes for s in shape)


def test_step_problems_have_float64_references_and_non_multiple_shapes():
    import numpy as np

    rng = np.random.default_rng(0)
    for ex in exercises.EXERCISES.values():
        for shape in ex.shapes[:3]:
            x = ex.problem.make_inputs(shape, rng)
            ref = ex.problem.reference(x)
            assert ref.dtype == np.float64 and ref.shape == ex.problem.output_shape(shape)
            assert ex.problem.error_bound(x).shape == ref.shape
    sums = exercises.get("block_sum").problem
    x = {"x": np.ones(257, np.float32)}
    assert sums.reference(x).tolist() == [[256.0, 1.0]]
    box = exercises.get("stencil").problem.reference({"x": np.ones(4, np.float32)})
    assert box.tolist() == [[3.0, 4.0, 4.0, 3.0]]


def test_shapes_cover_partial_tiles_and_rectangles():
    for ex in exercises.EXERCISES.values():
        if ex.id == "tiled_loop":
            continue
        tile = ex.launch.tile[0]
        assert any(any(s % tile for s in shape) for shape in ex.shapes), ex.id
        if len(ex.problem.dims) > 1:
            assert any(len(set(shape)) > 1 for shape in ex.shapes), ex.id


def test_unknown_exercise_names_the_known_ones():
    with pytest.raises(KeyError, match="naive"):
        exercises.get("nope")


def test_assignments_group_exercises():
    assert exercises.ASSIGNMENTS["03-padded"] == (
        "transpose_shared", "transpose_padded", "matmul_at", "matmul_at_padded")


def test_list_json(capsys):
    assert cli.main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["id"] for d in data} == set(exercises.EXERCISES)
    for d in data:
        assert {"kernel", "signature", "launch", "gate", "block"} <= d.keys()


def test_barrier_variants_remove_exactly_one_barrier():
    full = KERNELS["tiled32"].source()
    for which in (1, 2):
        src = tiled_without_barrier(which)
        assert src.count("__syncthreads()") == full.count("__syncthreads()") - 1
        assert src.count("\n") == full.count("\n")
    assert re.search(r"#define TILE 32", full)


def test_gates_files_are_read_strictly(tmp_path):
    from tilelab.grading import gates

    good = tmp_path / "gates.json"
    good.write_text(json.dumps({"gates": {"naive": {"gate": 3.1}}}))
    assert gates.load(good) == {"naive": 3.1} and gates.load(None) == {}
    with pytest.raises(gates.GatesError, match="no gates file"):
        gates.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    for text in ("{", '{"gates": {"nope": {"gate": 2}}}', '{"gates": []}'):
        bad.write_text(text)
        with pytest.raises(gates.GatesError):
            gates.load(bad)


def test_a_gate_lies_between_the_slowest_pass_and_the_fastest_fail():
    from tilelab.experiments.calibration import place, placed_gate

    gate, margin = placed_gate(1.44, 1.0)
    assert gate == 1.2 and margin == pytest.approx(1.2)  # each side clears it by 1.2x
    ex = exercises.get("tiled")
    speedups = {"reference": 1.7, "k16": 1.5, "seed_padded": 1.32, "seed_simple": 1.7,
                "at_padded": 1.36, "naive": 1.13, "naive_xrow": 0.2}
    placed = place(ex, speedups)
    assert placed["slowest_pass"] == "seed_padded" and placed["fastest_fail"] == "naive"
    assert 1.13 < placed["gate"] < 1.32 and placed["refused"] is None


def test_a_must_fail_variant_the_counters_refuse_does_not_hold_the_gate_down():
    """transpose_shared: the strided-reads transpose is faster than the unpadded tile, so a
    speed gate could not separate them; the GPU's counters refuse it (and the strided
    writes), so the gate lies between the slowest tile and the baseline's own speed."""
    from tilelab.experiments.calibration import place

    ex = exercises.get("transpose_shared")
    speedups = {"reference": 3.3, "padded": 5.7, "swizzled": 5.7, "naive": 1.0,
                "strided_reads": 3.8}
    assert place(ex, speedups)["gate"] is None  # by speed alone: refused
    placed = place(ex, speedups, frozenset({"strided_reads", "naive"}))
    assert placed["refused"] is None and placed["fastest_fail"] == "baseline"
    assert 1.0 < placed["gate"] < 3.3
    placed = place(ex, speedups, frozenset({"strided_reads"}))
    assert placed["fastest_fail"] == "naive" and placed["gate"] < 3.3


def test_calibration_refuses_variants_that_do_not_separate():
    from tilelab.experiments.calibration import place

    ex = exercises.get("tiled")
    speedups = {"reference": 1.7, "k16": 1.5, "seed_padded": 1.15, "seed_simple": 1.7,
                "at_padded": 1.36, "naive": 1.13, "naive_xrow": 0.2}
    placed = place(ex, speedups)
    assert placed["gate"] is None
    assert "both tiles padded" in placed["refused"] and "baseline resubmitted" in placed["refused"]


def test_shapes_reach_past_every_bound_a_kernel_could_hard_code():
    for ex in exercises.EXERCISES.values():
        tile = ex.launch.tile[0]
        for axis in range(len(ex.problem.dims)):
            biggest = max(shape[axis] for shape in ex.shapes)
            # K is walked in steps of at most 64 (vec4 covers 128 x 128 of C, 8 of K at once)
            assert biggest > 1024 or (axis == 2 and biggest >= 8 * min(tile, 64)), (ex.id, axis)


CUT_SHORT = {  # a kernel correct on every small shape, wrong past a bound it hard-codes
    "K loop stops after 6 tiles": ("for (int t = 0; t < K; t += TILE)",
                                   "for (int t = 0; t < K && t < 6 * TILE; t += TILE)"),
    "row % 200": ("int row = blockIdx.y * TILE + ty;", "int row = (blockIdx.y * TILE + ty) % 200;"),
    "returns when M >= 1024": ("float acc = 0.0f;",
                               "float acc = 0.0f;\n    if (M >= 1024) return;"),
    "col < 1000 only": ("if (row < M && col < N)", "if (row < M && col < N && col < 1000)"),
}


@pytest.mark.slow
@pytest.mark.parametrize("old,new", CUT_SHORT.values(), ids=CUT_SHORT.keys())
def test_a_kernel_that_hard_codes_a_bound_fails_a_graded_shape(old, new):
    import numpy as np

    from tilelab.device.runtime import get_runtime
    from tilelab.grading.correctness import check_function

    ex = exercises.get("tiled")
    src = ex.reference.source()
    assert old in src
    rt = get_runtime("emu")
    fn = rt.SourceModule(src.replace(old, new)).get_function(ex.kernel)
    rng = np.random.default_rng(1)
    results = [check_function(rt, fn, ex.problem, ex.launch, s, rng).ok for s in ex.shapes]
    assert not all(results)


def _file_line(text: str, needle: str) -> int:
    hits = [i for i, ln in enumerate(text.splitlines(), 1) if needle in ln]
    assert len(hits) == 1, needle
    return hits[0]


def test_tunables_are_set_in_place_so_lines_keep_their_numbers():
    for key, k in KERNELS.items():
        src, file = k.source(), kernel_file(k.file)
        assert src.count("\n") == file.count("\n"), key
        for name, value in k.defines:
            assert re.search(rf"^#define {name} {value}$", src, re.M), (key, name)


@pytest.mark.parametrize("key,store", [("tiled32_at", "As[tx][ty] ="),
                                       ("tiled16", "As[ty][tx] =")])
def test_emulator_reports_the_kernel_files_line_numbers(key, store):
    """The emulator's bank report names the line of the kernel file the book lists."""
    import numpy as np

    from tilelab import emu
    from tilelab.catalog.problems import MATMUL
    from tilelab.device.runtime import get_runtime
    from tilelab.grading.correctness import launch

    k = KERNELS[key]
    fn = emu.SourceModule(k.source(), analysis=True).get_function(k.name)
    shape = (32, 32, 32)
    launch(get_runtime("emu"), fn, MATMUL, k.launch, shape,
           MATMUL.make_inputs(shape, np.random.default_rng(0)))
    writes = {b.line for b in fn.last_report.analysis.bank_lines
              if b.array == "As" and b.kind == "write"}
    assert writes == {_file_line(kernel_file(k.file), store)}
