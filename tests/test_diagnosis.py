"""Learner-style wrong kernels across the five exercises, each told the right cause.

Each kernel is an exercise's reference solution with one mistake a learner makes (the
edit is asserted to apply). The grader runs it on the emulator, diagnoses the most telling
failing shape with the race analysis, and the message must name the mistake's cause.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from tilelab import emu
from tilelab.catalog import exercises
from tilelab.catalog.variants import only_kernel
from tilelab.grading import scoring
from tilelab.grading.diagnosis import CAUSES, RTOL, Attempt, diagnose, race_diagnosis
from tilelab.grading.sandbox import grade_source

pytestmark = pytest.mark.slow


def ref(exercise_id: str) -> str:
    """The exercise's reference solution, only its own kernel (with the file's #defines)."""
    ex = exercises.get(exercise_id)
    return only_kernel(ex.reference.source(), ex.kernel)


def mutate(src: str, *edits: tuple[str, str]) -> str:
    for old, new in edits:
        assert old in src, f"mutation does not apply: {old!r}"
        src = src.replace(old, new)
    return src


NAIVE_BODY = """    int row = blockIdx.y * blockDim.y + threadIdx.y;
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < M && col < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k)
            acc += A[row * K + k] * B[k * N + col];
        C[row * N + col] = acc;
    }
"""
TILED_LOADS = """        As[ty][tx] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
"""
AT_LOADS = """        As[tx][ty] = (row < M && t + tx < K) ? A[row * K + t + tx] : 0.0f;
        Bs[ty][tx] = (t + ty < K && col < N) ? B[(t + ty) * N + col] : 0.0f;
"""
SKIPPED_LOADS = """\
        if (row < M && t + tx < K) As[ty][tx] = A[row * K + t + tx];
        if (t + ty < K && col < N) Bs[ty][tx] = B[(t + ty) * N + col];
"""
AT_SKIPPED_LOADS = SKIPPED_LOADS.replace("As[ty][tx]", "As[tx][ty]")
EARLY_RETURN = "    float acc = 0.0f;\n    if ((blockIdx.y + 1) * TILE > M) return;\n"
SECOND_PHASE = """x = blockIdx.y * TILE_DIM + threadIdx.x;  // column of out = row of in
    y = blockIdx.x * TILE_DIM + threadIdx.y;"""
SECOND_PHASE_UNSWAPPED = """x = blockIdx.x * TILE_DIM + threadIdx.x;
    y = blockIdx.y * TILE_DIM + threadIdx.y;"""
STORE_OUT = """if (x < rows && y + j < cols)
            out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];"""
STORE_OUT_IN_LAYOUT = """if (x < cols && y + j < rows)
            out[(y + j) * cols + x] = tile[threadIdx.y + j][threadIdx.x];"""
STUB = "    // YOUR CODE HERE\n"
NAIVE_STORE = "        C[row * N + col] = acc;\n"
NAIVE_STORE_FIRST = (("        float acc = 0.0f;\n", "        float acc = 0.0f;\n" + NAIVE_STORE),
                     (NAIVE_STORE + "    }", "    }"))  # the store moved above the k loop


def stub(exercise_id: str) -> str:
    src = ref(exercise_id)
    open_ = src.index("{", src.index(f"void {exercises.get(exercise_id).kernel}("))
    return src[: open_ + 1] + "\n" + STUB + "}\n"


CASES: list[tuple[str, str, str, str]] = [
    # (exercise, mistake, kernel source, cause the learner must be told)
    ("naive", "empty stub", stub("naive"), "never written"),
    ("naive", "row from x, column from y",
     mutate(ref("naive"), ("int row = blockIdx.y * blockDim.y + threadIdx.y;",
                           "int row = blockIdx.x * blockDim.x + threadIdx.x;"),
            ("int col = blockIdx.x * blockDim.x + threadIdx.x;",
             "int col = blockIdx.y * blockDim.y + threadIdx.y;")),
     "swapped row/column"),
    ("naive", "C stored column-major",
     mutate(ref("naive"), ("C[row * N + col] = acc;", "C[col * M + row] = acc;")),
     "swapped row/column"),
    ("naive", "A read column-major",
     mutate(ref("naive"), ("A[row * K + k]", "A[k * M + row]")), "swapped row/column"),
    ("naive", "k loop one short", mutate(ref("naive"), ("k < K;", "k < K - 1;")), "off-by-one"),
    ("naive", "store guard one short",
     mutate(ref("naive"), ("if (row < M && col < N) {", "if (row < M && col < N - 1) {")),
     "off-by-one"),
    ("naive", "guard in whole tiles",
     mutate(ref("naive"), ("if (row < M && col < N) {",
                           "if ((blockIdx.y + 1) * 16 <= M && (blockIdx.x + 1) * 16 <= N) {")),
     "boundary"),
    ("tiled", "empty stub", stub("tiled"), "never written"),
    ("tiled", "last partial tile dropped",
     mutate(ref("tiled"), ("for (int t = 0; t < K; t += TILE)",
                           "for (int t = 0; t + TILE <= K; t += TILE)")),
     "partial tile dropped"),
    ("tiled", "no barrier after the loads",
     mutate(ref("tiled"), ("__syncthreads();  // 1:", "//")), "race"),
    ("tiled", "no barrier after the products",
     mutate(ref("tiled"), ("__syncthreads();  // 2:", "//")), "race"),
    ("tiled", "C added to before it is set",
     mutate(ref("tiled"), ("C[row * N + col] = acc;", "C[row * N + col] += acc;")),
     "never initialised"),
    ("naive", "accumulator reset every 16 terms",
     mutate(ref("naive"), ("acc += A[row * K + k] * B[k * N + col];",
                           "acc = (k % 16 ? acc : 0.0f) + A[row * K + k] * B[k * N + col];")),
     "accumulator reset"),
    ("tiled", "loads outside the matrix skipped, not zeroed",
     mutate(ref("tiled"), (TILED_LOADS, SKIPPED_LOADS)),
     "stale shared data"),
    ("tiled", "load guard one short of K",
     mutate(ref("tiled"), ("(row < M && t + tx < K)", "(row < M && t + tx < K - 1)"),
            ("(t + ty < K && col < N)", "(t + ty < K - 1 && col < N)")), "off-by-one"),
    ("tiled", "partial row of blocks returns early",
     mutate(ref("tiled"), ("    float acc = 0.0f;\n", EARLY_RETURN)),
     "boundary"),
    ("transpose_shared", "empty stub", stub("transpose_shared"), "never written"),
    ("transpose_shared", "no barrier between the phases",
     mutate(ref("transpose_shared"), ("    __syncthreads();\n", "\n")), "race"),
    ("transpose_shared", "tile read back untransposed",
     mutate(ref("transpose_shared"), ("= tile[threadIdx.x][threadIdx.y + j];",
                                      "= tile[threadIdx.y + j][threadIdx.x];")),
     "swapped row/column"),
    ("transpose_shared", "out written in the input's layout",
     mutate(ref("transpose_shared"), (SECOND_PHASE, SECOND_PHASE_UNSWAPPED),
            (STORE_OUT, STORE_OUT_IN_LAYOUT)),
     "swapped row/column"),
    ("transpose_padded", "empty stub", stub("transpose_padded"), "never written"),
    ("transpose_padded", "block indices not swapped",
     mutate(ref("transpose_padded"), ("    x = blockIdx.y * TILE_DIM + threadIdx.x;\n"
                                      "    y = blockIdx.x * TILE_DIM + threadIdx.y;\n",
                                      "    x = blockIdx.x * TILE_DIM + threadIdx.x;\n"
                                      "    y = blockIdx.y * TILE_DIM + threadIdx.y;\n")),
     "swapped row/column"),
    ("transpose_padded", "no barrier between the phases",
     mutate(ref("transpose_padded"), ("    __syncthreads();\n", "\n")), "race"),
    ("matmul_at_padded", "empty stub", stub("matmul_at_padded"), "never written"),
    ("matmul_at_padded", "last partial tile dropped",
     mutate(ref("matmul_at_padded"), ("t < K;", "t < K / TILE * TILE;")), "partial tile dropped"),
    ("matmul_at_padded", "no barrier after the products",
     mutate(ref("matmul_at_padded"), ("        __syncthreads();\n    }", "    }")), "race"),
    ("matmul_at_padded", "loads outside the matrix skipped, not zeroed",
     mutate(ref("matmul_at_padded"), (AT_LOADS, AT_SKIPPED_LOADS)),
     "stale shared data"),
    ("regblock", "empty stub", stub("regblock"), "never written"),
    ("regblock", "last partial tile dropped",
     mutate(ref("regblock"), ("t < K; t += BK", "t + BK <= K; t += BK")), "partial tile dropped"),
    ("regblock", "no barrier after the products",
     mutate(ref("regblock"), ("__syncthreads();  // everyone is done", "//")), "race"),
    ("naive", "sum stored before the loop", mutate(ref("naive"), *NAIVE_STORE_FIRST),
     "zeros stored"),
    ("naive", "int accumulator", mutate(ref("naive"), ("float acc = 0.0f;", "int acc = 0;")),
     "int truncation"),
    ("tiled", "int tile of A", mutate(ref("tiled"), ("__shared__ float As", "__shared__ int As")),
     "int truncation"),
]

@pytest.mark.parametrize(("exercise_id", "mistake", "source", "cause"), CASES,
                         ids=[f"{c[0]}-{c[1].replace(' ', '_')}" for c in CASES])
def test_each_mistake_gets_its_cause(exercise_id, mistake, source, cause):
    v = grade_source(exercise_id, source, backend_name="emu", speed=False)
    assert v.compiled, "\n".join(v.messages)
    text = "\n".join(v.messages)
    got = re.search(r"Likely cause: ([a-z/ -]+?):", text)
    assert got, text
    assert got.group(1) == cause, text
    assert "round the grid up" not in text  # the grader fixes the grid
    if cause == "race":  # each race here crosses warps: one fix, the block barrier
        assert "put __syncthreads()" in text and "__syncwarp" not in text, text
    else:
        assert "__syncthreads()" not in text


SPINE = {"naive", "tiled", "transpose_shared", "transpose_padded", "matmul_at_padded",
         "regblock"}


def test_the_mistakes_cover_every_cause_and_exercise():
    """These and the cases of ``tests/data/mistakes/*.json`` (test_mistakes.py) name every
    cause but the catch-all and the time limit (tested in test_no_gpu_answers.py)."""
    assert len(CASES) >= 15
    assert {c[0] for c in CASES} == SPINE
    manifest = [c for f in sorted((Path(__file__).parent / "data/mistakes").glob("*.json"))
                for c in json.loads(f.read_text())]
    named = {m.group(1) for c in manifest
             if (m := re.match(r"Likely cause: ([a-z/ -]+?)(?::|$)", c["cause"]))}
    assert {c[3] for c in CASES} | named == set(CAUSES) - {"indexing", "timed out"}


WARP_SUM = r"""
__global__ void warp_sum(const float* x, float* out)
{
    __shared__ float s[32];
    int lane = threadIdx.x;
    s[lane] = x[lane];
    for (int off = 16; off > 0; off /= 2) {
        if (lane < off)
            s[lane] += s[lane + off];
    }
    if (lane == 0)
        out[0] = s[0];
}
"""


def test_a_race_within_one_warp_is_told_to_use_syncwarp():
    """A warp-synchronous reduction without __syncwarp(): every race is between lanes of
    one warp, so the fix is __syncwarp(), said once."""
    mod = emu.SourceModule(WARP_SUM, analysis=True)
    fn = mod.get_function("warp_sum")
    x, out = np.arange(32, dtype=np.float32), np.zeros(1, np.float32)
    fn(emu.In(x), emu.Out(out), block=(32, 1, 1), grid=(1, 1))
    races = fn.last_report.analysis.races
    assert races and all(r.same_warp for r in races)
    text = str(race_diagnosis(races))
    assert "put __syncwarp()" in text and "__syncthreads" not in text, text
    assert "line 9" in text


def _text(exercise_id: str, source: str) -> str:
    v = grade_source(exercise_id, source, backend_name="emu", speed=False)
    assert v.compiled, "\n".join(v.messages)
    return "\n".join(v.messages)


def test_zeros_stored_are_not_blamed_on_an_int():
    """Every variable float, the store above the loop: C is all 0 (stored, not NaN), and a 0
    is no truncation of -0.35 or 2.2; the learner is sent to the store and the loop."""
    text = _text("naive", mutate(ref("naive"), *NAIVE_STORE_FIRST))
    assert "Likely cause: zeros stored: every wrong element of C is exactly 0" in text, text
    assert "stored before it was computed (a sum before the loop that accumulates" in text
    assert "(line 11: `C[row * N + col] = acc;`)" in text and "(line 12: `for" in text, text
    assert "int truncation" not in text and "declare it float" not in text, text


@pytest.mark.parametrize(("edit", "line"), [
    (("float acc = 0.0f;", "int acc = 0;"), 10),  # each product, in (-1, 1), truncates to 0
    (("C[row * N + col] = acc;", "C[row * N + col] = (int)acc;"), 13),  # C = trunc(A @ B)
], ids=["int_accumulator", "int_cast_on_store"])
def test_an_int_on_the_way_is_told_int_truncation(edit, line):
    text = _text("naive", mutate(ref("naive"), edit))
    assert "Likely cause: int truncation:" in text, text
    assert f"declare it float (line {line}: `{edit[1]}`)" in text, text


def test_whole_numbers_are_truncation_only_where_they_are_the_answer_truncated():
    """No kernel text: the values alone. trunc(A @ B) is an int's mark; 0 everywhere is a
    stored 0 (an int is named only as a last resort); round(A @ B) is neither."""
    ex = exercises.get("naive")
    shape = (70, 90, 200)  # K = 200: most elements of A @ B are 1 or more in size
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(3))
    want = ex.problem.reference(inputs)
    scale = ex.problem.error_bound(inputs)

    def cause(got: np.ndarray) -> tuple[str, str]:
        got = got.astype(np.float32)
        bad = ~(np.abs(got - want) <= RTOL * scale)
        why = diagnose(ex.problem, ex.launch, Attempt(shape, inputs, got, want, bad))
        return why.cause, why.advice

    assert cause(np.trunc(want))[0] == "int truncation"
    zeros, advice = cause(np.zeros_like(want))
    assert zeros == "zeros stored" and "stored before it was computed" in advice, advice
    assert "failing those" in advice  # without the kernel's text an int is not ruled out
    assert cause(np.round(want))[0] != "int truncation"


def test_an_int_accumulator_of_shared_tiles_compiles_and_is_told_int_truncation():
    """`int acc` summing `As[ty][k] * Bs[k][tx]`: g++ names only the end of the product for
    its conversion warning (no range), which the emulator's rewrite of implicit conversions
    once wrapped alone ("'txtl_emu' has not been declared"): the kernel did not compile. It
    compiles, and the learner is told what truncates."""
    ex = exercises.get("tiled")
    src = ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")
    src = src.replace("float acc = 0.0f;", "int acc = 0;")
    assert "int acc = 0;" in src
    v = grade_source("tiled", src, backend_name="emu")
    assert v.compiled and not v.correct, scoring.report(v)
    assert "int truncation" in "\n".join(v.messages), scoring.report(v)
