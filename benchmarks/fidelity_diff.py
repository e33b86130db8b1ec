"""The emulator against the GPU, by differential testing of generated kernels.

Generates the corpus (``tests/fidelity/generate.py``: seeded, the same on every machine),
packs it into few modules, and runs every case on the CPU emulator; then, by what is at
hand:

- ``--nvcc``: builds every module with the local nvcc as PyCUDA calls it (``nvcc --cubin
  OPTIONS -arch sm_XX kernel.cu``, the source wrapped in ``extern "C" { }`` unless
  ``no_extern_c``): what nvcc refuses needs no GPU, nor which symbols a cubin holds;
- ``--gpu``: builds them so (PyCUDA's own compile when PyCUDA is installed) and runs every
  case on the GPU, one process per module (a kernel that faults ends its process's CUDA
  context: the module's next cases go on in a fresh one); writes the GPU's outcomes
  (``gpu_outcomes.json``: the truth file, outputs included) and the disagreements;
- ``--truth FILE``: compares the emulator with a truth file written by an earlier ``--gpu``
  run (no GPU needed: cases whose source or inputs changed since are left out);
- neither: compares the emulator with what the generator built each case to do.

Disagreements are minimised (``--minimize``: statements of the kernel's body deleted while
the disagreement stays, the GPU's answer re-measured each round where a GPU is at hand) and
written as regression cases with the GPU's answer (``regressions.json``), for
``tests/fidelity/regressions.json``. A tally per family and class is printed last.

    python benchmarks/fidelity_diff.py --out OUT [--count 3000] [--nvcc | --gpu] [--minimize]
    python benchmarks/fidelity_diff.py --out OUT --truth OUT/gpu_outcomes.json
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from fidelity import generate  # noqa: E402
from fidelity.corpus import Case, Module, modules_of  # noqa: E402
from fidelity.minimize import ddmin_cases, emu_side  # noqa: E402
from fidelity.outcome import (  # noqa: E402
    Outcome,
    Verdict,
    against_expectation,
    expected,
    has_reason,
    verdict,
)
from fidelity.runner import emu_run, gpu_launch  # noqa: E402

#: Seconds a GPU worker process may take for one module before it is killed.
GPU_MODULE_TIMEOUT = 120.0
CASE_TIMEOUT = 15.0  # seconds a GPU worker may go without finishing a case


# ---- nvcc, as PyCUDA calls it ----------------------------------------------------------------
def pycuda_include() -> list[str]:
    try:
        import pycuda  # noqa: F401
        from pycuda.compiler import _find_pycuda_include_path
    except ImportError:
        return []
    return [_find_pycuda_include_path()]


def nvcc_build(source: str, options: tuple[str, ...], no_extern_c: bool, arch: str,
               nvcc: str = "nvcc") -> tuple[bytes | None, str]:
    """``(cubin, "")`` or ``(None, nvcc's errors)``: PyCUDA's compile_plain, cache aside."""
    try:
        from pycuda.compiler import compile as pycuda_compile
        from pycuda.driver import CompileError
    except ImportError:
        pycuda_compile = None
    if pycuda_compile is not None:
        try:
            return pycuda_compile(source, nvcc=nvcc, options=list(options),
                                  no_extern_c=no_extern_c, arch=arch), ""
        except CompileError as exc:
            return None, " ".join(((exc.stderr or "") + " " + str(exc)).split())
    text = source if no_extern_c else f'extern "C" {{\n{source}\n}}\n'
    opts = [*options, "-arch", arch, *(f"-I{d}" for d in pycuda_include())]
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "kernel.cu").write_text(text)
        p = subprocess.run([nvcc, "--cubin", *opts, "kernel.cu"], cwd=tmp, capture_output=True,
                           text=True, check=False)
        cubin = Path(tmp, "kernel.cubin")
        if p.returncode != 0 or not cubin.exists():
            return None, " ".join((p.stdout + p.stderr).split())
        return cubin.read_bytes(), ""


def cubin_symbols(cubin: bytes) -> set[str] | None:
    """The function symbols of a cubin (what cuModuleGetFunction finds); None when it is no
    ELF file."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(cubin))
    except ELFError:
        return None
    tab = elf.get_section_by_name(".symtab")
    return {s.name for s in tab.iter_symbols() if s["st_info"]["type"] == "STT_FUNC"} \
        if tab else set()


def nvcc_module(module: Module, arch: str) -> dict[str, Any]:
    """A module built by nvcc; a module that fails is built again case by case."""
    cubin, err = nvcc_build(module.source, module.options, module.no_extern_c, arch)
    if cubin is not None:
        return {"cubin": cubin, "cases": {c.id: "" for c in module.cases}}
    if len(module.cases) == 1:
        return {"cubin": None, "cases": {module.cases[0].id: err or "nvcc failed"}}
    out: dict[str, Any] = {"cubin": None, "cases": {}, "split": True}
    for c in module.cases:
        one = nvcc_module(Module(module.options, module.no_extern_c, [c]), arch)
        out["cases"].update(one["cases"])
        out.setdefault("cubins", {})[c.id] = one["cubin"]
    return out


# ---- the emulator side -------------------------------------------------------------------------
def _emu_module(module: Module) -> dict[str, dict]:
    return {k: v.to_json() for k, v in emu_run(module).items()}


def run_emulator(modules: list[Module], jobs: int) -> tuple[dict[str, Outcome], float]:
    """Every case on the emulator, a module per process; and the seconds it took."""
    t0 = time.monotonic()
    out: dict[str, Outcome] = {}
    # the longest modules first, so no process is left alone with one at the end
    order = sorted(modules, key=lambda m: -len(m.cases))
    # spawned, not forked: the GPU side's threads run meanwhile in this process
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        for res in pool.map(_emu_module, order):
            out.update({k: Outcome.from_json(v) for k, v in res.items()})
    return out, time.monotonic() - t0


# ---- the GPU side ------------------------------------------------------------------------------
def gpu_arch() -> str:
    p = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                       capture_output=True, text=True, check=False)
    cap = (p.stdout.strip().splitlines() or ["9.0"])[0].strip()
    return "sm_" + cap.replace(".", "")


def worker(job_path: str) -> None:
    """Run a job's cases on the GPU from ``start``, one JSON line per case; stop after the
    first that leaves the context unusable (a fault)."""
    job = pickle.loads(Path(job_path).read_bytes())
    import pycuda.driver as drv

    drv.init()
    ctx = drv.Device(0).make_context()
    results = open(job["results"], "a")  # noqa: SIM115 (kept open for the process)

    def put(rec: dict) -> None:
        results.write(json.dumps(rec) + "\n")
        results.flush()

    try:
        mod = drv.module_from_buffer(job["cubin"])
    except Exception as exc:  # loading the module failed: every case's outcome
        from fidelity.outcome import from_pycuda

        o = from_pycuda(exc).to_json()
        for k in range(job["start"], len(job["cases"])):
            put({"k": k, "outcome": o})
        results.close()
        os._exit(0)
    for k in range(job["start"], len(job["cases"])):
        put({"begin": k})
        o = gpu_launch(drv, mod, job["cases"][k])
        put({"k": k, "outcome": o.to_json()})
        if o.status in ("fault", "timeout", "error"):
            break
    results.close()
    with contextlib.suppress(Exception):
        ctx.pop()
    os._exit(0)


def _read_results(res: Path, cases: list[Case],
                  out: dict[str, Outcome]) -> tuple[int | None, set[int]]:
    """The cases a worker has finished (into ``out``) and the one it began last."""
    begun, done = None, set()
    for line in res.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:  # a line cut off by the worker's end
            continue
        if "begin" in rec:
            begun = rec["begin"]
        else:
            out[cases[rec["k"]].id] = Outcome.from_json(rec["outcome"])
            done.add(rec["k"])
    return begun, done


def _run_worker(job: Path, res: Path) -> str:
    """One worker process; killed (its whole group) when a case makes no progress within
    CASE_TIMEOUT seconds or the module within GPU_MODULE_TIMEOUT. Returns why it ended."""
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, __file__, "--worker", str(job)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    size, last = -1, time.monotonic()
    while p.poll() is None:
        time.sleep(0.2)
        now = time.monotonic()
        n = res.stat().st_size if res.exists() else 0
        if n != size:
            size, last = n, now
        if now - last > CASE_TIMEOUT or now - t0 > GPU_MODULE_TIMEOUT:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait()
            return f"no result within {now - last:.0f} s (a hang?)"
    err = p.stderr.read() if p.stderr else ""
    return f"worker exited {p.returncode}: {' '.join(err.split())[-300:]}"


def gpu_module(cases: list[Case], cubin: bytes, tmp: Path, tag: str) -> dict[str, Outcome]:
    """Every case of one built module on the GPU, in as many fresh processes as faults
    and hangs need."""
    out: dict[str, Outcome] = {}
    start = 0
    res = tmp / f"{tag}.jsonl"
    job = tmp / f"{tag}.pkl"
    while start < len(cases):
        res.write_text("")
        job.write_bytes(pickle.dumps({"cubin": cubin, "cases": cases, "start": start,
                                      "results": str(res)}))
        why = _run_worker(job, res)
        begun, done = _read_results(res, cases, out)
        if begun is not None and begun not in done:  # died inside that case
            status = "timeout" if "within" in why else "error"
            out[cases[begun].id] = Outcome(status, "worker", why)
            done.add(begun)
        nxt = max(done) + 1 if done else start + 1
        if not done:
            out[cases[start].id] = Outcome("error", "worker", why)
        start = max(nxt, start + 1)
    return out


def interleaved(tasks: list[tuple[list[Case], Any]]) -> list[tuple[list[Case], Any]]:
    """``tasks`` (cases and their cubin) in turns over their kind (options and the most
    common family): the first module of each kind, then the second of each, ... so a run
    cut short by its deadline has measured some of every family (the corpus's order puts
    the modules of rarer options last: a cut 2,400-case run once measured no registers
    case)."""
    kinds: dict[tuple, list] = defaultdict(list)
    for t in tasks:
        fam = Counter(c.family for c in t[0]).most_common(1)[0][0]
        kinds[(t[0][0].options, fam)].append(t)
    rows = list(kinds.values())
    return [row[i] for i in range(max(map(len, rows), default=0)) for row in rows if i < len(row)]


def run_gpu(modules: list[Module], built: dict[str, dict], jobs: int,
            sink: Any = None, deadline: float = float("inf")) -> dict[str, Outcome]:
    """Every case on the GPU: a refused module's cases get nvcc's refusal. ``sink`` gets
    each module's outcomes as they come (a run cut short keeps them); no module starts
    after ``deadline`` (time.monotonic()); progress goes to stderr every 10 s."""
    out: dict[str, Outcome] = {}
    tasks = []
    for m in modules:
        b = built[m.name]
        if b["cubin"] is not None:
            tasks.append((m.cases, b["cubin"]))
            continue
        for c in m.cases:
            err = b["cases"].get(c.id, "")
            cub = b.get("cubins", {}).get(c.id)
            if cub is not None:
                tasks.append(([c], cub))
            else:
                out[c.id] = Outcome("refused", "nvcc", err)
    if sink is not None:
        sink(dict(out))
    tasks = interleaved(tasks)
    total = sum(len(cs) for cs, _ in tasks)
    t0, shown, done = time.monotonic(), time.monotonic(), 0

    def one(i: int, cs: list[Case], cub: bytes, tmp: Path) -> dict[str, Outcome]:
        if time.monotonic() > deadline:
            return {}
        return gpu_module(cs, cub, tmp, f"j{i}")

    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(jobs) as pool:
        futs = [pool.submit(one, i, cs, cub, Path(tmp)) for i, (cs, cub) in enumerate(tasks)]
        for f in as_completed(futs):
            got = f.result()
            out.update(got)
            done += len(got)
            if sink is not None and got:
                sink(got)
            if time.monotonic() - shown > 10:
                shown = time.monotonic()
                print(f"GPU: {done} of {total} cases run, {shown - t0:.0f} s", file=sys.stderr,
                      flush=True)
    return out


def nvcc_outcomes(modules: list[Module], built: dict[str, dict]) -> dict[str, Outcome]:
    """What nvcc alone says of each case: refused (with its errors), a symbol the cubin lacks
    (get_function would not find it), or built."""
    out = {}
    for m in modules:
        b = built[m.name]
        for c in m.cases:
            err = b["cases"].get(c.id, "")
            cub = b["cubin"] if b["cubin"] is not None else b.get("cubins", {}).get(c.id)
            if cub is None:
                out[c.id] = Outcome("refused", "nvcc", err)
            elif c.symbol not in (cubin_symbols(cub) or {c.symbol}):
                out[c.id] = Outcome("launch", "not_found", f"no symbol {c.symbol} in the cubin")
            else:
                out[c.id] = Outcome("ok", "built")
    return out


def build_all(modules: list[Module], arch: str, jobs: int) -> dict[str, dict]:
    with ThreadPoolExecutor(jobs) as pool:
        return dict(zip([m.name for m in modules],
                        pool.map(lambda m: nvcc_module(m, arch), modules), strict=True))


# ---- judging, minimising, reporting ------------------------------------------------------------
def judge(cases: list[Case], emu: dict[str, Outcome], gpu: dict[str, Outcome] | None,
          nvcc: dict[str, Outcome] | None) -> list[Verdict]:
    """A verdict per case: against the GPU where there is its answer; else, for a build
    question, against nvcc; else against the generator's expectation."""
    out = []
    for c in cases:
        e = emu.get(c.id, Outcome("missing"))
        if gpu is not None and c.id in gpu:
            out.append(verdict(c, e, gpu[c.id]))
            continue
        n = nvcc.get(c.id) if nvcc else None
        if n is not None and n.status != "ok":
            out.append(verdict(c, e, n))
            continue
        if n is not None and e.status == "refused":  # nvcc built what the emulator refused
            out.append(Verdict(c.id, c.family, "stricter", e.message[:300], e.label, "built",
                               has_reason(e)))
            continue
        k = against_expectation(c, e)
        out.append(Verdict(c.id, c.family, k, e.message[:300] if k != "agree" else "", e.label,
                           f"expected {expected(c).label}", e.status == "ok" or has_reason(e)))
    return out


def tally(verdicts: list[Verdict]) -> str:
    """A table: per family, how many cases agree, diverge silently, are refused where the
    GPU runs, stop otherwise than the GPU, have nothing to be judged against (``unknown``:
    no GPU answer, and only a GPU can say), refusals without a reason, and how many were
    judged against the generator's expectation alone (``unmeasured``: no GPU answer)."""
    by: dict[str, Counter] = defaultdict(Counter)
    for v in verdicts:
        for fam in (v.family, "TOTAL"):
            by[fam][v.klass] += 1
            by[fam]["noreason"] += not v.reason
            by[fam]["unmeasured"] += v.gpu.startswith("expected")  # no GPU or nvcc answer
    cols = ("agree", "silent", "stricter", "other", "unknown", "noreason", "unmeasured")
    lines = [f"{'family':22}" + "".join(f"{c:>11}" for c in (*cols, "cases"))]
    for fam in sorted(by, key=lambda f: (f == "TOTAL", f)):
        row = by[fam]
        total = sum(row[c] for c in cols[:5])
        lines.append(f"{fam:22}" + "".join(f"{row[c]:>11}" for c in cols) + f"{total:>11}")
    return "\n".join(lines)


def regression_cases(cases: dict[str, Case], verdicts: list[Verdict],
                     gpu: dict[str, Outcome], emu: dict[str, Outcome]) -> list[dict]:
    """Each disagreement as a regression case: the (minimised) kernel, its inputs and launch,
    and the GPU's answer."""
    out = []
    for v in verdicts:
        if v.klass == "agree" or v.case not in gpu:
            continue
        c = cases[v.case]
        out.append({"case": c.to_json(), "gpu": gpu[v.case].to_json(),
                    "emulator_then": emu[v.case].to_json(with_outputs=False),
                    "verdict": v.to_json()})
    return out


def read_truth(path: Path) -> dict[str, dict]:
    """The GPU's outcomes by case: a gpu_outcomes.json, or the .jsonl a run cut short left
    (its first line the run's settings, then a line per case)."""
    if path.suffix == ".jsonl":
        out = {}
        for line in path.read_text().splitlines()[1:]:
            with contextlib.suppress(ValueError, KeyError):
                rec = json.loads(line)
                out[rec.pop("case")] = rec
        return out
    return json.loads(path.read_text())["cases"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("fidelity-out"))
    ap.add_argument("--count", type=int, default=3000,
                    help="cases (the later families are in those past generate.FIRST_ROUND)")
    ap.add_argument("--seed", type=int, default=generate.SEED)
    ap.add_argument("--families", default="", help="comma-separated families only")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--nvcc", action="store_true", help="build with the local nvcc too")
    ap.add_argument("--gpu", action="store_true", help="run on the GPU too (PyCUDA)")
    ap.add_argument("--arch", default="", help="nvcc's -arch (default: the GPU's, or sm_90)")
    ap.add_argument("--truth", type=Path, help="a gpu_outcomes.json of an earlier --gpu run")
    ap.add_argument("--minimize", action="store_true", help="minimise the disagreements")
    ap.add_argument("--minimize-seconds", type=float, default=45.0,
                    help="no minimising round begins after this many seconds")
    ap.add_argument("--no-emulator", action="store_true", help="the GPU side alone")
    ap.add_argument("--seconds", type=float, default=float("inf"),
                    help="no GPU module starts after this many seconds (the outcomes so far "
                         "are kept in gpu_outcomes.jsonl)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        worker(a.worker)
        return 0
    t0 = time.monotonic()
    a.out.mkdir(parents=True, exist_ok=True)
    fams = tuple(f for f in a.families.split(",") if f)
    cases = generate.corpus(a.count, a.seed, fams)
    by_id = {c.id: c for c in cases}
    modules = modules_of(cases)
    print(f"corpus: {len(cases)} cases of {len({c.family for c in cases})} families in "
          f"{len(modules)} modules (seed {a.seed})", flush=True)
    times: dict[str, float] = {}
    arch = a.arch or (gpu_arch() if a.gpu else "sm_90")
    gpu = nvcc = None
    built: dict[str, dict] = {}
    if a.gpu or a.nvcc:
        t = time.monotonic()
        built = build_all(modules, arch, a.jobs)
        times["nvcc"] = time.monotonic() - t
        nvcc = nvcc_outcomes(modules, built)
        print(f"nvcc ({arch}): {len(modules)} modules in {times['nvcc']:.1f} s; "
              f"{sum(o.status == 'refused' for o in nvcc.values())} cases refused", flush=True)
    emu: dict[str, Outcome] = {}
    with ThreadPoolExecutor(1) as side:
        # with a GPU, half the cores run the emulator; the rest drive GPU processes (each
        # mostly waits: on starting CUDA, on the launch, on a restart after a fault)
        emu_jobs = 0 if a.no_emulator else max(1, a.jobs // 2) if a.gpu else a.jobs
        emu_future = None if a.no_emulator else side.submit(run_emulator, modules, emu_jobs)
        if a.gpu:
            t = time.monotonic()
            lines = a.out / "gpu_outcomes.jsonl"
            lines.write_text(json.dumps({"arch": arch, "seed": a.seed, "count": a.count}) + "\n")

            def sink(got: dict[str, Outcome]) -> None:
                with open(lines, "a") as f:
                    for k, o in got.items():
                        f.write(json.dumps({"case": k, "digest": by_id[k].digest(),
                                            **o.to_json()}) + "\n")

            gpu = run_gpu(modules, built, max(1, a.jobs - emu_jobs), sink, t0 + a.seconds)
            times["gpu"] = time.monotonic() - t
            print(f"GPU: {len(gpu)} of {len(cases)} cases in {times['gpu']:.1f} s", flush=True)
            (a.out / "gpu_outcomes.json").write_text(json.dumps(
                {"arch": arch, "seed": a.seed, "count": a.count,
                 "cases": {k: {"digest": by_id[k].digest(), **o.to_json()}
                           for k, o in gpu.items()}}))
        if emu_future is not None:
            emu, times["emulator"] = emu_future.result()
    if a.truth:
        truth = read_truth(a.truth)
        gpu = {k: Outcome.from_json(v) for k, v in truth.items()
               if k in by_id and v.get("digest") == by_id[k].digest()}
        print(f"truth: {len(gpu)} of {len(cases)} cases measured on the GPU apply", flush=True)
    if emu:
        (a.out / "emu_outcomes.json").write_text(json.dumps(
            {k: {"digest": by_id[k].digest(), **o.to_json()} for k, o in emu.items()}))
    verdicts = judge(cases, emu, gpu, nvcc) if emu else []
    bad = [v for v in verdicts if v.klass != "agree" and v.klass != "unknown"]
    (a.out / "disagreements.json").write_text(json.dumps(
        [{**v.to_json(), "note": by_id[v.case].note, "expect": by_id[v.case].expect}
         for v in bad], indent=1))
    if a.minimize and gpu and bad:
        t = time.monotonic()
        small = ddmin_cases([by_id[v.case] for v in bad if v.case in gpu], gpu,
                            gpu_side=(lambda cs: run_gpu_cases(cs, arch, a.jobs))
                            if a.gpu else None, seconds=a.minimize_seconds)
        by_id.update({k: c for k, (c, _) in small.items()})
        gpu.update({k: g for k, (_, g) in small.items()})
        emu.update(emu_side([c for c, _ in small.values()]))
        bad = [verdict(by_id[v.case], emu[v.case], gpu[v.case]) if v.case in small else v
               for v in bad]
        times["minimize"] = time.monotonic() - t
    if gpu and bad:
        regs = regression_cases(by_id, bad, gpu, emu)
        (a.out / "regressions.json").write_text(json.dumps(regs, indent=1))
    times["total"] = time.monotonic() - t0
    print("times: " + ", ".join(f"{k} {v:.1f} s" for k, v in times.items()))
    print(tally(verdicts))
    return 0


def run_gpu_cases(cases: list[Case], arch: str, jobs: int) -> dict[str, Outcome]:
    """``cases`` built and run on the GPU (the minimiser's oracle)."""
    modules = modules_of(cases)
    return run_gpu(modules, build_all(modules, arch, jobs), jobs)


if __name__ == "__main__":
    sys.exit(main())
