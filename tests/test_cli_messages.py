"""What the command line and the notebook helpers say where a learner or an instructor
slips: a kernel cell saved whole as a .cu file, a kernel that prints, a listing piped into
``head``, a report line too long for the feedback page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tilelab import cli, notebook

REPO = Path(__file__).resolve().parents[1]
NAIVE = (REPO / "tilelab" / "kernels" / "matmul_naive.cu").read_text()


def test_a_kernel_cell_saved_whole_is_named_for_what_it_is(tmp_path, capsys):
    for text in (f'KERNEL = r"""\n{NAIVE}"""\n', f"{NAIVE}\n'''\n"):
        path = tmp_path / "naive.cu"
        path.write_text(text)
        assert cli.main(["check", "naive", str(path)]) == 2
        err = capsys.readouterr().err
        assert "this is the notebook cell's Python" in err, err
        assert "save only the CUDA source between the triple quotes" in err
        assert "is not allowed in a graded kernel" not in err
    assert cli.cell_python(NAIVE.encode()) is None  # the CUDA source itself is checked


def test_a_check_of_a_kernel_that_prints_says_where_its_output_is(monkeypatch, capsys):
    monkeypatch.setenv("TILELAB_BACKEND", "emu")
    talking = NAIVE.replace("{\n", '{\n    if (threadIdx.x == 0) printf("hello\\n");\n', 1)
    assert talking != NAIVE
    notebook.check("naive", talking)
    out = capsys.readouterr().out
    assert "printf output is not shown here" in out and "launch the kernel yourself" in out
    notebook.check("naive", NAIVE)
    assert "printf output" not in capsys.readouterr().out


def test_reports_are_wrapped_for_the_feedback_page():
    line = "  - shape (37, 45): " + "the launch failed because of a reason " * 8
    out = notebook.wrapped(f"Exercise 'naive'\n{line}")
    rows = out.splitlines()
    assert rows[0] == "Exercise 'naive'" and len(rows) > 2
    assert all(len(r) <= notebook.WIDTH for r in rows)
    assert all(r.startswith("      ") for r in rows[2:])  # under the line they continue
    assert " ".join(out.split()) == " ".join(f"Exercise 'naive' {line}".split())


def test_a_listing_piped_into_a_closed_reader_ends_quietly():
    """``tilelab list | head``: the reader has gone before the first line is written."""
    proc = subprocess.Popen([sys.executable, "-m", "tilelab.cli", "list"], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
