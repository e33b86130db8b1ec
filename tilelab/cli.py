"""The ``tilelab`` command: list, check, grade, report, similarity, export, release,
calibrate, bench, backend."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import threading
from pathlib import Path

from tilelab import settings
from tilelab.catalog import exercises
from tilelab.device import backend as backends
from tilelab.device.backend import Backend
from tilelab.grading import gates

LESSON_HELP = ("on a GPU whose performance counters cannot be read (ncu missing, or counters "
               "restricted to administrators), grade anyway with every lesson not measured "
               "(no speed points for it); otherwise grading is refused, saying what to do")


def no_gpu(cmd: str, what: str, instead: str) -> int | None:
    """Where no GPU is usable: say so on one line (what needs it, why there is none, what to
    do instead) and return the exit status 2; None where a GPU is usable."""
    from tilelab.device import backend

    ok, why = backend.gpu_probe()
    if ok:
        return None
    print(f"tilelab {cmd}: {what} cannot run here: it needs a CUDA GPU and PyCUDA, and none "
          f"is usable ({why}). Run it on a machine with a GPU; {instead}", file=sys.stderr)
    return 2


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
            f"; without a GPU the speed is not measured; the emulator shows the worst "
            f"access line's average bank-conflict degree as feedback (a padded tile: <= "
            f"{e['max_bank_degree']})"
            if e["max_bank_degree"]
            else ""
        )
        if not e["speed_graded"]:
            print("    graded for correctness only (no speed gate)")
            continue
        print(f"    gate: >= {e['gate']}x over {e['baseline']} at {tuple(e['speed_shape'])}{deg}")
    return 0


def counters_ready(prog: str, backend: Backend | None, speed: bool,
                   lesson_without_counters: bool) -> bool:
    """Before grading on a GPU: whether the GPU's counters, which grade the lessons, can be
    read (or the instructor grades lessons as not measured); says what to do otherwise
    (``backend`` None: tasks grade elsewhere, each on its own)."""
    if lesson_without_counters:
        os.environ[settings.LESSON_WITHOUT_COUNTERS.name] = "1"
    if not speed or backend is not Backend.GPU:
        return True
    from tilelab.grading import counters  # (numpy: only where a GPU grades)

    try:
        counters.preflight()
    except counters.CountersUnavailable as exc:
        print(f"{prog}: refusing to grade: {exc} (--lesson-without-counters grades them as not "
              "measured)", file=sys.stderr)
        return False
    return True


#: a notebook kernel cell's Python around the CUDA source: ``KERNEL = r"""`` ... ``"""``
CELL_PYTHON = re.compile(rb'^\s*[A-Za-z_]\w*\s*=\s*[rRbBuU]{0,2}("""|\'\'\')'
                         rb'|("""|\'\'\')\s*$')


def cell_python(source: bytes) -> str | None:
    """Why a .cu file is a kernel cell copied whole (its first or last line is the cell's
    Python, not CUDA); None where it is not."""
    lines = [ln for ln in source.splitlines() if ln.strip()]
    if lines and (CELL_PYTHON.match(lines[0]) or CELL_PYTHON.search(lines[-1])):
        return ("this is the notebook cell's Python (NAME = r\"\"\" ... \"\"\"); save only "
                "the CUDA source between the triple quotes and check that file")
    return None


def cmd_check(a: argparse.Namespace) -> int:
    from tilelab.grading import scoring
    from tilelab.grading.sandbox import grade_source

    path = Path(a.file)
    if not path.is_file():
        print(f"tilelab check: no such file: {path}", file=sys.stderr)
        return 2
    if a.backend is Backend.GPU and (
        code := no_gpu("check", "--backend gpu",
                       "or check on the CPU emulator: --backend emu (correctness, races, bank "
                       "conflicts and traffic; no speed)")):
        return code
    if not counters_ready("tilelab check", a.backend, not a.no_speed, a.lesson_without_counters):
        return 2
    gate = gates.load(a.gates).get(a.exercise) if a.gates else None
    source = path.read_bytes()
    if why := cell_python(source):
        print(f"tilelab check: {path}: {why}", file=sys.stderr)
        return 2
    v = grade_source(
        a.exercise, source, backend_name=a.backend, speed=not a.no_speed, gate=gate
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
    from tilelab.classroom import summary as class_summary
    from tilelab.classroom.inline import inline
    from tilelab.classroom.run import NO_SANDBOX_WARNING
    from tilelab.isolation import bubblewrap

    if a.workers < 1:
        print(f"tilelab grade: --workers must be at least 1 (got {a.workers})", file=sys.stderr)
        return 2
    if a.dry_run:
        return dry_run(a)
    if a.no_sandbox:
        print(f"tilelab grade: WARNING: {NO_SANDBOX_WARNING}", file=sys.stderr)
    elif not a.scheduler:  # tasks run on this machine: it needs the sandbox
        why = bubblewrap.problem()
        if why:
            print(f"tilelab grade: refusing to grade a class without a sandbox: {why} "
                  "(--no-sandbox grades anyway, with the instructor's rights)", file=sys.stderr)
            return 2
    if not counters_ready("tilelab grade", a.backend, True, a.lesson_without_counters):
        return 2
    try:
        classroom.course.config_path(Path(a.course))
    except FileNotFoundError as exc:
        print(f"tilelab grade: {Path(a.course).resolve()} is not a course folder ({exc}); run "
              "it in the course repository, or name it with --course", file=sys.stderr)
        return 2
    backend = a.backend  # on a remote cluster, None: each worker's own unless one is named
    errors: tuple[type[Exception], ...] = ()
    on_gpu = backend is Backend.GPU
    if a.workers == 1 and not a.scheduler and (a.tasks_per_gpu == 1 or not on_gpu):
        run_tasks = inline
    else:
        from tilelab.cluster.run import on_dask
        from tilelab.cluster.start import ClusterError

        run_tasks, errors = on_dask(a.workers, a.scheduler, gpus=on_gpu
                                    and not a.scheduler, tasks_per_gpu=a.tasks_per_gpu), (
                                        ClusterError,)
    try:
        summary = classroom.grade_class(
            Path(a.course),
            assignments=a.assignment or None,
            students=a.student or None,
            backend=backend,
            award_speed_without_gpu=a.award_speed_without_gpu,
            progress=not a.quiet,
            gates=gates.load(a.gates) if a.gates else None,
            force=a.force,
            sandboxed=not a.no_sandbox,
            run_tasks=run_tasks,
            reason=a.reason,
        )
    except (*errors, ValueError) as exc:  # an unknown assignment or student: one line
        print(f"tilelab grade: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(summary, indent=1, default=str))
    else:
        print(class_summary.table(summary))
    return 0


def course_dir(cmd: str, folder: str):
    """nbgrader's course directory of ``--course``; None (said on one line) where it is none."""
    from tilelab.classroom import course

    try:
        return course.open_api(Path(folder)).coursedir
    except FileNotFoundError as exc:
        print(f"tilelab {cmd}: {Path(folder).resolve()} is not a course folder ({exc}); run "
              "it in the course repository, or name it with --course", file=sys.stderr)
        return None


def dry_run(a: argparse.Namespace) -> int:
    """``tilelab grade --dry-run``: the verdicts the gates and registry now would flip."""
    from tilelab.classroom import dryrun
    from tilelab.classroom.run import read_submission

    cd = course_dir("grade", a.course)
    if cd is None:
        return 2
    unknown = sorted(set(a.assignment or ()) - set(exercises.ASSIGNMENTS))
    if unknown:
        print(f"tilelab grade: unknown assignment(s) {unknown}; the assignments are "
              f"{', '.join(exercises.ASSIGNMENTS)}", file=sys.stderr)
        return 2
    submitted = Path(cd.format_path(cd.submitted_directory, ".", ".")).resolve()
    digests = {(f.parent.name, f.name): read_submission(cd, f.parent.name, f.name).digest
               for f in sorted(submitted.glob("*/*")) if f.name in exercises.ASSIGNMENTS}
    found = dryrun.flips(cd, gates.load(a.gates) if a.gates else None,
                         a.award_speed_without_gpu, a.assignment, a.student, digests)
    print(json.dumps(found, indent=1) if a.json else dryrun.text(found))
    return 0


def cmd_report(a: argparse.Namespace) -> int:
    from tilelab.classroom import report

    cd = course_dir("report", a.course)
    if cd is None:
        return 2
    doc = report.build(cd, a.assignment)
    if a.html:
        Path(a.html).write_text(report.page(doc), encoding="utf-8")
    print(json.dumps(doc, indent=1) if a.json else report.text(doc))
    if a.html:
        print(f"page written to {a.html}", file=sys.stderr)
    return 0


def cmd_similarity(a: argparse.Namespace) -> int:
    from tilelab.classroom import similarity

    cd = course_dir("similarity", a.course)
    if cd is None:
        return 2
    a.threshold = similarity.THRESHOLD if a.threshold is None else a.threshold
    if not 0 < a.threshold <= 1:
        print(f"tilelab similarity: --threshold is a share, over 0 and at most 1 (got "
              f"{a.threshold})", file=sys.stderr)
        return 2
    found = similarity.find(cd, a.assignment, a.threshold)
    if a.html:
        Path(a.html).write_text(similarity.page(found), encoding="utf-8")
    print(json.dumps(found, indent=1) if a.json else similarity.text(found, quote=not a.brief))
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    from tilelab.classroom import export

    cd = course_dir("export", a.course)
    if cd is None:
        return 2
    if a.format == "canvas":
        print(f"wrote {export.canvas(cd, Path(a.out))}")
    else:
        written = export.gradescope(cd, Path(a.out), a.assignment)
        print(f"wrote {len(written)} results.json under {a.out}")
    return 0


def cmd_release(a: argparse.Namespace) -> int:
    from tilelab import classroom, picture
    from tilelab.grading.emu_steps import reference_trace

    for name in a.assignment or exercises.ASSIGNMENTS:
        folder = Path(a.course) / "solutions" / name
        for path in picture.write_reference_pictures(folder, exercises.ASSIGNMENTS[name],
                                                     reference_trace):
            print(f"drew {path}")
    for path in classroom.release(a.course, a.assignment):
        print(f"released {path}")
    return 0


def cmd_calibrate(a: argparse.Namespace) -> int:
    from tilelab.experiments.calibration import calibrate, table, write_data

    if code := no_gpu("calibrate", "calibrating the speed gates (it times kernels)",
                      "without one, grade with the default gates (no --gates)."):
        return code
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
        cpu = [n for n in experiments.EXPERIMENTS if not experiments.needs_gpu(n)]
        if gpu and (code := no_gpu(  # before anything runs: one line, no traceback
                "bench", "the GPU experiments "
                + ", ".join(n for n in names if experiments.needs_gpu(n)),
                "these run without one: " + (", ".join(cpu) or "none") + ".")):
            return code
        rt = get_runtime("gpu") if gpu else None  # a missing GPU: BackendError, one line
        for path in runner.run(names, Path(a.out), rt):
            print(f"wrote {path}")
    except (KeyError, RuntimeError, FileNotFoundError) as exc:
        print(f"tilelab bench: {exc.args[0] if exc.args else exc}", file=sys.stderr)
        return 2
    return 0


def cmd_backend(a: argparse.Namespace) -> int:
    from tilelab.device.runtime import get_runtime

    print(get_runtime(backends.resolve()).describe())
    return 0


def course_options(s: argparse.ArgumentParser, page: str) -> None:
    """The options of a command that reads a course's recorded grades: which course and
    assignments, JSON, and the static page it can write (``page``: what the page holds)."""
    s.add_argument("--course", default=".", help="the course repository (default: here)")
    s.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--html", metavar="FILE", help=page)


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
    s.add_argument("--lesson-without-counters", action="store_true", help=LESSON_HELP)
    s.set_defaults(func=cmd_check)
    s = sub.add_parser("grade", help="autograde a class with nbgrader, then feedback and CSV")
    s.add_argument("--course", default=".", help="the course repository (default: here)")
    s.add_argument("--assignment", action="append", help="only this assignment (repeatable)")
    s.add_argument("--student", action="append",
                   help="only this student (repeatable): their submissions that changed, "
                   "all of them with --force")
    s.add_argument("--backend", choices=("gpu", "emu"))
    s.add_argument("--reason", help="why this run grades again: written, with who and "
                   "when, beside each grade it changes in autograder/regrades.jsonl")
    s.add_argument(
        "--award-speed-without-gpu",
        action="store_true",
        help="without a GPU, give speed points anyway (they were not measured)",
    )
    s.add_argument("--gates", help="gates file written by `tilelab calibrate`")
    s.add_argument("--lesson-without-counters", action="store_true", help=LESSON_HELP)
    s.add_argument("--quiet", action="store_true", help="no progress bar")
    s.add_argument(
        "--workers",
        type=int,
        default=1,
        help="grade on a local Dask cluster of N workers (one per GPU on a GPU machine, "
        "emulator workers without one); 1 (default): one submission after another, no Dask",
    )
    s.add_argument(
        "--tasks-per-gpu",
        type=int,
        default=1,
        metavar="N",
        help="on a GPU machine, grade N submissions at once on each GPU (their compiles, "
        "correctness launches, sanitizer runs and nbgrader steps overlap; each round of "
        "timed launches has the GPU alone, and the notebooks run without it; the "
        "instructors' page gives the measured rate of each N)",
    )
    s.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="grade on the running Dask cluster of this scheduler (workers with --nthreads 1)",
    )
    s.add_argument(
        "--force",
        action="store_true",
        help="regrade submissions already graded from the same files and inputs",
    )
    s.add_argument("--json", action="store_true",
                   help="print the whole summary as JSON instead of the short table")
    s.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox (submissions run with your rights: only "
        "for code you trust)",
    )
    s.add_argument("--dry-run", action="store_true",
                   help="grade nothing, write nothing: list every recorded verdict the gates "
                   "(--gates) and the registry now would change, and the submissions that "
                   "would be graded again")
    s.set_defaults(func=cmd_grade)
    s = sub.add_parser("report", help="per exercise: submitted, correct, speed, and the "
                       "share of each diagnosed cause, from the recorded verdicts")
    course_options(s, "also write a static page with a plot")
    s.set_defaults(func=cmd_report)
    s = sub.add_parser("similarity", help="pairs of learners whose kernels are unusually "
                       "alike (advisory, never a grade)")
    course_options(s, "also write a static side-by-side page")
    s.add_argument("--threshold", type=float,
                   help="of either kernel, the share of its own fingerprints (beyond the "
                   "boilerplate) the other holds (default 0.6)")
    s.add_argument("--brief", action="store_true", help="pairs only, no matched lines")
    s.set_defaults(func=cmd_similarity)
    s = sub.add_parser("export", help="the grades for an LMS: Canvas's import CSV, or "
                       "Gradescope's results.json per submission")
    s.add_argument("format", choices=("canvas", "gradescope"))
    s.add_argument("--out", required=True, help="canvas: the CSV file; gradescope: a folder")
    s.add_argument("--course", default=".", help="the course repository (default: here)")
    s.add_argument("--assignment", action="append", help="gradescope: only this assignment")
    s.set_defaults(func=cmd_export)
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


def chosen_backend(a: argparse.Namespace) -> Backend | None:
    """The backend a command runs on, decided here once and passed down: the one named,
    else this machine's; None for a class graded on a remote cluster with none named (each
    worker's own)."""
    if a.backend is None and getattr(a, "scheduler", None):
        return None
    return backends.resolve(a.backend)


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    # told to stop (a terminal closed, a job killed), the command unwinds: its sandboxes
    # are killed and its temporary folders removed on the way out
    before = {s: signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGHUP)
              if threading.current_thread() is threading.main_thread()
              and signal.getsignal(s) == signal.SIG_DFL}
    try:
        if hasattr(a, "backend"):
            a.backend = chosen_backend(a)
        code = a.func(a)
        sys.stdout.flush()  # here, where a reader that has gone is caught
        return code
    except (gates.GatesError, settings.SettingsError, backends.BackendError) as exc:
        print(f"tilelab {a.cmd}: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `tilelab list | head`: the reader has gone; nothing to say
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # Python's last flush finds nowhere to fail
        return 1
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
