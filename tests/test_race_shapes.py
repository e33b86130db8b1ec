"""A race's shape decides its fix (tilelab/grading/race_shapes.py): each shape on records
made by hand, and the emulator's evidence the shapes read (which access came first, a lost
update in global memory, an atomic's own line) on small kernels."""

from __future__ import annotations

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu.report import Race
from tilelab.grading import race_shapes
from tilelab.grading.diagnosis import CAUSES, race_diagnosis
from tilelab.grading.race_shapes import OVERLAP, classify, enclosing_loop, loops


def race(array: str = "s", lines: tuple[int, int] = (5, 8),
         kinds: tuple[str, str] = ("write", "read"), *, same_warp: bool = False,
         memory: str = "shared", other_block: tuple[int, int, int] | None = None,
         order: int = 0, index: tuple[int, ...] = (3,), values: int = 0) -> Race:
    return Race(array, index, lines, kinds, ((1, 0, 0), (40, 0, 0)), (0, 0, 0), 7,
                same_warp, memory, other_block, order, values)


TILED = """\
__global__ void k(const float* A, float* C, int K)
{
    __shared__ float s[64];
    float acc = 0.0f;
    for (int t = 0; t < K; t += 64) {
        s[threadIdx.x] = A[t + threadIdx.x];
        __syncthreads();
        for (int k = 0; k < 64; ++k)
            acc += s[k];
    }
    C[threadIdx.x] = acc;
}
"""


def test_a_lost_update_gets_an_atomic_or_a_tree_never_a_barrier():
    src = "__global__ void k(const float* x)\n{\n    __shared__ float total;\n" \
          "    total += x[threadIdx.x];\n}\n"
    races = [race("total", (4, 4), ("read", "write"), index=(0,)),
             race("total", (4, 4), ("write", "write"), index=(0,))]
    shape = classify(races, src)
    assert shape.kind == "lost update" and shape.cause == "race"
    assert "atomicAdd(&total, value) on line 4" in shape.fix and "tree" in shape.fix
    assert "no barrier can fix it" in shape.fix
    assert "put __syncthreads()" not in shape.fix and "__syncwarp" not in shape.fix
    # the two writes alone, the code's += telling the read
    assert classify(races[1:], src).kind == "lost update"
    # between blocks: an atomic, no tree (a tree is one block's)
    blocks = classify([race("sums", (4, 4), ("write", "write"), other_block=(1, 0, 0),
                            memory="global", index=(0,))],
                      src.replace("total +=", "sums[0] +="))
    assert blocks.kind == "lost update" and "atomicAdd(&sums[0], value)" in blocks.fix
    assert "threads of different blocks" in blocks.fix and "tree" not in blocks.fix


def test_a_barrier_between_write_and_read_in_the_source_means_across_trips():
    shape = classify([race(lines=(6, 9))], TILED)
    assert shape.kind == "across trips"
    assert "the barrier on line 7 orders the store on line 6 before the read on line 9" in \
        shape.fix
    assert "put __syncthreads() as the last statement of the body of the loop on line 5, " \
        "after line 9, before the loop's closing brace on line 10" in shape.fix
    assert "between line" not in shape.fix
    # the barrier's line left empty (deleted, or commented out): named as the place
    emptied = TILED.replace("            acc += s[k];\n", "            acc += s[k];\n"
                            "        // __syncthreads();\n")
    assert "the loop on line 5 (on line 10, empty now), after line 9, before the loop's " \
        "closing brace on line 11" in classify([race(lines=(6, 9))], emptied).fix
    # a read in a loop of several lines: after that loop
    inner = TILED.replace("            acc += s[k];\n", "        {\n            acc += s[k];\n"
                          "        }\n")
    assert "after line 10 and the loop that holds it (which ends on line 11), before the " \
        "loop's closing brace on line 12" in classify([race(lines=(6, 10))], inner).fix


def test_no_barrier_between_write_and_read_puts_one_there_and_at_the_loop_end():
    src = TILED.replace("        __syncthreads();\n", "")
    shape = classify([race(lines=(6, 8))], src)
    assert shape.kind == "missing barrier"
    assert "put __syncthreads() between line 6 and line 8 (after the store on line 6, " \
        "before the read on line 8)" in shape.fix
    assert "another __syncthreads() at the end of its body, after the reads on line 8" in \
        shape.fix
    # the end-of-loop barrier there already: only the one between
    ended = src.replace("            acc += s[k];\n", "            acc += s[k];\n"
                        "        __syncthreads();\n")
    assert "at the end of its body" not in classify([race(lines=(6, 8))], ended).fix


def test_a_read_and_write_on_one_line_in_a_loop_gets_the_end_of_loop_barrier():
    src = ("__global__ void k(float* buf)\n{\n    int tid = threadIdx.x;\n"
           "    for (int s = 128; s > 0; s >>= 1) {\n        if (tid < s)\n"
           "            buf[tid] += buf[tid + s];\n    }\n}\n")
    shape = classify([race("buf", (6, 6), ("read", "write"))], src)
    assert shape.kind == "across trips"
    assert "put __syncthreads() as the last statement of the body of the loop on line 4, " \
        "after line 6, before the loop's closing brace on line 7" in shape.fix


def test_a_race_within_one_warp_without_source_gets_syncwarp_after_its_line():
    text = race_shapes.classify([race(lines=(9, 9), kinds=("read", "write"),
                                      same_warp=True)]).fix
    assert "put __syncwarp() after line 9" in text and "__syncthreads" not in text


def test_one_line_storing_one_element_from_several_lanes_is_never_told_syncwarp():
    src = "\n" * 12 + "    warp_sums[warp] = v;\n"
    shape = classify([race("warp_sums", (13, 13), ("write", "write"), same_warp=True)], src)
    assert shape.kind == "same store"
    assert "several lanes of one warp store to warp_sums[3] on line 13" in shape.fix
    assert "let one thread store it" in shape.fix
    assert "put __syncwarp()" not in shape.fix and "put __syncthreads()" not in shape.fix


def test_one_line_storing_one_element_is_an_index_error_where_values_differ_or_go_missing():
    src = "\n" * 10 + "    int c = (tid % 16) * 2;\n    s[c] = v;\n"
    differ = classify([race("s", (12, 12), ("write", "write"), same_warp=True, values=2)], src)
    assert differ.cause == OVERLAP and "store different values to s[3] on line 12" in \
        differ.fix
    assert "its index is made of values set on line 11" in differ.fix
    assert "put __syncwarp()" not in differ.fix and "put __syncthreads()" not in differ.fix
    # the same value, but elements no thread stores (the output's NaN): the index again
    missing = classify([race("s", (12, 12), ("write", "write"), values=1)], src, nan_read=True)
    assert missing.cause == OVERLAP and "stored by no thread" in missing.fix
    # the same value and nothing missing: harmless, said so, one thread to store it
    same = classify([race("s", (12, 12), ("write", "write"), values=1)], src)
    assert same.cause == "race" and "store the same value to s[3] on line 12" in same.fix
    assert "harmless here" in same.fix and "let one thread store it" in same.fix


def test_two_lines_storing_one_element_are_an_index_error():
    shape = classify([race("s", (11, 15), ("write", "write"), index=(256,))], nan_read=True)
    assert shape.kind == "two stores" and shape.cause == OVERLAP and OVERLAP in CAUSES
    assert "s[256] is stored on line 11 by thread (1, 0, 0) and on line 15" in shape.fix
    assert "an index is wrong" in shape.fix and "no thread stored is read" in shape.fix
    assert "put __syncthreads()" not in shape.fix
    assert "no thread stored" not in classify([race("s", (11, 15), ("write", "write"))]).fix
    # a read racing too: the order is wrong, and that is told first
    both = classify([race("s", (11, 15), ("write", "write")), race("s", (11, 19))])
    assert both.kind == "missing barrier"


def test_an_atomic_beside_a_plain_access_names_both_lines():
    shape = classify([race("sums", (8, 10), ("write", "atomic write"), memory="global")])
    assert shape.kind == "atomic"
    assert "the atomic on line 10" in shape.fix and "plain write of sums[3] on line 8" in \
        shape.fix and "between line 8 and line 10" in shape.fix
    # by two blocks: no barrier orders them
    blocks = classify([race("sums", (8, 10), ("write", "atomic write"), memory="global",
                            other_block=(1, 0, 0))])
    assert "threads of two blocks" in blocks.fix and "__syncthreads" not in blocks.fix


def test_a_device_array_shared_by_blocks_is_told_to_be_shared():
    src = "__device__ float As[64][16];\n__global__ void k(const float* A, float* C)\n{\n}\n"
    shape = classify([race("As", (28, 41), other_block=(0, 0, 0), memory="global")], src)
    assert shape.kind == "blocks"
    assert "As is a __device__ variable: one copy for the whole launch" in shape.fix
    assert "Declare it __shared__ inside the kernel" in shape.fix
    param = classify([race("C", (28, 41), other_block=(0, 0, 0), memory="global")], src)
    assert "index it with blockIdx" in param.fix and "__device__" not in param.fix


def test_the_diagnosis_reads_the_shape():
    d = race_diagnosis([race(lines=(6, 9))], TILED)
    assert d.cause == "race" and "across trips" in d.advice and d.advice.endswith(".")
    # the source has a barrier between the two lines: never "no barrier between them"
    assert "no barrier between them" not in d.advice
    assert "no barrier between the read of one trip of the loop and the store of the next" \
        in d.advice
    assert race_diagnosis([race("s", (11, 15), ("write", "write"))]).cause == OVERLAP
    with pytest.raises(ValueError):
        classify([])


def test_describe_says_which_access_came_first_against_the_source_order():
    r = race(lines=(15, 18), kinds=("write", "read"), order=2)
    assert r.earlier == 1
    assert "the read on line 18 came first and the write on line 15 after it" in r.describe()
    assert race(order=3).earlier is None and "came first" not in race(order=3).describe()
    assert race(order=1).earlier == 0 and "came first" not in race(order=1).describe()
    unmapped = race(lines=(0, 5)).describe()
    assert "line 0" not in unmapped and "a line the emulator could not map" in unmapped


def test_loops_are_found_with_their_bodies():
    src = "int a;\ndo {\n  x++;\n} while (x < 3);\nwhile (y) y--;\nfor (;;)\n  for (;;)\n" \
          "    z++;\n"
    assert [(lp.head, lp.end, lp.braced) for lp in loops(src)] == [
        (2, 4, True), (5, 5, False), (6, 8, False), (7, 8, False)]
    assert enclosing_loop(src, 8).head == 7 and enclosing_loop(src, 3, 5) is None
    assert loops("// for (;;) {\n/* while (1) */ int x;\n") == []


# ---------------------------------------------------------------- the emulator's evidence


def _races(src: str, name: str, n: int = 64) -> list[Race]:
    fn = emu.SourceModule(src, analysis=True).get_function(name)
    x, out = np.ones(n, np.float32), np.zeros(2, np.float32)
    fn(emu.In(x), emu.InOut(out), block=(n, 1, 1), grid=(1, 1))
    return fn.last_report.analysis.races


def test_the_emulator_records_a_lost_update_in_global_memory():
    src = ("__global__ void k(const float* x, float* out)\n{\n"
           "    out[0] += x[threadIdx.x];\n}\n")
    races = _races(src, "k")
    assert any(r.kinds == ("write", "write") and r.lines == (3, 3) for r in races), races
    shape = classify(races, src)
    assert shape.kind == "lost update" and "atomicAdd(&out[0], value) on line 3" in shape.fix


@pytest.mark.parametrize(("value", "seen"), [("1.0f", 1), ("(float)threadIdx.x", 2)])
def test_the_emulator_tells_two_stores_of_one_value_from_two_of_different_ones(value, seen):
    src = ("__global__ void k(const float* x, float* out)\n{\n    __shared__ float s[1];\n"
           f"    s[0] = {value};\n    __syncthreads();\n"
           "    if (threadIdx.x == 0)\n        out[0] = s[0];\n}\n")
    races = _races(src, "k")
    assert [(r.lines, r.kinds, r.values) for r in races] == [((4, 4), ("write", "write"), seen)]


def test_the_emulator_names_an_atomics_line_and_which_access_came_first():
    src = ("__global__ void k(const float* x, float* out)\n{\n"
           "    if (threadIdx.x == 0)\n        out[0] = 0.0f;\n"
           "    atomicAdd(&out[0], x[threadIdx.x]);\n}\n")
    (r,) = _races(src, "k")
    assert r.lines == (4, 5) and r.kinds == ("write", "atomic write"), r
    assert r.earlier == 0  # thread 0's store, then the others' atomics
    assert "between line 4 and line 5" in classify([r], src).fix
