"""The ``tilelab`` command: list, check, grade, release, calibrate, bench, backend."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.grading import gates


def cmd_list(a: argparse.Namespace) -> int:
    data = [e.to_dict() for e in exercises.EXERCISES.values()]
    if a.json:
        print(json.dumps(data, indent=1))
        return 0
    for e in data:
        print(f"{e['id']}  [{e['assignment']}]  {e['title']}")
        print(f"    {e['signature']}")
        print(f"    launch: {e['launch']}")
        deg = (
            f"; on the emulator: the worst access line's average bank-conflict degree <= "
            f"{e['max_bank_degree']}"
            if e["max_bank_degree"]
            else ""
        )
        if not e["speed_graded"]:
            print("    graded for correctness only (no speed gate)")
            continue
        print(f"    gate: >= {e['gate']}x over {e['baseline']} at {tuple(e['speed_shape'])}{deg}")
    return 0


def cmd_check(a: argparse.Namespace) -> int:
    from tilelab.grading import scoring
    from tilelab.grading.sandbox import grade_source

    path = Path(a.file)
    if not path.is_file():
        print(f"tilelab check: no such file: {path}", file=sys.stderr)
        return 2
    gate = gates.load(a.gates).get(a.exercise) if a.gates else None
    v = grade_source(
        a.exercise, path.read_bytes(), backend_name=a.backend, speed=not a.no_speed, gate=gate
    )
    if a.json:
        d = v.to_dict()
        print(
            json.dumps(
                {
                    k: d[k]
                    for k in (
                        "exercise",
                        "passed",
                        "correct",
                        "speedup",
                        "gate",
                        "backend",
                        "gpu",
                        "messages",
                        "traffic",
                    )
                }
                | {"verdict": d},
                indent=1,
            )
        )
    else:
        print(scoring.report(v))
    return 0 if v.correct else 1


def cmd_grade(a: argparse.Namespace) -> int:
    from tilelab import classroom
    from tilelab.classroom.run import NO_SANDBOX_WARNING
    from tilelab.grading import bubblewrap

    if a.no_sandbox:
        print(f"tilelab grade: WARNING: {NO_SANDBOX_WARNING}", file=sys.stderr)
    else:
        why = bubblewrap.problem()
        if why:
            print(f"tilelab grade: refusing to grade a class without a sandbox: {why} "
                  "(--no-sandbox grades anyway, with the instructor's rights)", file=sys.stderr)
            return 2
    common = {
        "assignments": a.assignment or None,
        "students": a.student or None,
        "backend": a.backend,
        "award_speed_without_gpu": a.award_speed_without_gpu,
        "progress": not a.quiet,
        "gates": gates.load(a.gates) if a.gates else None,
        "sandboxed": not a.no_sandbox,
    }
    if a.workers < 1:
        print(f"tilelab grade: --workers must be at least 1 (got {a.workers})", file=sys.stderr)
        return 2
    from tilelab.cluster.start import ClusterError

    try:
        summary = classroom.grade_class(
            Path(a.course), workers=a.workers, scheduler=a.scheduler, force=a.force, **common
        )
    except ClusterError as exc:
        print(f"tilelab grade: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=1, default=str))
    return 0


def cmd_release(a: argparse.Namespace) -> int:
    from tilelab import classroom, picture

    for name in a.assignment or exercises.ASSIGNMENTS:
        folder = Path(a.course) / "solutions" / name
        for path in picture.write_reference_pictures(folder, exercises.ASSIGNMENTS[name]):
            print(f"drew {path}")
    for path in classroom.release(a.course, a.assignment):
        print(f"released {path}")
    return 0


def cmd_calibrate(a: argparse.Namespace) -> int:
    from tilelab.experiments.calibration import calibrate, table, write_data

    doc = calibrate()
    data = write_data(doc, Path(a.out))
    print(table(doc))
    print(f"variants and margins written to {data}")
    if doc["refused"]:
        for why in doc["refused"]:
            print(f"tilelab calibrate: {why}", file=sys.stderr)
        print(f"no gates file written ({a.write}): grading keeps the default gates",
              file=sys.stderr)
        return 1
    Path(a.write).parent.mkdir(parents=True, exist_ok=True)
    Path(a.write).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"gates written to {a.write}; grade with --gates {a.write}")
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from tilelab import experiments
    from tilelab.device.runtime import get_runtime
    from tilelab.experiments import runner

    names = a.experiments or list(experiments.EXPERIMENTS)
    try:
        experiments.check_names(names)
        gpu = any(experiments.needs_gpu(n) for n in names)
        rt = get_runtime("gpu") if gpu else None  # a missing GPU: BackendError, one line
        for path in runner.run(names, Path(a.out), rt):
            print(f"wrote {path}")
    except (KeyError, RuntimeError, FileNotFoundError) as exc:
        print(f"tilelab bench: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    return 0


def cmd_backend(a: argparse.Namespace) -> int:
    from tilelab.device.runtime import get_runtime

    print(get_runtime().describe())
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tilelab", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("list", help="the exercises: ids, kernels, signatures, launch, gates")
    s.add_argument("--json", action="store_true")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("check", help="grade one .cu file against an exercise")
    s.add_argument("exercise", choices=sorted(exercises.EXERCISES))
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.add_argument("--backend", choices=("gpu", "emu"))
    s.add_argument("--no-speed", action="store_true", help="skip the speed gate")
    s.add_argument("--gates", help="gates file written by `tilelab calibrate`")
    s.set_defaults(func=cmd_check)
    s = sub.add_parser("grade", help="autograde a class with nbgrader, then feedback and CSV")
    s.add_argument("--course", default=".", help="the course repository (default: here)")
    s.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    s.add_argument("--student", action="append", help="only this student (repeatable)")
    s.add_argument("--backend", choices=("gpu", "emu"))
    s.add_argument(
        "--award-speed-without-gpu",
        action="store_true",
        help="without a GPU, give speed points anyway (they were not measured)",
    )
    s.add_argument("--gates", help="gates file written by `tilelab calibrate`")
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="grade on a local Dask cluster of N workers (one per GPU on a GPU machine, "
        "emulator workers without one); 1 (default): one submission after another, no Dask",
    )
    s.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="grade on the running Dask cluster of this scheduler (workers with --nthreads 1)",
    )
    s.add_argument(
        "--force",
        action="store_true",
        help="on a cluster, regrade submissions already graded from the same files and inputs",
    )
    s.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox (submissions run with your rights: only "
        "for code you trust)",
    )
    s.set_defaults(func=cmd_grade)
    s = sub.add_parser("release", help="regenerate exercises/ from solutions/ (nbgrader)")
    s.add_argument("--course", default=".", help="the course repository (default: here)")
    s.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    s.set_defaults(func=cmd_release)
    s = sub.add_parser("calibrate", help="time every exercise's variants here and place the "
                       "gates between the slowest correct one and the fastest lesson-skipping one")
    s.add_argument("--write", default="autograder/gates.json", help="the gates file to write")
    s.add_argument("--out", default="book/data", help="where calibration.json goes")
    s.set_defaults(func=cmd_calibrate)
    s = sub.add_parser("bench", help="measure on a GPU and write the book's data files")
    s.add_argument("experiments", nargs="*", help="default: all")
    s.add_argument("--out", default="book/data")
    s.set_defaults(func=cmd_bench)
    s = sub.add_parser("backend", help="say where kernels run here")
    s.set_defaults(func=cmd_backend)
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    try:
        return a.func(a)
    except (gates.GatesError, settings.SettingsError) as exc:
        print(f"tilelab {a.cmd}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
