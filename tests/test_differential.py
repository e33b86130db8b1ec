"""The differential diagnosis's parts: an index decoded against the reference's, a guard
worked out for one thread, an accumulator's path in the source, coalescing counted by
bytes; and, on the emulator, the per-thread log it reads and every reference kernel's
traffic told nothing."""

from __future__ import annotations

import numpy as np
import pytest

from tilelab.catalog import exercises
from tilelab.emu.traffic import TrafficLine
from tilelab.grading import traffic
from tilelab.grading.index_diff import Layout, decode, owner_block, run_traced
from tilelab.grading.kernel_lines import Kernel
from tilelab.grading.value_path import _value, accumulator_fault, condition_values

B = Layout("B", 29, 53)  # K x N at M=37, N=53, K=29
NAMES = {37: "M = 37", 53: "N = 53", 29: "K = 29"}


def pairs(ref, got, n=40):
    return [(ref(k, c), got(k, c)) for k in range(0, 29, 3) for c in range(0, 53, 13)][:n]


def test_a_row_stride_of_K_where_rows_are_N_apart_is_told_as_a_stride():
    why = decode(pairs(lambda k, c: k * 53 + c, lambda k, c: k * 29 + c), B, NAMES)
    assert "steps K = 29 per row" in why and "N = 53 apart" in why
    assert "guard" not in why and "past" not in why


def test_a_column_major_walk_and_an_offset_are_told_as_such():
    assert "column-major" in decode(pairs(lambda k, c: k * 53 + c, lambda k, c: c * 29 + k),
                                    B, NAMES)
    why = decode(pairs(lambda k, c: k * 53 + c, lambda k, c: k * 53 + c + 53), B, NAMES)
    assert "53 place(s) past" in why and "1 row(s), 0 column(s)" in why
    # nothing affine fits: no decoding is made up
    assert decode(pairs(lambda k, c: k * 53 + c, lambda k, c: (k * c) % 97), B, NAMES) is None


def test_a_guard_is_worked_out_for_one_thread_and_names_the_false_term():
    kern = Kernel("__global__ void f(float* C, int M, int N) {\n"
                  "    int row = blockIdx.y * blockDim.y + threadIdx.y;\n"
                  "    int col = blockIdx.x * blockDim.x + threadIdx.x;\n"
                  "    if (row < M - 1 && col < N)\n"
                  "        C[row * N + col] = 1.0f;\n}\n")
    said = condition_values(kern, 4, {"M": 37, "N": 53}, (3, 4, 0), (1, 2, 0), (16, 16, 1))
    assert said == "`row < M - 1` is false (row = 36, M = 37)"
    assert condition_values(kern, 4, {"M": 37, "N": 53}, (0, 0, 0), (0, 0, 0),
                            (16, 16, 1)) == ""  # true for this thread: nothing to say


def test_a_guard_of_a_loops_variable_is_not_guessed():
    kern = Kernel("void f(int rows) {\n  int y = blockIdx.y * 32 + threadIdx.y;\n"
                  "  for (int j = 0; j < 32; j += 8)\n    if (y + j < rows) ;\n}\n")
    assert condition_values(kern, 4, {"rows": 3}, (0, 0, 0), (0, 0, 0), (32, 8, 1)) == ""


@pytest.mark.parametrize("text", ["__import__('os').system('x')", "().__class__", "f(1)",
                                  "a if b else c", "[1][0]"])
def test_a_learners_expression_is_never_run_as_python(text):
    with pytest.raises(ValueError):
        _value(text, {"a": 1, "b": 2, "c": 3})


def test_c_integer_division_and_modulo_truncate_toward_zero():
    assert _value("-7 // 2", {}) == -3 and _value("-7 % 2", {}) == -1


def test_an_accumulator_reset_inside_the_loop_is_told_at_the_reset_not_the_add():
    kern = Kernel("void f() {\n    float acc;\n    for (int k = 0; k < K; ++k) {\n"
                  "        acc = 0.0f;\n        acc += A[k] * B[k];\n    }\n}\n")
    why = accumulator_fault(kern)
    assert why.cause == "accumulator reset" and "(line 4:" in why.advice
    assert "the += itself (line 5:" in why.advice


def test_an_assigned_product_and_a_missing_first_value_are_told_on_their_lines():
    assigned = Kernel("void f() {\n    float acc = 0.0f;\n    for (int k = 0; k < K; ++k)\n"
                      "        acc = A[k] * B[k];\n}\n")
    assert accumulator_fault(assigned).cause == "one term only"
    assert "(line 4:" in accumulator_fault(assigned).advice
    never = Kernel("void f() {\n    float acc;\n    for (int k = 0; k < K; ++k)\n"
                   "        acc += A[k] * B[k];\n}\n")
    assert accumulator_fault(never).cause == "never initialised"
    assert "(line 2:" in accumulator_fault(never).advice
    right = Kernel("void f() {\n    float acc = 0.0f;\n    for (int k = 0; k < K; ++k)\n"
                   "        acc += A[k] * B[k];\n}\n")
    assert accumulator_fault(right) is None


REGISTERS = """void f() {
    float acc[4][4];
    for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j)
            acc[i][j] = 0.0f;
    for (int t = 0; t < K; t += 8) {
        for (int k = 0; k < 8; ++k)
            for (int i = 0; i < 4; ++i)
                for (int j = 0; j < 4; ++j)
                    acc[i][j] += a[i] * b[j];
    }
}
"""


def test_a_register_blocked_accumulator_is_followed_too():
    assert accumulator_fault(Kernel(REGISTERS)) is None  # set to 0 before the loop: right
    reset = REGISTERS.replace("        for (int k = 0; k < 8; ++k)\n",
                              "        for (int k = 0; k < 8; ++k) {\n"
                              "            acc[0][0] = 0.0f;\n", 1).replace(
        "acc[i][j] += a[i] * b[j];\n", "acc[i][j] += a[i] * b[j];\n        }\n")
    why = accumulator_fault(Kernel(reset))
    assert why.cause == "accumulator reset" and "(line 8:" in why.advice
    one_line = REGISTERS.replace("    for (int t = 0; t < K; t += 8) {",
                                 "    for (int t = 0; t < K; t += 8) { acc[0][0] = 0.0f;")
    assert "(line 6:" in accumulator_fault(Kernel(one_line)).advice
    loads = REGISTERS.replace("acc[i][j] += a[i] * b[j];", "a[i] = As[ty + 16 * i][k];\n"
                              "                    acc[i][j] += a[i] * b[j];")
    assert accumulator_fault(Kernel(loads)) is None  # a product inside a subscript is none
    pragma = REGISTERS.replace("        for (int k = 0; k < 8; ++k)\n",
                               "#pragma unroll\n        for (int k = 0; k < 8; ++k)\n")
    assert accumulator_fault(Kernel(pragma.replace(
        "    for (int t = 0; t < K; t += 8) {",
        "    for (int t = 0; t < K; t += 8) { acc[0][0] = 0.0f;"))).cause == "accumulator reset"
    assigned = accumulator_fault(Kernel(REGISTERS.replace("acc[i][j] +=", "acc[i][j] =")))
    assert assigned.cause == "one term only" and "(line 10:" in assigned.advice
    never = REGISTERS.replace("            acc[i][j] = 0.0f;\n", "            ;\n")
    assert accumulator_fault(Kernel(never)).cause == "never initialised"


def line(kind, requests, sectors, bytes_):
    return TrafficLine(26, "A", kind, requests, sectors, 32 * requests, bytes_, 16)


def test_wide_loads_are_counted_by_the_bytes_they_ask_for():
    assert not traffic.uncoalesced(line("read", 10, 160, 10 * 512))  # float4: 16 sectors
    assert traffic.uncoalesced(line("read", 10, 320, 10 * 128))  # a column walk of floats
    assert not traffic.uncoalesced(line("read", 10, 40, 10 * 128))  # coalesced floats


def test_stores_once_per_output_do_not_cost_a_matrix_products_speed_points():
    summary = {"lines": [{"line": 60, "param": "C", "kind": "write", "requests": 128,
                          "sectors": 2048, "sectors_per_request": 16.0,
                          "bytes_per_request": 128.0, "efficiency": 0.25}],
               "sector_bytes_per_multiply_add": 0.5, "loads_per_multiply_add": 0.03}
    assert traffic.skipped_lesson(summary, reuses_tiles=True) is None
    summary["sector_bytes_per_multiply_add"] = 33.0  # threadIdx.x along rows: the GPU's rule
    assert "C, line 60" in traffic.skipped_lesson(summary, reuses_tiles=True)


def test_the_owner_of_an_output_element_is_the_block_over_its_tile():
    tiled, tr = exercises.get("tiled"), exercises.get("transpose_shared")
    assert owner_block(tiled, (37, 53, 29), 36, 40) == 1 + 2 * 1
    # out[Y][X] = in[X][Y]: the block over in's tile at row X, column Y
    assert owner_block(tr, (100, 37), 36, 40) == 1 + 2 * 1
    assert owner_block(exercises.get("block_sum"), (600,), 0, 2) == 2
    assert owner_block(exercises.get("stencil"), (600,), 0, 300) == 1


@pytest.mark.slow
def test_the_emulator_logs_each_threads_accesses_of_the_traced_block():
    ex = exercises.get("tiled")
    shape = (37, 53, 29)
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(0))
    t = run_traced(ex, ex.reference.source(), shape, inputs, block=3)
    assert t is not None and not t.dropped
    A, C = ex.problem.arg_order.index("A"), ex.problem.arg_order.index("C")
    loads = t.by_thread(A, 1)
    # thread (tx, ty) = (4, 2) of block (1, 1) is C[34][36]; it loads A[34][4] (one K tile)
    assert [a.elem for a in loads[4 + 32 * 2]] == [34 * 29 + 4]
    stores = t.by_thread(C, 2)
    assert [a.elem for a in stores[4 + 32 * 2]] == [34 * 53 + 36]
    assert all(a.line > 0 for a in t.accesses)


@pytest.mark.slow
@pytest.mark.parametrize("exercise_id", sorted(exercises.EXERCISES))
def test_no_reference_kernel_is_told_its_traffic_is_uncoalesced(exercise_id):
    from tilelab import emu

    ex = exercises.get(exercise_id)
    shape = ex.problem.analysis_shape
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(0))
    bufs = {n: emu.to_device(a) for n, a in inputs.items()}
    bufs[ex.problem.output] = emu.to_device(np.zeros(ex.problem.output_shape(shape),
                                                     np.float32))
    fn = emu.SourceModule(ex.reference.source(), analysis=True).get_function(ex.kernel)
    fn(*ex.problem.arguments(bufs, shape), block=ex.launch.block,
       grid=ex.launch.grid(ex.problem.sizes(shape)))
    report = fn.last_report.analysis
    said = traffic.remarks(report, ex.problem, shape, ex.reuses_tiles)
    assert not [s for s in said if "sectors per request" in s], said
    assert traffic.skipped_lesson(traffic.summary(report, ex.problem, shape),
                                  ex.reuses_tiles) is None
