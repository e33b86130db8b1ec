"""The class run end to end, in this process: nbgrader autograde, clean re-grade,
feedback, the CSVs, the summary, resume.

A temporary course (the committed nbgrader config, solutions and exercises) gets a
class of sample submissions built from the released notebooks by substituting kernel
cells with ``tests/fixtures/submissions/*.cu`` (``tests/support/classroom.py``);
``grade_class`` grades it once (one
module fixture every reading test shares) and every student's points per hidden test are
checked in the gradebook, the CSVs and the feedback. A run killed mid-way and run again
grades only what is missing or changed. The same driver on a Dask cluster:
``tests/test_class_cluster.py``.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from support.classroom import (
    CLASS,
    EMU,
    GPU,
    MESSAGES,
    REPO,
    SANDBOXED,
    build_course,
    copy_course,
    expected_points,
    kernel_cell,
    points_in_gradebook,
    released_stub,
    small_class,
    solution_kernel,
    submission,
)

from tilelab import classroom
from tilelab.catalog import exercises
from tilelab.classroom import course, kernel_csv, resume, submissions, task
from tilelab.classroom.progress import Progress
from tilelab.classroom.run import read_submission
from tilelab.classroom.summary import table as summary_table

pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")  # in nbgrader

def verdicts(root: Path) -> dict[tuple[str, str], dict]:
    """(student, assignment) -> the points and each kernel's outcome in its verdict file
    (messages name elements of fresh random inputs, so only their count is compared)."""
    out = {}
    for path in sorted((root / "autograder" / "feedback").glob("*/*/tilelab_verdict.json")):
        doc = json.loads(path.read_text())
        out[(doc["student"], doc["assignment"])] = {
            "points": doc["points"],
            "outcome": {
                v["exercise"]: (v["correct"], v["speed_passed"], len(v["messages"]))
                for v in doc["verdicts"]
            },
        }
    return out


def run_class(tmp: Path, backend: str) -> tuple[Path, dict]:
    root = tmp / "course"
    build_course(root)
    summary = classroom.grade_class(root, backend=backend, progress=False,
                                    sandboxed=SANDBOXED)
    return root, summary


@pytest.fixture(scope="module")
def graded_emu(tmp_path_factory):
    return run_class(tmp_path_factory.mktemp("class-emu"), "emu")


@pytest.mark.slow
def test_each_student_gets_the_points_of_each_hidden_test(graded_emu):
    root, summary = graded_emu
    assert summary["failures"] == [], summary["failures"]
    assert summary["backend"] == "emu" and not summary["speed_measured"]
    assert points_in_gradebook(root) == expected_points(EMU)


@pytest.mark.slow
def test_the_csv_export_holds_each_assignment_score(graded_emu):
    _, summary = graded_emu
    with open(summary["csv"], encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    got = {(r["student_id"], r["assignment"]): float(r["score"]) for r in rows}
    for student, per in expected_points(EMU).items():
        for a in exercises.ASSIGNMENTS:
            want = sum(sum(per[e]) for e in exercises.ASSIGNMENTS[a] if e in per)
            assert got[(student, a)] == want, (student, a)


@pytest.mark.slow
def test_feedback_and_verdict_files_say_what_went_wrong(graded_emu):
    root, _ = graded_emu
    for (student, exercise_id), text in MESSAGES.items():
        a = exercises.get(exercise_id).assignment
        folder = root / "autograder" / "feedback" / student / a
        assert (folder / f"{classroom.notebook_id(a)}.html").is_file()
        report = (folder / "tilelab_verdict.txt").read_text()
        assert "CPU emulator" in report and "not awarded" in report
        doc = json.loads((folder / "tilelab_verdict.json").read_text())
        verdict = next(v for v in doc["verdicts"] if v["exercise"] == exercise_id)
        assert text in "\n".join(verdict["messages"]), (student, verdict["messages"])


@pytest.mark.slow
def test_a_patched_grader_in_the_notebook_earns_nothing(graded_emu):
    root, _ = graded_emu
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    with Gradebook(db, "tilelab") as gb:
        grade = gb.find_grade("test_naive_correct", "naive", "01-naive", "mallory")
        # the notebook's own (patched) test passed, but the clean re-grade decides, and no
        # score of the notebook's making stays beneath it (a manual score cleared in
        # formgrader falls back to the automatic one)
        assert grade.score == grade.manual_score == grade.auto_score == 0


@pytest.fixture(scope="module")
def graded_award(tmp_path_factory):
    """alice's first assignment (a correctness-only step and a speed-graded one) in a class
    run without a GPU, speed points awarded by the instructor."""
    root = tmp_path_factory.mktemp("award") / "course"
    build_course(root)
    summary = classroom.grade_class(
        root, assignments=["01-naive"], students=["alice"], backend="emu",
        award_speed_without_gpu=True, progress=False, sandboxed=SANDBOXED,
    )
    return root, summary


@pytest.mark.slow
def test_award_speed_without_gpu_when_asked(graded_award):
    root, summary = graded_award
    assert summary["failures"] == [] and summary["graded"] == 1
    steps = [exercises.get(e) for e in exercises.ASSIGNMENTS["01-naive"]]
    assert {e.speed_graded for e in steps} == {True, False}  # both kinds of step
    assert points_in_gradebook(root)["alice"] == {
        e.id: (e.points_correct, e.points_speed) for e in steps}


@pytest.mark.slow
def test_awarded_speed_points_and_their_feedback_agree(graded_award):
    """The gradebook's speed points, the comment beside them and the verdict file say the
    same thing (the comment once said "not measured (0/2 points)" beside 2 points)."""
    root, _ = graded_award
    db = f"sqlite:///{root / 'autograder' / 'gradebook.db'}"
    with Gradebook(db, "tilelab") as gb:
        grade = gb.find_grade("test_naive_speed", "naive", "01-naive", "alice")
        comment = gb.find_comment("kernel_naive", "naive", "01-naive", "alice")
        assert grade.score == 2
        assert "awarded by the instructor's policy" in comment.comment
        assert "(2/2 points)" in comment.comment
        assert "(0/2 points)" not in comment.comment
    text = (root / "autograder" / "feedback" / "alice" / "01-naive" / "tilelab_verdict.txt")
    assert "awarded by the instructor's policy" in text.read_text()


@pytest.mark.gpu
@pytest.mark.slow
def test_speed_gates_on_a_gpu(tmp_path):
    root, summary = run_class(tmp_path, "gpu")
    assert summary["failures"] == [], summary["failures"]
    assert summary["speed_measured"] and summary["gpu"]
    assert points_in_gradebook(root) == expected_points(GPU)


@pytest.mark.slow
def test_hidden_tests_show_the_clean_verdict_without_grading_twice(graded_emu):
    root, _ = graded_emu
    nb = root / "autograder" / "autograded" / "alice" / "02-tiled" / "tiled.ipynb"
    outputs = "".join(
        "".join(o.get("text", ""))
        for c in json.loads(nb.read_text())["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_tiled_correct"
        for o in c.get("outputs", [])
    )
    assert "correctness: PASS" in outputs
    assert "graded once, by the class grader's clean process" in outputs


@pytest.mark.slow
def test_every_submission_has_nbgrader_feedback_and_its_autograded_notebook(graded_emu):
    root, summary = graded_emu
    assert summary["graded"] == len(summary["submissions"]) == len(verdicts(root))
    for student in CLASS:
        for a in {exercises.get(e).assignment for e in CLASS[student]}:
            nb = classroom.notebook_id(a)
            assert (root / "autograder" / "feedback" / student / a / f"{nb}.html").is_file()
            assert (root / "autograder" / "autograded" / student / a / f"{nb}.ipynb").is_file()


@pytest.mark.slow
def test_the_summary_times_each_task_and_ends_in_a_short_table(graded_emu):
    _, summary = graded_emu
    assert summary["executor"] == "this process" and summary["workers"] == 1
    assert summary["up_to_date"] == 0
    timings = summary["timings"]
    assert len(timings) == summary["graded"] and all(t["seconds"] > 0 for t in timings)
    assert len({t["worker"] for t in timings}) == 1  # one process, one task after another
    ordered = sorted(timings, key=lambda t: t["started"])
    assert all(a["started"] + a["seconds"] <= b["started"] + 0.01
               for a, b in itertools.pairwise(ordered))
    assert summary["timing"]["tasks"] == summary["graded"]
    assert summary["wall_seconds"] >= sum(t["seconds"] for t in timings) - 0.1
    table = summary_table(summary)
    score = sum(sum(map(sum, p.values())) for p in expected_points(EMU).values())
    assert f"{summary['graded']} submission(s) of {len(EMU)} student(s)" in table
    assert f"points    this run: {score:g} of " in table and "failures  0" in table
    assert summary["csv"] in table and summary["kernels_csv"] in table


@pytest.mark.slow
def test_the_kernel_csv_gives_each_kernels_points_and_why_any_were_lost(graded_emu):
    root, summary = graded_emu
    assert summary["kernels_csv"] == str(root / "autograder" / kernel_csv.FILE)
    with open(summary["kernels_csv"], encoding="utf-8") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    want = expected_points(EMU)
    assert set(rows) == {(s, e) for s, per in want.items() for e in per}
    for (student, exercise_id), row in rows.items():
        got = (float(row["points_correct"]), float(row["points_speed"]))
        assert got == want[student][exercise_id], (student, exercise_id)
        ex = exercises.get(exercise_id)
        assert (float(row["max_correct"]), float(row["max_speed"])) == (
            ex.points_correct, ex.points_speed)
        assert row["submitted_at"] == "" and row["submitted_at_from"] == kernel_csv.NO_TIMESTAMP
        assert (row["lost"] == "") == (sum(got) == ex.points_correct + ex.points_speed)
    assert rows[("alice", "naive")]["lost"] == (
        "not measured: needs a GPU (the speed test runs on the grading GPU)")
    assert rows[("bob", "naive")]["lost"].startswith("wrong at ")
    assert "does not compile" in rows[("frank", "naive")]["lost"]
    # the emulator's bank degree is feedback: an unpadded tile loses only the speed test
    assert rows[("grace", "transpose_padded")]["lost"].startswith("not measured: needs a GPU")


def interrupt_after(root: Path, verdict_files: int, *args: str) -> None:
    """``tilelab grade`` in this process's executor, killed (with everything it started)
    once ``verdict_files`` submissions are recorded."""
    feedback = root / "autograder" / "feedback"
    proc = subprocess.Popen(
        [sys.executable, "-m", "tilelab.cli", "grade", "--course", str(root), "--backend",
         "emu", *args], cwd=root, env={**os.environ, "PYTHONPATH": str(REPO), "CI": "1"},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )
    deadline = time.monotonic() + 400
    while len(list(feedback.glob("*/*/tilelab_verdict.json"))) < verdict_files:
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)  # the run and every process it started, mid-run
    proc.wait()


@pytest.mark.slow
def test_an_interrupted_run_grades_only_what_is_missing_or_changed(tmp_path):
    root = tmp_path / "course"
    small_class(root, ["alice", "bob"])  # two learners (each grade takes seconds), one process
    interrupt_after(root, 1, *([] if SANDBOXED else ["--no-sandbox"]))
    done = len(list((root / "autograder" / "feedback").glob("*/*/tilelab_verdict.json")))
    total = 2
    assert 1 <= done < total

    def again(**kw):
        return classroom.grade_class(root, backend="emu", progress=False, sandboxed=SANDBOXED,
                                     **kw)

    rest = again()
    assert rest["graded"] == total - done and rest["up_to_date"] == done
    assert rest["failures"] == []
    want = expected_points(EMU)
    got = points_in_gradebook(root)
    assert {s: p["naive"] for s, p in got.items()} == {s: want[s]["naive"] for s in got}

    # nothing changed: nothing graded (the command line's table says so)
    cli = subprocess.run(
        [sys.executable, "-m", "tilelab.cli", "grade", "--course", str(root), "--backend",
         "emu", "--quiet", *([] if SANDBOXED else ["--no-sandbox"])],
        cwd=root, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300, check=False,
    )
    assert cli.returncode == 0, cli.stderr
    assert "graded    this run: 0 submission(s) of 0 student(s)" in cli.stdout
    assert f"{total} up to date, not graded again" in cli.stdout
    # bob fixes his kernel: only his submission is graded again
    cell = kernel_cell(released_stub("naive"), solution_kernel("naive"))
    nb = root / "autograder" / "submitted" / "bob" / "01-naive" / "naive.ipynb"
    nb.write_text(json.dumps(submission("01-naive", {"naive": cell})))
    fixed = again()
    assert fixed["graded"] == 1 and fixed["submissions"][0]["student"] == "bob"
    assert points_in_gradebook(root)["bob"]["naive"] == (3, 0)
    # --student narrows the run to that student's changed work; with --force, all of it
    assert again(students=["alice"])["graded"] == 0
    one = again(students=["alice"], force=True)
    assert [s["student"] for s in one["submissions"]] == ["alice"]
    # --force regrades everything; a changed grading input (a gate) makes everything stale
    assert again(force=True)["graded"] == total
    stale = again(gates={"naive": 9.0})
    assert stale["graded"] == total and stale["up_to_date"] == 0


def test_points_the_source_notebook_and_the_registry_disagree_on_are_named(tmp_path):
    """An instructor who edits a hidden test's points in the solutions' notebook only
    would see one total in grades.csv and another in the verdicts: the run says which."""
    edited = tmp_path / "edited"
    copy_course(edited)
    path = edited / "solutions" / "01-naive" / "naive.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "test_naive_correct":
            cell["metadata"]["nbgrader"]["points"] = 5
    path.write_text(json.dumps(nb), encoding="utf-8")
    api = course.open_api(edited)
    course.ensure_in_gradebook(api, "01-naive")
    said = course.points_disagreements(api.coursedir, "01-naive")  # that cell only
    want = exercises.get("naive").points_correct
    assert said == [f"test_naive_correct is worth 5 points in the source notebook and "
                    f"{want:g} in the course's registry: grades.csv totals the notebook's, "
                    "the verdicts and this summary the registry's; make them agree"]


def test_a_class_runs_template_gradebook_is_released_once_per_process(tmp_path):
    """nbgrader's release of an assignment, which the template gradebook every task starts
    from records, takes seconds: made once per process for the same course files and
    assignments, made again when a file or the assignments change."""
    root = tmp_path / "course"
    copy_course(root)
    files = task.course_files(course.open_api(root, None))
    first = task.template_gradebook(files, ["01-naive"])
    assert task.template_gradebook(dict(files), ["01-naive"]) is first
    config = next(name for name in files if name.endswith("nbgrader_config.py"))
    changed = task.template_gradebook({**files, config: files[config] + b"\n# edited\n"},
                                      ["01-naive"])
    assert changed is not first
    db = tmp_path / "template.db"
    db.write_bytes(changed)
    with Gradebook(f"sqlite:///{db}") as gb:  # what the tasks start from
        assert [nb.name for nb in gb.find_assignment("01-naive").notebooks] == ["naive"]


def test_a_speed_the_grader_could_not_measure_is_graded_again_on_the_next_run():
    """A kernel whose speed run the grader could not finish (the GPU stayed busy, its CPU
    held up the timed rounds) is the grader's fault: its summary line says so, and the
    task's result is then a retry (its verdict file is not marked up to date)."""
    from tilelab.classroom.steps import Submission, summary_line
    from tilelab.grading.verdict import Verdict

    sub = Submission("02-tiled", "ann")
    v = Verdict.for_exercise(exercises.get("tiled"), "gpu", "G")
    sub.verdicts = [v]
    assert summary_line(sub)["regrade"] == []
    v.regrade = "the GPU stayed busy with other grading tasks for more than 600 s"
    assert summary_line(sub)["regrade"] == [v.regrade]
    assert Verdict.from_dict(v.to_dict()).regrade == v.regrade  # through the worker's JSON


def test_a_rerun_is_up_to_date_only_with_the_same_files_inputs_and_gradebook():
    files = {"solutions/01-naive/naive.ipynb": b"{}", "autograder/nbgrader_config.py": b"c"}
    inputs = resume.inputs_digest(files, {"backend": "emu", "gates": {"naive": 1.2}})
    assert inputs != resume.inputs_digest(files, {"backend": "emu", "gates": {"naive": 1.3}})
    assert inputs != resume.inputs_digest({**files, "solutions/01-naive/naive.ipynb": b"[]"},
                                          {"backend": "emu", "gates": {"naive": 1.2}})
    sub = resume.digest_files({"naive.ipynb": b"mine"})
    points = {"naive": {"correct": 3.0, "speed": 0.0}}
    doc = {"submission_sha256": sub, "inputs_sha256": inputs, "points": points}
    assert resume.up_to_date(doc, sub, inputs, points)
    assert not resume.up_to_date(doc, resume.digest_files({"naive.ipynb": b"new"}), inputs, points)
    assert not resume.up_to_date(doc, sub, "other", points)
    assert not resume.up_to_date(doc, sub, inputs, None)  # not in the gradebook
    assert not resume.up_to_date(doc, sub, inputs, {"naive": {"correct": 0.0, "speed": 0.0}})
    assert not resume.up_to_date(None, sub, inputs, points)


def test_progress_in_a_log_is_plain_lines_with_count_rate_and_time_left():
    out = io.StringIO()
    bar = Progress(3, stream=out, skipped=2)
    bar.step("01-naive alice", 4.2)
    bar.step("01-naive bob", 5.0)
    bar.close()
    lines = out.getvalue().splitlines()
    assert lines[0] == "tilelab grade: grading 3 submission(s) (2 up to date, not graded again)"
    assert lines[1].startswith("tilelab grade: [1/3] 01-naive alice: 4.2 s; ")
    assert "submissions/min" in lines[2] and "left" in lines[2]
    assert lines[-1].startswith("tilelab grade: 2/3 recorded in ")
    assert "\r" not in out.getvalue()


def test_a_submission_holding_a_link_sends_a_task_no_file_only_the_links_names(tmp_path):
    cd = CourseDirectory(root=str(tmp_path))
    folder = tmp_path / "submitted" / "mallory" / "01-naive"
    folder.mkdir(parents=True)
    (folder / "naive.ipynb").write_text("{}")
    secret = tmp_path / "autograder"
    secret.mkdir()
    (secret / "gradebook.db").write_text("every grade")
    plain = read_submission(cd, "mallory", "01-naive")
    assert plain.files == {"naive.ipynb": b"{}"} and plain.unsafe == []
    (folder / "course").symlink_to(secret, target_is_directory=True)
    sub = read_submission(cd, "mallory", "01-naive")
    assert sub.files == {} and sub.unsafe == ["course (a symbolic link)"]
    assert sub.digest != plain.digest  # a rerun sees the change
    # a link to a folder is never followed by any reader of the class run's files
    assert resume.read_tree(folder) == {"naive.ipynb": b"{}"}
    (folder / "course").unlink()  # a hard link is a plain file to every reader: refused too
    os.link(secret / "gradebook.db", folder / "grades.txt")
    sub = read_submission(cd, "mallory", "01-naive")
    assert sub.files == {} and sub.unsafe == [
        "grades.txt (a hard link: the file has another name on this disk)"]


def test_a_file_name_that_is_not_utf8_refuses_its_submission_only(tmp_path):
    """One file named with bytes that are not UTF-8 (any Linux file system and a zip or tar
    upload allow it) once stopped the whole class run before anyone was graded: it refuses
    that submission, naming the file and what to do, and reads nothing of it."""
    cd = CourseDirectory(root=str(tmp_path))
    folder = tmp_path / "submitted" / "mallory" / "01-naive"
    folder.mkdir(parents=True)
    (folder / "naive.ipynb").write_text("{}")
    with open(os.path.join(os.fsencode(folder), b"notes\xff.txt"), "wb") as f:
        f.write(b"an extra file\n")
    sub = read_submission(cd, "mallory", "01-naive")
    assert sub.files == {} and sub.unsafe == [
        "notes\\xff.txt (a name that is not UTF-8 text: rename it)"]
    assert "rename or remove the rest" in submissions.refusal(sub.unsafe)


@pytest.mark.slow
def test_grade_outside_a_course_says_so_without_a_traceback(tmp_path):
    p = subprocess.run([sys.executable, "-m", "tilelab.cli", "grade", "--course", str(tmp_path),
                        "--backend", "emu"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert "is not a course folder" in p.stderr and "--course" in p.stderr
