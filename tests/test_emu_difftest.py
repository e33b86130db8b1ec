"""The differential test of the emulator against a GPU: the kernel generator, the judging of
outcomes, the GPU side's fault recovery (through a PyCUDA stand-in over the emulator) and
the minimiser. The corpus itself is run by ``benchmarks/fidelity_diff.py``."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
from fidelity import generate
from fidelity.corpus import Arg, Case, Module, modules_of
from fidelity.minimize import ddmin_cases
from fidelity.outcome import (
    Outcome,
    Verdict,
    from_emulator,
    from_pycuda,
    has_reason,
    same_values,
    ulps,
    verdict,
)
from fidelity.runner import emu_run

REPO = Path(__file__).resolve().parents[1]
FAKE = REPO / "tests" / "support" / "fake_pycuda"


def _harness():
    spec = importlib.util.spec_from_file_location("fidelity_diff",
                                                  REPO / "benchmarks" / "fidelity_diff.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_corpus_is_the_same_every_time_and_covers_every_family():
    a, b = generate.corpus(400), generate.corpus(400)
    assert [c.digest() for c in a] == [c.digest() for c in b]
    assert len({c.id for c in a}) == len(a) == 400
    assert {c.family for c in a} == set(generate.FIRST_FAMILIES)
    expects = Counter(c.expect for c in a)
    assert expects["ok"] and expects["fault:misaligned"] and expects["refuse"]
    # a case depends on its index alone: a shorter corpus is a prefix of a longer one
    assert [c.digest() for c in generate.corpus(50)] == [c.digest() for c in a[:50]]


def test_families_added_later_leave_every_earlier_case_as_it_was():
    """A GPU truth file is keyed by case and source: the families added after it was taken
    come after the earlier ones' 2,400 cases, which keep their indices and sources (this
    digest of them was taken before the first later family was added)."""
    first = generate.corpus(2400)
    assert len(first) == 2400 and {c.family for c in first} <= set(generate.FIRST_FAMILIES)
    assert hashlib.sha256("".join(c.digest() for c in first).encode()).hexdigest()[:16] == \
        "e5c4ee89a334a5a0"


def test_later_families_take_only_the_cases_past_the_first_round():
    """A family added later leaves the first round's cases as they were (a truth file of
    the GPU's answers is keyed by their sources) and shares the cases past it."""
    first = generate.corpus(generate.FIRST_ROUND)
    more = generate.corpus(generate.FIRST_ROUND + 600)
    assert [c.digest() for c in more[:len(first)]] == [c.digest() for c in first]
    assert not {c.family for c in first} & set(generate.LATER_FAMILIES)
    assert {c.family for c in more} == set(generate.FAMILIES)
    assert len({c.id for c in more}) == len(more)


def test_the_warp_operand_family_expects_what_the_signatures_say():
    """The generator's own table (not the emulator's) is what nvcc 13.0 does: narrow types
    promote, a float or a 64-bit value is ambiguous for __reduce_add_sync, vectors match
    nothing."""
    ok = generate.warp_accepts
    assert ok("__reduce_add_sync", "short") and ok("__reduce_and_sync", "float")
    assert not ok("__reduce_add_sync", "float") and not ok("__reduce_max_sync", "long")
    assert ok("__shfl_sync", "bool") and ok("__match_any_sync", "double")
    assert not ok("__shfl_sync", "float2") and not ok("__reduce_or_sync", "struct")


def test_cases_round_trip_through_json():
    for c in generate.corpus(120):
        back = Case.from_json(c.to_json())
        assert back.digest() == c.digest() and back.lines == c.lines


def test_modules_keep_refusals_alone_and_options_apart():
    cases = generate.corpus(300)
    mods = modules_of(cases)
    assert sum(len(m.cases) for m in mods) == len(cases)
    for m in mods:
        assert len({(c.options, c.no_extern_c) for c in m.cases}) == 1
        if any(c.alone for c in m.cases):
            assert len(m.cases) == 1
    m = next(m for m in mods if len(m.cases) > 3)
    lines = m.source.splitlines()
    second = m.cases[1]
    first_line = m.source[:m.source.index(second.source.splitlines()[0])].count("\n") + 1
    assert m.case_at(first_line) is second and lines[first_line - 1].startswith(
        second.source.splitlines()[0])


def test_ulps_count_representable_values_between():
    one = np.float32(1)
    up = np.nextafter(one, np.float32(2))
    assert ulps(np.array([one, -0.0, np.nan], np.float32),
                np.array([up, 0.0, np.nan], np.float32)).tolist() == [1, 0, 0]
    assert ulps(np.array([1e-45], np.float32), np.array([-1e-45], np.float32))[0] == 2
    assert np.isinf(ulps(np.array([1.0]), np.array([np.nan])))[0]


def test_outputs_are_compared_by_their_rule():
    exact, ulp2 = Arg("out", np.zeros(3, np.float32)), Arg("out", np.zeros(3, np.float32),
                                                          "ulp", 2)
    a = np.array([1, np.nan, -0.0], np.float32)
    assert same_values(exact, a, a.copy())[0]
    assert not same_values(exact, a, np.array([1, np.nan, 0.0], np.float32))[0]  # -0 vs 0
    b = a.copy()
    b[0] = np.nextafter(np.nextafter(a[0], 2), 2)
    assert same_values(ulp2, a, b)[0] and not same_values(exact, a, b)[0]
    srt = Arg("out", np.zeros(3, np.int32), "sorted")
    assert same_values(srt, np.array([3, 1, 2]), np.array([1, 2, 3]))[0]
    ok, why = same_values(Arg("out", np.zeros(2, np.int32)), np.array([1, 2]),
                          np.array([1, 5]))
    assert not ok and "[1]" in why


def _named(name: str, msg: str, **attrs) -> Exception:
    exc = type(name, (Exception,), {})(msg)
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


def test_both_backends_errors_are_read_into_the_same_classes():
    assert from_pycuda(_named("LaunchError", "cuMemcpyDtoH failed: misaligned address")) \
        .label == "fault:misaligned"
    assert from_pycuda(_named("LogicError", "cuCtxSynchronize failed: an illegal memory "
                              "access was encountered")).label == "fault:illegal_address"
    assert from_pycuda(_named("LaunchError", "cuLaunchKernel failed: too many resources "
                              "requested for launch")).label == "launch:resources"
    assert from_pycuda(_named("CompileError", "nvcc compilation of kernel.cu failed",
                              stderr="error: initializer not allowed")).status == "refused"
    assert from_emulator(_named("OutOfBoundsAccess", "Out-of-bounds read")).label == \
        "fault:illegal_address"
    assert from_emulator(_named("KernelCrash", "Kernel 'k' crashed: assertion `x` failed")) \
        .label == "fault:assert"
    assert from_emulator(_named("CompileError", "kernel.cu did not compile")).status == \
        "refused"


def test_a_verdict_names_silent_divergences_and_refusals_without_reason():
    c = Case("k", "fam", "k", "", (Arg("out", np.zeros(2, np.float32)),), (32, 1, 1))
    good = Outcome("ok", outputs={0: np.array([1, 2], np.float32)})
    assert verdict(c, good, good).klass == "agree"
    assert verdict(c, good, Outcome("fault", "misaligned")).klass == "silent"
    worse = Outcome("ok", outputs={0: np.array([1, 3], np.float32)})
    assert verdict(c, worse, good).klass == "silent"
    refused = Outcome("refused", "compile", "no matching function for call to "
                      "'tl_emu::shfl_sync(int, unsigned int, float2&, int)'")
    v = verdict(c, refused, good)
    assert v.klass == "stricter" and not v.reason and not has_reason(refused)
    assert verdict(c, Outcome("fault", "misaligned", "x"), Outcome("fault", "misaligned")) \
        .klass == "agree"
    assert verdict(c, Outcome("fault", "illegal_address", "x"),
                   Outcome("fault", "misaligned")).klass == "other"


def test_generated_kernels_run_on_the_emulator_with_their_outputs():
    cases = [c for c in generate.corpus(160, families=("vec_global", "warp_shuffle",
                                                       "barriers", "float_edges"))
             if not c.options][:24]
    assert len(cases) >= 12
    got: dict[str, Outcome] = {}
    for m in modules_of(cases):
        got.update(emu_run(m))
    assert set(got) == {c.id for c in cases}
    ran = [c for c in cases if got[c.id].status == "ok"]
    assert len(ran) >= len(cases) // 2
    for c in ran:
        outs = got[c.id].outputs
        for i, a in enumerate(c.args):
            if a.role == "out":
                assert outs[i].dtype == a.value.dtype and outs[i].shape == a.value.shape
    assert all(got[c.id].status in ("ok", "fault", "refused", "launch") for c in cases)


def _three_cases() -> list[Case]:
    def kernel(name: str, body: str) -> Case:
        src = f"__global__ void {name}(float* out)\n{{\n  {body}\n}}\n"
        return Case(name, "t", name, src, (Arg("out", np.zeros(64, np.float32)),), (32, 1, 1))

    return [kernel("ka", "out[threadIdx.x] = 1.0f;"),
            kernel("kb", "out[threadIdx.x + 64] = 2.0f;"),  # past the end
            kernel("kc", "out[threadIdx.x] = 3.0f;")]


def test_the_gpu_side_goes_on_in_a_fresh_process_after_a_fault(tmp_path, monkeypatch):
    """A fault ends a GPU process's context: the module's next case runs in a new one.
    PyCUDA is stood in for by the emulator (tests/support/fake_pycuda)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE), str(REPO)]))
    monkeypatch.syspath_prepend(str(FAKE))
    for name in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, name)
    harness = _harness()
    cases = _three_cases()
    module = Module((), False, cases)
    built = harness.build_all([module], "sm_90", 1)
    got = harness.run_gpu([module], built, 1)
    assert got["ka"].status == "ok" and got["kc"].status == "ok"
    assert got["kb"].label == "fault:illegal_address"
    assert got["kc"].outputs[0][:32].tolist() == [3.0] * 32


def test_the_minimiser_keeps_only_what_the_disagreement_needs():
    """ddmin over a kernel's statements, with stand-ins for both sides: the GPU faults
    whenever the kernel keeps its misaligned float4 load, the emulator never does, and a
    kernel that uses `i` without declaring it builds on neither. Only the load and the
    declaration are left."""
    body = ["int i = threadIdx.x;", "float a = x[i] * 2.0f;", "out[i + 64] = a;",
            "float4 v = reinterpret_cast<const float4*>(x + 1)[i];", "out[i] = v.x;",
            "out[i + 128] = a + 1.0f;", "out[i + 192] = 5.0f;"]
    src = "__global__ void kmin(const float* x, float* out)\n{\n" + \
        "".join(f"  {s}\n" for s in body) + "}\n"
    case = Case("kmin", "t", "kmin", src, (Arg("in", np.arange(200, dtype=np.float32)),
                                            Arg("out", np.zeros(256, np.float32))),
                (32, 1, 1), lines=tuple(range(2, 2 + len(body))))
    zeros = {1: np.zeros(256, np.float32)}

    def builds(c: Case) -> bool:
        return "int i" in c.source or "[i" not in c.source

    def emu(cases: list[Case]) -> dict[str, Outcome]:
        return {c.id: Outcome("ok", outputs=zeros) if builds(c) else Outcome("refused", "x", "x")
                for c in cases}

    def gpu(cases: list[Case]) -> dict[str, Outcome]:
        return {c.id: (Outcome("fault", "misaligned", "misaligned address")
                       if "float4" in c.source else Outcome("ok", outputs=zeros))
                if builds(c) else Outcome("refused", "nvcc", "x") for c in cases}

    small = ddmin_cases([case], gpu([case]), gpu, emu)
    kept, answer = small["kmin"]
    assert [ln.strip() for ln in kept.source.splitlines()[2:-1]] == [body[0], body[3]]
    assert answer.label == "fault:misaligned" and kept.symbol == "kmin" and "kmin" in kept.source


def test_without_a_gpu_the_minimiser_leaves_cases_as_they_are():
    c = replace(_three_cases()[0], lines=(2,))
    small = ddmin_cases([c], {c.id: Outcome("fault", "misaligned")}, None)
    assert small[c.id][0] is c


def test_a_case_that_hangs_the_gpu_is_killed_and_the_rest_is_kept_as_it_comes(
        tmp_path, monkeypatch):
    """A kernel that never ends is stopped at the harness's case limit (its process group
    killed), recorded as a timeout, and the module goes on in a fresh process; every
    module's outcomes reach the sink as they come, and the .jsonl they make is a truth
    file; no module starts after the deadline."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(FAKE), str(REPO)]))
    monkeypatch.setenv("TILELAB_EMU_TIMEOUT", "120")  # the harness's limit comes first
    monkeypatch.syspath_prepend(str(FAKE))
    for name in [m for m in sys.modules if m == "pycuda" or m.startswith("pycuda.")]:
        monkeypatch.delitem(sys.modules, name)
    harness = _harness()
    monkeypatch.setattr(harness, "CASE_TIMEOUT", 3.0)
    ka, _, kc = _three_cases()
    spin = Case("spin", "t", "spin", "__global__ void spin(float* out)\n{\n"
                "  volatile int x = 0;\n  while (x == 0) { }\n}\n",
                (Arg("out", np.zeros(64, np.float32)),), (32, 1, 1))
    module = Module((), False, [ka, spin, kc])
    built = harness.build_all([module], "sm_90", 1)
    seen: list[dict] = []
    got = harness.run_gpu([module], built, 1, sink=seen.append)
    assert got["spin"].status == "timeout", got["spin"]
    assert got["ka"].status == "ok" and got["kc"].status == "ok"
    assert {k for part in seen for k in part} == {"ka", "spin", "kc"}
    lines = tmp_path / "gpu_outcomes.jsonl"
    lines.write_text(json.dumps({"seed": 1}) + "\n" + "".join(
        json.dumps({"case": k, "digest": "d", **o.to_json()}) + "\n" for k, o in got.items())
        + '{"case": "cut', encoding="utf-8")  # a line cut off by a killed run
    truth = harness.read_truth(lines)
    assert set(truth) == {"ka", "spin", "kc"} and truth["spin"]["status"] == "timeout"
    assert harness.run_gpu([module], built, 1, deadline=0.0) == {}


def test_a_gpu_run_takes_every_kind_of_module_in_turn():
    """A run cut short by its deadline has measured some of every family: the modules go in
    turns over their options and family, not in the corpus's order (rare options last)."""
    harness = _harness()

    def task(family: str, options: tuple[str, ...] = ()) -> tuple[list[Case], None]:
        c = replace(_three_cases()[0], family=family, options=options)
        return [c], None

    tasks = [task("a"), task("a"), task("a"), task("b"), task("a", ("-O3",)), task("c")]
    order = [(cs[0].family, cs[0].options) for cs, _ in harness.interleaved(tasks)]
    assert order[:4] == [("a", ()), ("b", ()), ("a", ("-O3",)), ("c", ())]
    assert sorted(order) == sorted((cs[0].family, cs[0].options) for cs, _ in tasks)


def test_the_tally_counts_cases_judged_without_a_gpu_answer():
    harness = _harness()
    seen = Verdict("k1", "fam", "agree", "", "ok", "ok")
    guessed = Verdict("k2", "fam", "unknown", "", "ok", "expected missing")
    row = next(ln for ln in harness.tally([seen, guessed]).splitlines() if ln.split()[0] == "fam")
    cols = dict(zip(("agree", "silent", "stricter", "other", "unknown", "noreason",
                     "unmeasured", "cases"), map(int, row.split()[1:]), strict=True))
    assert (cols["agree"], cols["unknown"], cols["unmeasured"], cols["cases"]) == (1, 1, 1, 2)
