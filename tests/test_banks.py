"""The one bank rule of wide shared accesses (tilelab/catalog/banks.py), the emulator's
count of the same accesses, and the bench's guard on late samples."""

from __future__ import annotations

import pytest

from tilelab.catalog import banks
from tilelab.device.bench import LATE_MS, HeldUp, Timing, keep_early
from tilelab.experiments import bank_wide


def _bytes(words):
    return [None if w is None else 4 * w for w in words]


def test_a_16_byte_broadcast_takes_two_passes_and_a_row_of_float4_four():
    assert banks.wavefronts(_bytes([0] * 32), 16) == 2  # paired lanes: two half-warps
    assert banks.wavefronts(_bytes([0] * 32), 16, load=False) == 4  # stores never pair
    assert banks.wavefronts(_bytes([4 * lane for lane in range(32)]), 16) == 4
    assert banks.ideal(_bytes([4 * lane for lane in range(32)]), 16) == 4


def test_two_chunks_a_quad_apart_in_one_phase_conflict():
    # lanes 0-15 at chunks 0, 2, 4 ... 30, lanes 16-31 the same: no pairing, and in each
    # quarter-warp the 8 chunks sit in 4 quads: 2 passes a quarter
    words = [(lane % 16) * 8 for lane in range(32)]
    assert banks.wavefronts(_bytes(words), 16) == 8
    assert banks.degree(_bytes(words), 16) == 2
    # one chunk per half-warp (lanes n and n^1 alike): 2 passes, no conflict
    words = [0 if lane < 16 else 8 for lane in range(32)]
    assert banks.wavefronts(_bytes(words), 16) == 2
    assert banks.degree(_bytes(words), 16) == 1


def test_pairing_is_lane_n_with_n_xor_1_or_n_xor_2_and_no_other():
    alike4 = [4 * ((lane % 4) + 4 * (lane // 8)) for lane in range(32)]
    assert not banks.paired(_bytes(alike4))
    assert banks.paired(_bytes([4 * (lane // 2) for lane in range(32)]))
    assert banks.paired(_bytes([4 * ((lane // 4) * 2 + lane % 2) for lane in range(32)]))


def test_idle_lanes_take_no_pass():
    words = [4 * lane if lane < 8 else None for lane in range(32)]
    assert banks.wavefronts(_bytes(words), 16) == 1
    assert banks.wavefronts([None] * 32, 16) == 0


def test_4_byte_accesses_are_one_phase_of_32_lanes():
    assert banks.wavefronts(_bytes(list(range(32))), 4) == 1
    assert banks.wavefronts(_bytes([32 * lane for lane in range(32)]), 4) == 32
    assert banks.bank_passes([33 * lane for lane in range(32)]) == 1


@pytest.mark.slow
def test_the_emulator_counts_every_pattern_of_the_bench_as_the_rule_does():
    """The bench's patterns (the course's and drawn ones) as loads and stores, analysed on
    the CPU emulator: its worst degree is the rule's, case by case."""
    cases = bank_wide.cases()
    assert len(cases) > 60
    got = bank_wide.emulator_degrees(cases)
    for kernel, name, pattern in cases:
        width, load = bank_wide.KERNELS[kernel]
        want = bank_wide.predictions(pattern, width, load)["degree"]
        assert got[(kernel, name)] == want, (kernel, name)


def test_a_late_sample_is_timed_again_and_a_held_up_run_stops():
    late = LATE_MS * 3
    samples = iter([(1.0, late), (2.0, 0.01), (3.0, late), (4.0, late), (5.0, 0.02)])
    t = Timing("k")
    budget = [5]
    keep_early(lambda: next(samples), t, budget)
    keep_early(lambda: next(samples), t, budget)
    assert t.samples_ms == [2.0, 5.0]  # no late sample kept
    assert t.submitted_ms == [0.01, 0.02]
    assert t.redone == 3 and budget == [2]
    with pytest.raises(HeldUp):
        keep_early(lambda: (9.0, late), Timing("h"), [1])
