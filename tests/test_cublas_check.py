"""The cuBLAS cross-check and the road's per-size counters, read from Nsight Compute's
launches (CPU: ncu's answer stood in for by a list of launches and kernel names)."""

from __future__ import annotations

import json

import pytest

from tilelab.experiments import counters, cublas_check, road


def _fake_profile(monkeypatch, launches, names):
    monkeypatch.setattr(counters, "profile", lambda *a, **k: (launches, names))


def _ms(value: float) -> dict[str, float]:
    return {"gpu__time_duration_sum": value * 1e6}  # ns, as ncu prints it


def test_ncu_durations_split_cublas_calls_from_the_course_kernel(monkeypatch):
    """At one size cuBLAS launches one kernel a call, at the other two (a split and its
    reduction): each call's kernels are summed, the course kernel's launches close a size."""
    n3 = cublas_check.NCU_LAUNCHES
    launches = [_ms(1.0)] * n3 + [_ms(1.1)] * n3 + [_ms(2.0), _ms(0.5)] * n3 + [_ms(2.4)] * n3
    names = (["sm80_xmma_gemm"] * n3 + ["matmul_ahead"] * n3
             + ["splitk_gemm", "splitk_reduce"] * n3 + ["matmul_ahead"] * n3)
    _fake_profile(monkeypatch, launches, names)
    got = cublas_check.ncu_durations((1024, 3072))
    assert got[1024]["ncu_ms"] == pytest.approx(1.0) and got[1024]["cublas_kernels"] == 1
    assert got[3072]["ncu_ms"] == pytest.approx(2.5) and got[3072]["cublas_kernels"] == 2
    assert got[3072]["reference_ncu_ms"] == pytest.approx(2.4)
    assert got[3072]["ncu_kernel"] == "splitk_gemm + splitk_reduce"


def test_a_time_that_is_not_the_kernel_is_a_disagreement():
    """The events' own overhead (a course kernel's events less its ncu duration) is taken
    away; what is left over ncu's duration is what the check judges."""
    ncu = {"ncu_ms": 2.69, "reference_ncu_ms": 2.79}
    fine = cublas_check.disagreements(2.695, 2.796, ncu, 2.69)
    assert abs(fine["ncu_disagreement"]) < cublas_check.TOLERANCE
    assert fine["event_overhead_ms"] == pytest.approx(0.006)
    late = cublas_check.disagreements(2.809, 2.796, ncu, 2.69)  # the first bench's 0.11 ms
    assert late["ncu_disagreement"] > cublas_check.TOLERANCE
    assert late["second_disagreement"] > cublas_check.TOLERANCE


def test_other_experiments_are_held_against_the_cross_checked_medians(tmp_path):
    rows = [{"n": 1024, "event_ms": 0.065, "ncu_ms": 0.062, "second_ms": 0.0646}]
    (tmp_path / "cublas_check.json").write_text(json.dumps({"rows": rows}))
    got = cublas_check.verify(tmp_path, {1024: 0.0655}, "matmul")
    assert got[1024]["check_event_ms"] == 0.065
    with pytest.raises(cublas_check.CrossCheckFailed, match="off the cross-checked"):
        cublas_check.verify(tmp_path, {1024: 0.159}, "matmul")  # the first bench's median
    with pytest.raises(cublas_check.CrossCheckFailed, match="not in cublas_check"):
        cublas_check.verify(tmp_path, {2048: 0.35}, "sgemm")
    with pytest.raises(cublas_check.CrossCheckFailed, match="written first"):
        cublas_check.verify(tmp_path / "nowhere", {1024: 0.065}, "sgemm")


def test_the_size_counters_give_each_case_its_launches(monkeypatch):
    launches = [dict(_ms(1.0), sm__cycles_active_avg=90.0, sm__cycles_elapsed_max=100.0),
                _ms(0.9), _ms(0.2),
                dict(_ms(2.0), sm__cycles_active_avg=50.0, sm__cycles_elapsed_max=100.0),
                _ms(1.8)]
    names = ["matmul_shapes", "gemm_a", "reduce_a", "matmul_shapes", "gemm_b"]
    _fake_profile(monkeypatch, launches, names)
    cases = [("shapes", 1024), ("cublas", 1024), ("shapes_64x128x16", 3072), ("cublas", 3072)]
    got = road.size_counters(cases)
    assert got[("cublas", 1024)]["gpu__time_duration_sum"] == pytest.approx(1.1e6)
    assert got[("cublas", 1024)]["ncu_kernel"] == "gemm_a"
    assert got[("cublas", 3072)]["ncu_kernel"] == "gemm_b"
    cols = road.ncu_columns(got[("shapes_64x128x16", 3072)])
    assert cols["sm_busy"] == pytest.approx(0.5) and cols["ncu_ms"] == pytest.approx(2.0)
