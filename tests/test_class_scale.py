"""The class-scale benchmark's own figures: where a task's time went, per worker."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

spec = importlib.util.spec_from_file_location(
    "class_scale", Path(__file__).resolve().parents[1] / "benchmarks" / "class_scale.py")
class_scale = importlib.util.module_from_spec(spec)
spec.loader.exec_module(class_scale)


def verdict_file(root: Path, student: str, assignment: str, steps: list[dict]) -> None:
    folder = root / "autograder" / "feedback" / student / assignment
    folder.mkdir(parents=True)
    doc = {"student": student, "assignment": assignment, "points": {},
           "verdicts": [{"step_seconds": s} for s in steps]}
    (folder / "tilelab_verdict.json").write_text(json.dumps(doc))


def test_step_medians_and_the_rest_of_each_task(tmp_path):
    verdict_file(tmp_path, "s000", "01-naive", [{"compile_candidate": 1.0, "speed": 2.0}])
    verdict_file(tmp_path, "s001", "01-naive", [{"compile_candidate": 3.0}])
    verdict_file(tmp_path, "s002", "01-naive", [])  # a notebook whose kernel was not graded
    timings = [{"student": "s000", "assignment": "01-naive", "seconds": 5.0, "worker": "a"},
               {"student": "s001", "assignment": "01-naive", "seconds": 4.0, "worker": "b"},
               {"student": "s002", "assignment": "01-naive", "seconds": 1.5, "worker": "a"}]
    got = class_scale.step_seconds(class_scale.verdict_docs(tmp_path), timings)
    assert got == {"compile_candidate": 2.0, "speed": 2.0, "rest of the task": 1.5}


def test_each_workers_first_task_is_told_apart_from_its_later_ones():
    timings = [{"worker": "a", "seconds": 9.0}, {"worker": "b", "seconds": 8.0},
               {"worker": "a", "seconds": 3.0}, {"worker": "a", "seconds": 4.0},
               {"worker": "b", "seconds": 5.0}]
    assert class_scale.per_worker(timings) == (
        "first task on each worker 9.0, 8.0 s, later tasks median 4.0 s; "
        "tasks per worker 3, 2")


def test_each_workers_idle_time_is_the_grading_time_less_the_start_and_its_tasks():
    timings = [{"worker": "a", "seconds": 9.0}, {"worker": "b", "seconds": 8.0},
               {"worker": "a", "seconds": 3.0}, {"worker": "b", "seconds": 5.0}]
    assert class_scale.busy(timings, grading=20.0, start=4.0) == (
        "cluster start 4.0 s; per worker: in tasks 12.0, 13.0 s, idle 4.0, 3.0 s")


def test_idle_time_in_the_tasks_span_is_split_into_before_between_and_after():
    timings = [{"worker": "a", "started": 100.0, "seconds": 4.0},
               {"worker": "b", "started": 101.0, "seconds": 2.0},
               {"worker": "a", "started": 104.5, "seconds": 5.0},  # 0.5 s after a's first
               {"worker": "b", "started": 105.0, "seconds": 1.0}]  # 2 s after b's first
    assert class_scale.gaps(timings) == (
        "idle in tasks' span, all workers: 1.0 s before the first task, 2.5 s between "
        "tasks, 3.5 s after the last")
    assert class_scale.gaps([]) == "no tasks"


def test_a_run_is_labelled_by_its_workers_and_tasks_per_gpu_and_counts_both():
    run = {"workers": 2, "tasks_per_gpu": 4}
    assert class_scale.slots(run) == 8
    assert class_scale.label(2, 4, gpu=True) == "2 worker(s) x 4 task(s) per GPU"
    assert class_scale.label(2, 1, gpu=False) == "2 worker(s)"


def test_the_recommended_sharing_is_the_fewest_tasks_near_the_best_with_grades_identical():
    from tilelab.experiments import counters_load, gpu_sharing

    def doc(*runs):
        return {"runs": [{"tasks_per_gpu": k, "submissions": 16, "per_gpu_per_minute": rate,
                          "grades_identical": same, "hours_1000x5_one_gpu": 5000 / rate / 60,
                          "hours_1000x5_eight_gpus": 5000 / rate / 480}
                         for k, rate, same in runs]}

    rows = gpu_sharing.rows_from(doc((1, 7.5, True), (2, 14.0, True), (4, 29.0, True),
                                     (8, 30.0, True)), "shared", "none")
    assert [r["tasks_per_gpu"] for r in rows if r["recommended"]] == [4]  # within 5 % of 8's
    assert rows[2]["speedup"] == 3.87 and rows[0]["counters_lock"] == "shared"
    assert rows[0]["start_lock"] == "none"
    rows = gpu_sharing.rows_from(doc((1, 7.5, True), (2, 14.0, True), (4, 29.0, False),
                                     (8, 20.0, True)), "alone")
    assert [r["tasks_per_gpu"] for r in rows if r["recommended"]] == [8]  # never a grade changed
    # the counters' setting: shared only where every case was equal under a real load
    equal = {"equal": True, "load_launches": 5000}
    assert counters_load.setting([equal, equal]) == "shared"
    assert counters_load.setting([equal, {**equal, "equal": False}]) == "alone"
    assert counters_load.setting([equal, {**equal, "load_launches": 0}]) == "alone"
    assert counters_load.setting([]) == "alone"


def test_starts_take_no_lock_only_where_every_kind_left_the_speed_run_as_it_was():
    """start_load's rows: a kind is equal where every figure beside the starts is within
    1 % of the first reading alone, or within the two alone readings' own difference; the
    file supports ``none`` only where every kind was measured equal with starts made."""
    from tilelab.experiments import start_load

    alone = {"speedup": 2.0, "candidate_ms": 1.0, "baseline_ms": 2.0}
    again = {"speedup": 2.002, "candidate_ms": 1.001, "baseline_ms": 2.0}
    same = start_load.compare("cuda", alone, again, {**alone, "candidate_ms": 1.004}, 9)
    assert same["equal"] and same["shift"] == pytest.approx(0.4)
    slower = start_load.compare("ncu", alone, again, {**alone, "baseline_ms": 2.1}, 9)
    assert not slower["equal"] and slower["differing"] == "baseline_ms"
    noisy = {"speedup": 2.1, "candidate_ms": 1.0, "baseline_ms": 2.1}  # alone moved 5 %
    assert start_load.compare("ncu", alone, noisy, {**alone, "baseline_ms": 2.06}, 9)["equal"]
    assert not start_load.compare("cuda", alone, again, alone, 0)["equal"]  # no start made
    rows = [start_load.compare(k, alone, again, alone, 9) for k in start_load.KINDS]
    assert start_load.setting(rows) == "none"
    assert start_load.setting(rows[:-1]) == "shared"  # a kind not measured
    assert start_load.setting([*rows[:-1], slower]) == "shared"
    assert start_load.setting([]) == "shared"
    assert "TILELAB_START_LOCK=none" in start_load.description(rows, 40.0)


def test_rounds_run_again_are_counted_over_the_speed_runs_measured():
    docs = [{"verdicts": [{"speed_rounds_redone": 2}, {"speed_rounds_redone": None}]},
            {"verdicts": [{"speed_rounds_redone": 0}, {}]}, {"verdicts": []}]
    assert class_scale.redone(docs) == {"speed_runs": 2, "rounds": 2}


def test_the_tasks_span_from_the_first_start_to_the_last_end():
    timings = [{"started": 100.0, "seconds": 5.0}, {"started": 101.0, "seconds": 9.5},
               {"started": 104.0, "seconds": 2.0}]
    assert class_scale.in_tasks(timings) == 10.5 and class_scale.in_tasks([]) == 0.0


def test_each_timeline_moment_is_the_median_over_the_verdicts_that_have_it():
    docs = [{"verdicts": [{"timeline": {"speed_lock_wait": 0.5, "ncu_go": 2.0}}, {}]},
            {"verdicts": [{"timeline": {"speed_lock_wait": 1.5}}]},
            {"verdicts": [{"timeline": {"speed_lock_wait": 0.1}}]}]
    assert class_scale.timeline_seconds(docs) == {"ncu_go": 2.0, "speed_lock_wait": 0.5}


def test_counts_read_twice_are_compared_by_their_relative_spread():
    """Two readings of one launch alone differ a little on a GPU (shared-memory wavefronts by
    tenths of a percent on an H100): the comparison under load is relative, and a count that
    is zero both times does not differ."""
    from tilelab.experiments import counters_load

    a = dict.fromkeys(counters_load.counters.METRICS, 0.0)
    a |= {"shared_ld_wavefronts": 402840293.0, "shared_ld_requests": 1000.0}
    b = {**a, "shared_ld_wavefronts": 402836066.0}
    s = counters_load.spread(a, b)
    assert 0 < s["shared_ld_wavefronts"] < 1e-4 and s["shared_ld_requests"] == 0.0
    assert s["global_st_sectors"] == 0.0  # zero in both readings
    assert counters_load.spread(a, {**a, "shared_ld_requests": 900.0})["shared_ld_requests"] \
        == pytest.approx(0.1)


def test_a_submission_graded_differently_is_named_with_what_each_run_said(tmp_path):
    verdict_file(tmp_path, "s000", "01-naive", [])
    docs = class_scale.verdict_docs(tmp_path)
    docs[0]["verdicts"] = [{"messages": ["correct on 9 shapes"]}]
    contents = {"s000/01-naive": "right", "s001/01-naive": "wrong"}
    base = {"label": "1 task", "keys": list(contents),
            "grades": {"s000/01-naive": 3.0, "s001/01-naive": 0.0},
            "notes": class_scale.notes(docs)}
    run = {"label": "8 tasks", "keys": list(contents),
           "grades": {"s000/01-naive": 0.0, "s001/01-naive": 0.0},
           "notes": {"s000/01-naive": "grading took longer than 120 s"}}
    got = class_scale.differences(base, run, contents)
    assert len(got) == 1 and "s000/01-naive: 0.0 in 8 tasks, 3.0 for s000/01-naive" in got[0]
    assert "correct on 9 shapes" in got[0] and "longer than 120 s" in got[0]
    assert class_scale.differences(base, base, contents) == []


def test_a_bigger_class_is_compared_file_by_file_with_the_first_runs_smaller_one():
    """Each submission of a shared run is held to the points the first run gave the same
    file; one it lost, one graded two ways and a file the first run never saw all count."""
    contents = {"s000/a": "right", "s001/a": "wrong", "s002/a": "right", "s003/a": "wrong",
                "s004/a": "new"}
    base = {"label": "1 task", "keys": ["s000/a", "s001/a"], "notes": {},
            "grades": {"s000/a": 5.0, "s001/a": 0.0}}
    run = {"label": "4 tasks", "keys": list(contents), "notes": {},
           "grades": {"s000/a": 5.0, "s001/a": 0.0, "s002/a": 5.0, "s003/a": 0.0,
                      "s004/a": 0.0}}
    got = class_scale.differences(base, run, contents)
    assert len(got) == 1 and "s004/a: a file the base run (1 task) did not grade" in got[0]
    del contents["s004/a"]
    run["keys"].remove("s004/a")
    assert class_scale.differences(base, run, contents) == []
    run["grades"] = {**run["grades"], "s002/a": 3.0}
    run["grades"].pop("s003/a")  # not graded at all
    got = class_scale.differences(base, run, contents)
    assert [line.split(":")[0].strip() for line in got] == ["s002/a", "s003/a"]
    assert "3.0 in 4 tasks, 5.0 for s000/a (the same file)" in got[0]
    unfair = {**base, "keys": ["s000/a", "s002/a"], "grades": {"s000/a": 5.0, "s002/a": 3.0}}
    assert len(class_scale.differences(unfair, unfair, contents)) == 1  # its own two ways


def test_the_class_names_each_submission_by_its_files_digest(tmp_path):
    """Learners of the same kind submit the same file; a smaller class is the bigger one's
    first learners, file for file."""
    big = class_scale.build_class(tmp_path / "big", 7)
    small = class_scale.build_class(tmp_path / "small", 5)
    assert len(big) == 14 and small.items() <= big.items()
    assert big["s005/01-naive"] == big["s000/01-naive"] != big["s001/01-naive"]
    assert len(set(small.values())) == 10  # every kind of both assignments
    data = (tmp_path / "big/autograder/submitted/s006/02-tiled/tiled.ipynb").read_bytes()
    assert class_scale.hashlib.sha256(data).hexdigest() == big["s006/02-tiled"]
