"""A corpus of bad, broken and hostile submissions graded in one class run.

Every case must end in a verdict whose feedback names its problem, while the good
students graded before and after them keep their exact points, the grader never crashes
and the gradebook loses no row. The cases whose notebook holds nothing but a kernel
(:func:`kernel_only`) are graded by the class run's clean grade alone
(:func:`tilelab.classroom.steps.grade_notebook`, the step that gives every kernel its
points): running their notebooks would only repeat the good students' run. The run
prints the figures (cases tried, caught with a clear message, grader crashes, other
students affected, gradebook rows lost). The GPU cases at the end grade hostile kernels
on a GPU, then a good one on the same GPU.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest
from nbgrader.api import Gradebook, SubmittedAssignment
from support import SUMMARY_LINE, hostile_steps
from support.classroom import (
    copy_course,
    kernel_cell,
    released_stub,
    solution_kernel,
    submission,
    write_submissions,
)

from tilelab import classroom
from tilelab.catalog import exercises
from tilelab.catalog.reference import KERNELS, tiled_without_barrier
from tilelab.classroom.steps import grade_notebook
from tilelab.grading import scoring
from tilelab.grading.sandbox import grade_source
from tilelab.isolation import bubblewrap

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(bubblewrap.problem() is not None,
                       reason=f"the hostile corpus runs in a sandbox: {bubblewrap.problem()}"),
    pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning"),
]

NAIVE = KERNELS["naive"].source()
TILED = solution_kernel("tiled")
STUB = (
    "__global__ void matmul_naive(const float* A, const float* B, float* C, int M, int N,"
    " int K) { }"
)
MARKER = "tilelab-corpus-leftover"  # in the command line of a process a notebook leaves


def naive_with(old: str, new: str) -> str:
    assert old in NAIVE, old
    return NAIVE.replace(old, new)


# ------------------------------------------------------------------ the corpus


@dataclass(frozen=True)
class Case:
    """One bad submission: its kernel (or whole notebook), what it earns, what it is told."""

    student: str
    what: str
    message: str  # a regular expression its verdicts' messages must match
    kernel: str | None = None  # the kernel cell's CUDA C (exercise naive unless `exercise`)
    python: str = ""  # extra Python after the kernel literal, in the kernel cell
    exercise: str = "naive"
    raw: bytes | None = None  # the whole notebook file, instead of a released notebook
    edit: str = ""  # a change to the notebook's cells (see `notebook_for`)
    points: tuple[float, float] = (0, 0)  # (correctness, speed) of `exercise`


LEAK = (
    "import pathlib\n"
    "root = next(p for p in pathlib.Path.cwd().parents if (p / 'solutions').is_dir())\n"
    "print(open(root / 'solutions/01-naive/naive.ipynb').read())\n"
)
TAMPER = (
    "import pathlib, sqlite3\n"
    "root = next(p for p in pathlib.Path.cwd().parents if (p / 'gradebook.db').exists())\n"
    "con = sqlite3.connect(root / 'gradebook.db')\n"
    "con.execute('UPDATE grade SET manual_score = 0, auto_score = 0')\n"
    "con.execute('DELETE FROM comment')\n"
    "con.commit()\n"
)
OVERWRITE = (  # replaces a later student's submission and an earlier one's feedback
    "import pathlib, shutil\n"
    "a = next(p for p in pathlib.Path.cwd().parents if p.name == 'autograder')\n"
    "(a / 'submitted/zoe/01-naive/naive.ipynb').write_text('{}')\n"
    "shutil.rmtree(a / 'feedback/aaron/01-naive', ignore_errors=True)\n"
)
LEFTOVER = (
    "import subprocess, sys\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', "
    f"'{MARKER}'], start_new_session=True)\n"
)

CASES = [
    # kernels
    Case("k01", "compile error", "does not compile", kernel=naive_with("acc +=", "acc +== ")),
    Case("k02", "wrong kernel name", "no kernel named 'matmul_naive'",
         kernel=naive_with("matmul_naive(", "matmul(")),
    Case("k03", "wrong signature", "wrong signature",
         kernel=naive_with("int M, int N, int K", "int M, int N, float K")),
    Case("k04", "endless loop", "did not finish within|longer than",
         kernel=naive_with("float acc = 0.0f;", "float acc = 0.0f; while (true) { }")),
    Case("k05", "out-of-bounds write into a neighbouring buffer", "[Oo]ut-of-bounds write",
         kernel=naive_with("C[row * N + col] = acc;", "C[row * N + col + M * N] = acc;")),
    Case("k06", "reads uninitialised shared memory", "wrong|NaN|never written",
         kernel=TILED.replace("As[ty][tx] = ", "float unused = "), exercise="tiled"),
    Case("k07", "missing barrier", "wrong|race", kernel=tiled_without_barrier(2),
         exercise="tiled"),
    Case("k08", "barrier inside a branch", "barrier|__syncthreads",
         kernel=TILED.replace("__syncthreads();  // the whole",
                              "if (tx < 16) __syncthreads();  // the whole"),
         exercise="tiled"),
    Case("k09", "more shared memory than a block can have", "shared memory|48 KiB",
         kernel=TILED.replace("__shared__ float Bs[TILE][TILE];",
                              "__shared__ float Bs[TILE][TILE];\n    __shared__ float big[65536];"
                              "\n    big[threadIdx.x] = 0.0f;\n    __syncthreads();")
         .replace("C[row * N + col] = acc;", "C[row * N + col] = acc + big[threadIdx.x];"),
         exercise="tiled"),
    Case("k10", "printf flood (still correct: graded normally)", "correct on",
         kernel=naive_with("C[row * N + col] = acc;",
                           'C[row * N + col] = acc;\n        printf("flood %d %d\\n", row, col);'),
         points=(3, 0)),
    Case("k11", "writes only part of C, relying on zeros", "never written",
         kernel=naive_with("C[row * N + col] = acc;", "if (row % 2 == 0) C[row * N + col] = acc;")),
    # Python in the notebook
    Case("p01", "monkeypatches the grader", "never written",
         kernel=STUB, python="import tilelab.notebook\n"
         "from tilelab.grading.verdict import Verdict\n"
         "tilelab.notebook.grade_source = lambda e, s, **k: Verdict(e, 'emu', "
         "correct=True, speed_passed=True, points_correct=3, points_speed=2)\n"),
    Case("p02", "monkeypatches NumPy", "never written", kernel=STUB,
         python="import numpy as np\nnp.allclose = lambda *a, **k: True\n"
         "np.testing.assert_allclose = lambda *a, **k: None\n"),
    Case("p03", "replaces the result with NumPy's product", "never written", kernel=STUB,
         python="import tilelab.grading.correctness as p\n_real = p.check_function\n"
         "def fake(rt, fn, problem, launch, shape, rng):\n"
         "    import numpy as np\n    return _real(rt, fn, problem, launch, shape, rng)\n"
         "p.check_function = fake\n"),
    Case("p04", "an object whose __eq__ is always true", "never written", kernel=STUB,
         python="class Yes:\n    def __eq__(self, o): return True\n"
         "    def __bool__(self): return True\n    def __getattr__(self, n): return Yes()\n"
         "import tilelab.notebook\ntilelab.notebook.grade_source = lambda *a, **k: Yes()\n"),
    Case("p05", "sys.exit() (correct kernel)", "correct on", kernel=NAIVE,
         python="import sys\nsys.exit(0)\n", points=(3, 0)),
    Case("p06", "os._exit() (correct kernel)", "could not run the notebook", kernel=NAIVE,
         python="import os\nos._exit(0)\n", points=(3, 0)),
    Case("p07", "time.sleep(10**6) (correct kernel)", "was interrupted",
         kernel=NAIVE, python="import time\ntime.sleep(10**6)\n", points=(3, 0)),
    Case("p08", "ignores SIGINT, then sleeps", "could not run the notebook", kernel=NAIVE,
         python="import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
         "time.sleep(10**6)\n", points=(3, 0)),
    Case("p09", "leaves a process running", "correct on", kernel=NAIVE, python=LEFTOVER,
         points=(3, 0)),
    Case("p10", "reads the solutions from disk", "never written", kernel=STUB,
         python=LEAK),
    Case("p11", "writes into the gradebook", "correct on", kernel=NAIVE,
         python=TAMPER, points=(3, 0)),
    Case("p12", "overwrites another's submission and feedback", "correct on", kernel=NAIVE,
         python=OVERWRITE, points=(3, 0)),
    Case("p13", "deletes its test cells and edits their metadata", "correct on", kernel=NAIVE,
         edit="drop_tests", points=(3, 0)),
    Case("p14", "renames its kernel cell", "no kernel cell", kernel=NAIVE, edit="rename_cell"),
    Case("p15", "not valid JSON", "not a readable notebook", raw=b'{"cells": [ not json'),
    Case("p16", "an empty file", "not a readable notebook", raw=b""),
    Case("p17", "the wrong assignment's notebook", "notebook of assignment 02-tiled",
         edit="wrong_assignment"),
    # source tricks
    Case("s01", "#include of /etc/passwd", "is not allowed",
         kernel='#include "/etc/passwd"\n' + NAIVE),
    Case("s02", "a 10 MB source", "more than", kernel=NAIVE + "// " + "x" * (10 << 20) + "\n"),
    Case("s03", "bytes that are not UTF-8", "not a readable notebook", edit="latin1"),
]
# ------------------------------------------------ cases of the sandbox (issue 10)

WALK = (Path(__file__).parent / "data" / "hostile" / "libc_walk.h").read_text()
ROOT = "{ROOT}"  # replaced by the course's absolute path when the notebook is written
PORT = "{PORT}"  # a port the test listens on, on this machine's loopback
TILED_AT = KERNELS["tiled32_at"].source()
TRANSPOSE = KERNELS["transpose_naive"].source()
PADDED = KERNELS["transpose_padded"].source()


def walk_naive(body: str, prefix: str = "") -> str:
    """The naive kernel, its first thread running ``body`` with ``libc_symbol`` at hand."""
    return WALK + prefix + naive_with(
        "float acc = 0.0f;",
        "float acc = 0.0f;\n    if (row == 0 && col == 0) {\n" + body + "\n    }")


def call(ret: str, args: str, name: str, call_args: str) -> str:
    return (f"typedef {ret} (*fn_t)({args});\n"
            f'fn_t f = (fn_t)libc_symbol("{name}");\n'
            f"if (f) f({call_args});")


NAIVE_TRANSPOSE = (  # the defines, then only the naive transpose, renamed
    TRANSPOSE[:TRANSPOSE.index("__global__")]
    + TRANSPOSE[TRANSPOSE.index("__global__ void transpose_naive"):
                TRANSPOSE.index("__global__ void transpose_shared")]
).replace("transpose_naive(", "transpose_padded(")
UNPADDED_DILUTED = PADDED.replace(
    "tile[TILE_DIM][TILE_DIM + 1]", "tile[TILE_DIM][TILE_DIM]").replace(
    "    __syncthreads();\n    x = blockIdx.y",
    "    __syncthreads();\n    float dummy = 0.0f;\n"
    "    for (int d = 0; d < 1500; ++d) dummy += tile[threadIdx.y][threadIdx.x];\n"
    "    if (dummy == 12345.0f) out[0] = dummy;\n    x = blockIdx.y")
ANALYSIS_SWITCH = PADDED.replace(
    "__shared__ float tile[TILE_DIM][TILE_DIM + 1];",
    "#ifdef TILELAB_ANALYSIS\n    __shared__ float tile[TILE_DIM][TILE_DIM + 1];\n#else\n"
    "    __shared__ float tile[TILE_DIM][TILE_DIM];\n#endif")
LEFT_BLOCK_RACE = naive_with(  # correct only if the block to the left has already run
    "C[row * N + col] = acc;",
    "float left = col >= 16 ? C[row * N + col - 16] : 0.0f;\n"
    "        C[row * N + col] = acc + 0.0f * left;")
UPPER_BLOCK_RACE = naive_with(
    "C[row * N + col] = acc;",
    "float up = row >= 16 ? C[(row - 16) * N + col] : 0.0f;\n"
    "        C[row * N + col] = acc + 0.0f * up;")
FIND_PIPE = (  # at load time (fcntl is allowed there): the emulator's report pipe
    "static int report_pipe = 0;\n"
    "__device__ int pipe_fd() {\n"
    + call("int", "int, int", "fcntl", "0, 0").replace("if (f) f(0, 0);", "")
    + "for (int fd = 3; fd < 1024; fd++) if (f(fd, 1) >= 0) return report_pipe = fd;\n"
    "return 0;\n}\n"
    "static int found_pipe = pipe_fd();\n"
    "__device__ void say(const char* line) {\n"
    + call("long", "int, const void*, unsigned long", "write", "0, 0, 0")
    .replace("if (f) f(0, 0, 0);", "")
    + "unsigned long n = 0;\nwhile (line[n]) n++;\nif (report_pipe) f(report_pipe, line, n);\n}\n"
)
FORGED_BANKS = (  # a launch report: no race, every shared access conflict-free
    r'"{\"status\":\"ok\",\"kernel_seconds\":0.001,\"analysis\":{\"arrays\":[{\"name\":'
    r'\"tile\",\"elem\":4,\"dynamic\":false,\"dims\":[32,33]}],\"races\":[],'
    r'\"races_dropped\":0,\"banks\":[{\"line\":60,\"array\":0,\"kind\":\"read\",'
    r'\"accesses\":64,\"sum\":64,\"max\":1}]}}\n"'
)
FORGED_REPORT = WALK + FIND_PIPE + "static int forged_once = 0;\n" + PADDED.replace(
    "tile[TILE_DIM][TILE_DIM + 1]", "tile[TILE_DIM][TILE_DIM]").replace(
    "__shared__ float tile[TILE_DIM][TILE_DIM];",
    "__shared__ float tile[TILE_DIM][TILE_DIM];\n"
    f"    if (!forged_once) {{ forged_once = 1; say({FORGED_BANKS}); }}")
FORGED_LOAD = WALK + FIND_PIPE + (  # the loader's report (kernels, static shared), then exit
    "__device__ int forge() {\n"
    'say("{\\"kernels\\": [], \\"static_shared\\": 0, \\"globals\\": []}\\n");\n'
    + call("void", "int", "_exit", "0") + "\nreturn 0;\n}\n"
    "static int forged = forge();\n") + STUB
CELL = {
    "config": f"open('{ROOT}/autograder/nbgrader_config.py', 'a')"
              ".write('\\nraise SystemExit\\n')\n",
    "ghost": f"import os\nos.makedirs('{ROOT}/autograder/submitted/ghost/01-naive')\n"
             f"open('{ROOT}/autograder/submitted/ghost/01-naive/naive.ipynb', 'w')"
             ".write('{{}}')\n",
    "gradebook": f"print(open('{ROOT}/autograder/gradebook.db', 'rb').read()[:200])\n",
    "other": f"print('GOT' + ' OTHER',\n"
             f"      open('{ROOT}/autograder/submitted/aaron/01-naive/naive.ipynb').read()[:99])\n",
    "network": f"import socket\nsocket.create_connection(('127.0.0.1', {PORT}), 3)\n"
               "print('CONN' + 'ECTED')\n",
    "fork bomb": "import os, time\nwhile True:\n    try:\n        os.fork()\n"
                 "    except OSError:\n        time.sleep(0.2)\n",
    "probe": "import os\nfor top, dirs, files in os.walk('/'):\n"  # packages' test data aside
             "    if top.startswith(('/proc', '/sys', '/dev')) or '-packages/' in top:\n"
             "        dirs[:] = []\n"
             "        continue\n"
             "    for name in files:\n        try:\n"
             "            with open(os.path.join(top, name), 'rb') as f:\n"
             "                if f.read(16).startswith(b'SQLite' + b' format 3'):\n"
             "                    print('FOUND' + 'DB', os.path.join(top, name))\n"
             "        except OSError:\n            pass\n",
    "10 GB": "b = bytearray(10 << 30)\nprint('ALLOC' + 'ATED')\n",
    "10 GB file": "f = open('/tmp/big', 'wb')\nf.seek(10 << 30)\nf.write(b'x')\nf.close()\n"
                  "print('WRO' + 'TE')\n",
    "1 GB output": "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * (1 << 20))\n",
    "kill all": "import os\nos.kill(-1, 9)\n",
    "kill parent": "import os\nos.kill(os.getppid(), 9)\nos.kill(1, 9)\n",
    "delete": f"import shutil\nfor d in ('.', '{ROOT}/autograder/submitted',\n"
              f"          '{ROOT}/autograder'):\n    shutil.rmtree(d, ignore_errors=True)\n",
    "forge": "import glob, json, os\n"
             "v = {'exercise': 'naive', 'backend': 'emu', 'correct': True, 'points_correct': 3}\n"
             "cache = os.environ.get('TILELAB_VERDICT_CACHE', '')\n"
             "for d in glob.glob('/tmp/tilelab-*') + [cache]:\n"
             "    for f in glob.glob(d + '/*'):\n"
             "        try:\n            open(f, 'w').write(json.dumps(v))\n"
             "        except OSError:\n            pass\n",
}
WIDGETS = ("from comm import create_comm\n"
           "for i in range(8):\n"
           "    create_comm(target_name='jupyter.widget',\n"
           "                data={'state': {'value': 'w' * (8 << 20)}, 'buffer_paths': []})\n")
ACTIVE = ("from IPython.display import HTML, SVG, Javascript, display\n"
          "display(HTML('<script>alert(3)</script><b onclick=\"alert(4)\">x</b>'))\n"
          "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\" onload=\"alert(5)\">"
          "<script>alert(6)</script></svg>'))\n"
          "display(Javascript('alert(7)'))\n")
OS = "the kernel tried to call the operating system"
# a graded kernel is refused before any compiler sees it: the subset has no function pointer
FN_PTR = "function pointer is not allowed in a graded kernel"
SANDBOX_CASES = [
    # host code execution from a kernel (through libc, no forbidden name written)
    Case("h01", "system() found from &printf", FN_PTR, kernel=walk_naive(
        call("int", "const char*", "system", '"touch /tmp/tilelab-corpus-pwned"'))),
    Case("h02", "execve through libc's syscall()", FN_PTR, kernel=walk_naive(
        'const char* argv[] = {"/bin/sh", "-c", "id", 0};\n'
        + call("long", "long, ...", "syscall", "59L, argv[0], argv, 0"))),
    Case("h03", "a global constructor that calls system()", FN_PTR,
         kernel=walk_naive("", "__device__ int escape() {\n"
                           + call("int", "const char*", "system", '"id"') + "\nreturn 0; }\n"
                           "static int at_load = escape();\n")),
    Case("h04", "ptrace of the grader", FN_PTR,
         kernel=walk_naive(call("long", "int, int, void*, void*", "ptrace", "16, 1, 0, 0"))),
    Case("h05", "writes /proc/<parent>/mem", FN_PTR, kernel=walk_naive(
        call("void*", "const char*, const char*", "fopen", '"/proc/1/mem", "r+"'))),
    # a forged verdict
    Case("f01", "an empty kernel that starts a detached process", FN_PTR,
         kernel=WALK + STUB.replace("{ }", "{\n" + call("int", "void", "fork", "") + "\n}")),
    Case("f02", "a cell that rewrites every verdict it can find", "never written", kernel=STUB,
         python=CELL["forge"]),
    Case("f03", "an unpadded tile that writes a conflict-free report on the emulator's pipe",
         FN_PTR, kernel=FORGED_REPORT, exercise="transpose_padded"),
    Case("f04", "a constructor that writes the loader's report and exits", FN_PTR,
         kernel=FORGED_LOAD),
    # learner Python during the class run
    Case("c01", "appends code to the course's nbgrader config", "correct on", kernel=NAIVE,
         python=CELL["config"], points=(3, 0)),
    Case("c02", "creates a submission for a student who does not exist", "correct on",
         kernel=NAIVE, python=CELL["ghost"], points=(3, 0)),
    Case("c03", "reads the gradebook", "correct on", kernel=NAIVE, python=CELL["gradebook"],
         points=(3, 0)),
    Case("c13", "searches every file it can see for a gradebook", "correct on", kernel=NAIVE,
         python=CELL["probe"], points=(3, 0)),
    Case("a01", "script in markdown, outputs and a quoted compiler error", "does not compile",
         kernel='#error <img src=x onerror="alert(1)"><script>alert(2)</script>\n' + NAIVE,
         python=ACTIVE, edit="active"),
    Case("k12", "a kernel cell of 200,000 unary minus signs", "nested too deeply",
         edit="deep_cell"),
    Case("k13", "a load-time constructor that never ends",
         "did not finish loading|file-scope initializer that calls a function",
         kernel="static int spin() { volatile int x = 1; while (x) { } return 0; }\n"
         "static int at_load = spin();\n" + NAIVE),
    Case("t01", "its own timestamp.txt from the year 2000", "correct on", kernel=NAIVE,
         edit="timestamp", points=(3, 0)),
    Case("c04", "reads another student's notebook", "correct on", kernel=NAIVE,
         python=CELL["other"], points=(3, 0)),
    Case("c05", "connects to the network from a cell", "correct on", kernel=NAIVE,
         python=CELL["network"], points=(3, 0)),
    Case("c06", "opens a socket from the kernel", FN_PTR,
         kernel=walk_naive(call("int", "int, int, int", "socket", "2, 1, 0"))),
    Case("c07", "a fork bomb", "correct on", kernel=NAIVE, python=CELL["fork bomb"],
         points=(3, 0)),
    Case("c08", "a 10 GB allocation", "correct on", kernel=NAIVE, python=CELL["10 GB"],
         points=(3, 0)),
    Case("c09", "a 10 GB (sparse) file", "correct on", kernel=NAIVE, python=CELL["10 GB file"],
         points=(3, 0)),
    Case("c10", "1 GB of output", "correct on", kernel=NAIVE, python=CELL["1 GB output"],
         points=(3, 0)),
    Case("c11", "kills every process it can see", "correct on", kernel=NAIVE,
         python=CELL["kill all"], points=(3, 0)),
    Case("c12", "SIGKILLs its parent", "correct on", kernel=NAIVE, python=CELL["kill parent"],
         points=(3, 0)),
    # submissions lost
    Case("d01", "a data file larger than any limit beside the notebook",
         "a file may be at most", kernel=NAIVE, edit="big_file"),
    Case("d05", "a 2 GiB sparse file (0 bytes on disk) beside a correct notebook",
         "a file may be at most", kernel=NAIVE, edit="sparse_2g"),
    Case("d06", "a 20 MiB markdown cell", "a notebook may be at most", kernel=NAIVE,
         edit="huge_markdown"),
    Case("w01", "a flood of widget messages (8 of 8 MiB)", "correct on", kernel=NAIVE,
         python=WIDGETS, points=(3, 0)),
    Case("d02", "deletes every folder it can name", "correct on", kernel=NAIVE,
         python=CELL["delete"], points=(3, 0)),
    Case("d03", "its notebook is a link to the solutions' notebook", "symbolic link",
         kernel=NAIVE, edit="link_notebook"),
    Case("d04", "a link to the course folder and a named pipe beside its notebook",
         "symbolic link", kernel=NAIVE, edit="link_course"),
    Case("d07", "a hard link to the solutions' notebook beside its own", "a hard link",
         kernel=NAIVE, edit="hard_link"),
    Case("d08", "a timestamp.txt that holds no time", "timestamp.txt does not hold a time",
         kernel=NAIVE, edit="bad_timestamp", points=(3, 0)),
    # gates passed without the lesson
    Case("g01", "a plain transpose as the padded one", "no shared-memory access",
         kernel=NAIVE_TRANSPOSE, exercise="transpose_padded", points=(3, 0)),
    Case("g02", "a naive matmul as the padded one", "no shared-memory access",
         kernel=naive_with("matmul_naive(", "matmul_tiled_at("), exercise="matmul_at_padded",
         points=(3, 0)),
    Case("g03", "an unpadded tile diluted by conflict-free reads",
         "worst-line bank-conflict degree",
         kernel=UNPADDED_DILUTED, exercise="transpose_padded", points=(3, 0)),
    Case("g04", "a padded build only when analysed", "name of the CPU emulator",
         kernel=ANALYSIS_SWITCH, exercise="transpose_padded"),
    Case("g05", "the K loop stops after 6 tiles", "wrong|never written",
         kernel=TILED.replace("t < K;", "t < K && t < 6 * TILE;"), exercise="tiled"),
    Case("g06", "row % 200", "wrong|never written",
         kernel=naive_with("int row = blockIdx.y * blockDim.y + threadIdx.y;",
                           "int row = (blockIdx.y * blockDim.y + threadIdx.y) % 200;")),
    # directives the compiler reads its own way, and a scan that must stay linear
    Case("s04", "form feed before #include", "is not allowed",
         kernel='\f#include "/etc/passwd"\n' + NAIVE),
    Case("s05", "a BOM before #include", "is not allowed",
         kernel='\ufeff#include "/etc/passwd"\n' + NAIVE),
    Case("s06", "a lone CR ends the comment before #include", "is not allowed",
         kernel='// note\r#include "/etc/passwd"\n' + NAIVE),
    Case("s07", "243 KB of __global__ inside #if 0", "more than 64 __global__",
         kernel="#if 0\n" + "__global__ " * 22000 + "\n#endif\n" + NAIVE),
    # the emulator behaves as a GPU
    Case("e01", "reads the left block's output (a race between blocks)", "wrong|never written",
         kernel=LEFT_BLOCK_RACE),
    Case("e02", "reads the upper block's output (a race between blocks)", "wrong|never written",
         kernel=UPPER_BLOCK_RACE),
    Case("e03", "64 KiB of static shared memory", "48 KiB", exercise="tiled",
         kernel=TILED.replace("__shared__ float Bs[TILE][TILE];",
                              "__shared__ float Bs[TILE][TILE];\n    __shared__ float big[16384];"
                              "\n    big[threadIdx.x] = 0.0f;")
         .replace("C[row * N + col] = acc;", "C[row * N + col] = acc + big[threadIdx.x];")),
]
ANIMATED = (  # handlers the page's own CSS animations fire, in an HTML output
    "from IPython.display import HTML, display\n"
    "display(HTML('<i class=\"fa fa-spin\" onanimationstart=\"alert(12)\">s</i>'\n"
    "             '<div class=\"progress-bar active\" onanimationstart=\"alert(13)\">b</div>'))\n")
STEPS_CASES = [
    # what nbgrader's own steps do with a notebook (issue 52)
    Case("n01", "96 outputs under one display id, then one 8 MiB update",
         r"came to \d+ MiB, more than the 4 MiB", kernel=NAIVE, python=hostile_steps.DISPLAY_BOMB,
         points=(3, 0)),
    Case("n02", "144 KB of unmatched \\begin{x} in a markdown cell", "correct on",
         kernel=NAIVE, edit="begin_markdown", points=(3, 0)),
    Case("n03", "60,000 empty cells", "cells, more than the 1,000", kernel=NAIVE,
         edit="empty_cells", points=(3, 0)),
    Case("n04", "handlers fired by the page's CSS animations, a blank line in an attribute",
         "correct on", kernel=NAIVE, python=ANIMATED, edit="animated", points=(3, 0)),
]
CASES += SANDBOX_CASES + STEPS_CASES

# ------------------------------------------- evidence the submission cannot shape (issue 23)

FIXTURES = Path(__file__).parent / "fixtures" / "submissions"
REFUSED = "is not allowed in a graded kernel"
UNMEASURED = "not measured: needs a GPU"


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.cu").read_text(encoding="utf-8")


EVIDENCE_CASES = [  # kernel fixture, exercise, message, points on the emulator
    ("v01", "tiled-replay_poison_check", "tiled", UNMEASURED, (3, 0)),
    ("v02", "tiled-replay_memo", "tiled", UNMEASURED, (3, 0)),
    ("v03", "transpose_padded-replay_skip_tiles", "transpose_padded", UNMEASURED, (3, 0)),
    ("v04", "naive-cuda_arch_switch", "naive", "__CUDA_ARCH__ " + REFUSED, (0, 0)),
    ("v05", "transpose_padded-sanitize_switch", "transpose_padded",
     "__SANITIZE_THREAD__ " + REFUSED, (0, 0)),
    ("v06", "transpose_padded-clock64_switch", "transpose_padded", r"clock64\(\) " + REFUSED,
     (0, 0)),
    ("v07", "transpose_padded-no_sanitize", "transpose_padded", "no_sanitize_thread", (0, 0)),
    ("v08", "transpose_padded-alias_string", "transpose_padded",  # its extern "C" is met
     'alias|extern "C" before anything but a __global__ function', (0, 0)),  # first now
    ("v09", "transpose_padded-load_time_forge", "transpose_padded", "file-scope initializer",
     (0, 0)),
    ("v10", "transpose_padded-pad_at_analysis_shape", "transpose_padded", UNMEASURED, (3, 0)),
    ("v11", "naive-global_race", "naive", "wrong", (0, 0)),
    ("v12", "naive-mangled_runtime_name", "naive", "_ZN6tl_emu10g_in_blockE " + REFUSED,
     (0, 0)),
    ("v13", "naive-libgcc_helper", "naive", "__umodti3 " + REFUSED, (0, 0)),
    ("v14", "block_sum-atomic_exch_race", "block_sum", "race found|wrong", (0, 0)),
    ("v15", "block_sum-global_rmw_race", "block_sum", "race found|wrong", (0, 0)),
    ("v16", "block_sum-device_scratch_race", "block_sum", "race found|wrong", (0, 0)),
]
KERNELS_OF = {case.student: case.kernel for case in CASES}
if os.environ.get("TILELAB_CORPUS_ONLY"):  # a few cases by student id: c13,d05
    CASES = [c for c in CASES if c.student in os.environ["TILELAB_CORPUS_ONLY"].split(",")]


def needs(summary: dict, *students: str) -> None:
    """Skip, saying so, where ``TILELAB_CORPUS_ONLY`` left one of these cases out; else
    they must be among the cases this module's class run graded (:func:`shard_of`)."""
    left_out = set(students) - {c.student for c in summary["cases"]}
    if left_out and os.environ.get("TILELAB_CORPUS_ONLY"):
        pytest.skip(f"{', '.join(sorted(left_out))} not among the cases run (TILELAB_CORPUS_ONLY)")
    assert not left_out, f"{sorted(left_out)} are graded by the other module's class run"


def files_of(folder: Path, pattern: str = "*") -> list[Path]:
    """The files under ``folder``, which must hold some."""
    found = [p for p in folder.rglob(pattern) if p.is_file()]
    assert found, f"nothing under {folder}"
    return found


@pytest.mark.parametrize(("student", "name", "exercise_id", "message", "points"),
                         EVIDENCE_CASES, ids=[c[1] for c in EVIDENCE_CASES])
def test_evidence_the_submission_shapes_earns_nothing(student, name, exercise_id, message,
                                                      points):
    """Each family graded in the grading sandbox, as the class run's hidden tests grade it
    (outside the class run, which these cases would lengthen by a notebook each)."""
    v = grade_source(exercise_id, fixture(name), backend_name="emu")
    assert re.search(message, "\n".join(v.messages)), scoring.report(v)
    assert (v.points_correct, v.points_speed) == points, scoring.report(v)
GOOD = ("aaron", "zoe")  # graded first and last: nothing a case does may change their points


def kernel_only(case: Case) -> bool:
    """A case whose notebook is the released one with only its kernel changed."""
    return not case.python and not case.edit and case.raw is None


def shard_of(case: Case) -> str:
    """The module whose class run grades a case. The corpus is graded in two class runs, so
    that two test workers share it: ``"python"`` here (the notebooks whose Python
    misbehaves, and every kernel-only case), ``"cells"`` in tests/test_corpus_cells.py (the
    notebooks whose cells, files or pages do). Each test reads the cases of one run only."""
    return "python" if case.student.startswith("p") or kernel_only(case) else "cells"


SHARD = "python"  # this module's share of CASES (:func:`shard_of`)
GATES = {"naive": 3.5}


def notebook_for(case: Case, root: Path | None = None, port: int = 0) -> bytes:
    """The submitted file of one case (``{ROOT}`` and ``{PORT}`` in its Python filled in)."""
    if root is not None and case.python:
        python = case.python.replace("{ROOT}", str(root)).replace("{PORT}", str(port))
        case = Case(**{**case.__dict__, "python": python})
    if case.raw is not None:
        return case.raw
    if case.edit == "wrong_assignment":
        ex = exercises.get("tiled")
        return json.dumps(submission(ex.assignment, {})).encode()
    ex = exercises.get(case.exercise)
    cell = kernel_cell(released_stub(ex.id), case.kernel or "") + case.python
    nb = submission(ex.assignment, {ex.id: cell})
    if case.edit == "drop_tests":
        nb["cells"] = [
            c for c in nb["cells"]
            if not c["metadata"].get("nbgrader", {}).get("grade_id", "").startswith("test_")
        ]
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{ex.id}":
                c["metadata"]["nbgrader"]["points"] = 100
    if case.edit == "rename_cell":
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{ex.id}":
                c["metadata"]["nbgrader"]["grade_id"] = "my_kernel"
    if case.edit == "deep_cell":
        for c in nb["cells"]:
            if c["metadata"].get("nbgrader", {}).get("grade_id") == f"kernel_{ex.id}":
                var = "".join(c["source"]).split("=", 1)[0].strip()
                c["source"] = f"{var} = " + "-" * 200000 + "1\n"
    if case.edit == "huge_markdown":
        nb["cells"].append({"cell_type": "markdown", "metadata": {},
                            "source": "m" * (20 << 20)})
    if case.edit == "begin_markdown":
        nb["cells"].append(hostile_steps.unmatched_begins(144))
    if case.edit == "empty_cells":
        nb["cells"] += hostile_steps.empty_cells()
    if case.edit == "animated":
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": (
            '<a title="x\n\n[y](https://example.invalid) onanimationstart=alert(14) '
            'class=fa-spin">z</a>\n\n<i class="fa fa-spin" onanimationstart="alert(15)">s</i>')})
    if case.edit == "active":
        nb["cells"].append({"cell_type": "markdown", "metadata": {}, "source": (
            "<script>alert(8)</script>\n\n<img src=x onerror=alert(9)>\n\n"
            "[here](javascript:alert(10))\n\n<svg><script>alert(11)</script></svg>")})
    data = json.dumps(nb).encode()
    if case.edit == "latin1":
        data = data.replace(b"row-major", b"row-major \xe9\xff")
    return data


BIG = 300 * 1024**2  # a data file beyond every limit (file size, the old 256 MiB snapshot)
STRANGER = "stranger"  # a folder under submitted/ of nobody the gradebook knows


def build(root: Path, port: int, cases: list[Case]) -> None:
    copy_course(root)
    files: dict[tuple[str, str], bytes] = {}
    for student in GOOD:
        files[(student, "01-naive")] = json.dumps(
            submission("01-naive", {"naive": kernel_cell(released_stub("naive"), NAIVE)})
        ).encode()
    in_class = [c for c in cases if not kernel_only(c)]
    for case in in_class:
        files[(case.student, exercises.get(case.exercise).assignment)] = notebook_for(
            case, root, port)
    write_submissions(root, files)
    for case in filter(kernel_only, cases):  # beside the course: the clean grade's only
        folder = root.parent / "kernel-only" / case.student
        folder.mkdir(parents=True)
        (folder / f"{exercises.get(case.exercise).assignment}.ipynb").write_bytes(
            notebook_for(case))
    for case in in_class:
        folder = root / "autograder" / "submitted" / case.student / "01-naive"
        if case.edit == "timestamp":
            (folder / "timestamp.txt").write_text("2000-01-01 00:00:00.000000 UTC")
        if case.edit in ("big_file", "sparse_2g"):
            with open(folder / "data.bin", "wb") as f:  # sparse: no disk used
                f.truncate(BIG if case.edit == "big_file" else 2 << 30)
        if case.edit == "link_notebook":  # the clean grade would read the reference kernel
            (folder / "naive.ipynb").unlink()
            (folder / "naive.ipynb").symlink_to(root / "solutions" / "01-naive" / "naive.ipynb")
        if case.edit == "bad_timestamp":  # nbgrader fails the notebook: the file is named
            (folder / "timestamp.txt").write_bytes(b"not a date\x00\xff")
        if case.edit == "hard_link":  # a plain file to every reader: the solutions, copied
            os.link(root / "solutions" / "01-naive" / "naive.ipynb", folder / "ref.txt")
        if case.edit == "link_course":  # nbgrader's copy would bring the gradebook along
            (folder / "course").symlink_to(root / "autograder", target_is_directory=True)
            os.mkfifo(folder / "pipe")
    stranger = root / "autograder" / "submitted" / STRANGER / "01-naive"
    stranger.mkdir(parents=True)
    (stranger / "naive.ipynb").write_bytes(files[(GOOD[0], "01-naive")])


def fingerprints(root: Path) -> dict[str, tuple[int, str]]:
    """Size and a hash of the head and tail of every submitted file, and of the config."""
    out = {}
    files = [*(root / "autograder" / "submitted").rglob("*"),
             root / "autograder" / "nbgrader_config.py"]
    for path in files:
        if path.is_file():
            with open(path, "rb") as f:
                head = f.read(1 << 20)
                f.seek(max(0, path.stat().st_size - (1 << 20)))
                tail = f.read()
            out[str(path.relative_to(root))] = (
                path.stat().st_size, hashlib.sha256(head + tail).hexdigest())
    return out


def class_run(tmp_path_factory: pytest.TempPathFactory, shard: str) -> tuple[Path, dict]:
    """One shard of the corpus graded in a class run (and its kernel-only cases cleanly)."""
    cases = [c for c in CASES if shard_of(c) == shard]
    root = tmp_path_factory.mktemp(f"corpus-{shard}") / "course"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    build(root, server.getsockname()[1], cases)
    before = fingerprints(root)
    mp = pytest.MonkeyPatch()
    mp.setenv("TILELAB_GRADE_TIMEOUT", "60")  # an endless kernel is stopped within a minute
    mp.delenv("TILELAB_EMU_TIMEOUT", raising=False)  # the grader's own limits, as in a class
    try:
        summary = classroom.grade_class(
            root, backend="emu", progress=False, cell_timeout=10, gates=GATES
        )
        summary["kernel_only"] = {}
        for case in filter(kernel_only, cases):
            a = exercises.get(case.exercise).assignment
            path = root.parent / "kernel-only" / case.student / f"{a}.ipynb"
            summary["kernel_only"][case.student] = {
                v.exercise: v for v in grade_notebook(path, a, "emu", gates=GATES, sandboxed=True)
            }
    finally:
        mp.undo()
    try:
        server.accept()
        summary["connections"] = 1
    except BlockingIOError:
        summary["connections"] = 0
    server.close()
    summary["before"] = before
    summary["cases"], summary["shard"] = cases, shard
    return root, summary


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return class_run(tmp_path_factory, SHARD)


def verdicts(root: Path, student: str, assignment: str) -> dict[str, dict]:
    path = root / "autograder" / "feedback" / student / assignment / "tilelab_verdict.json"
    return {v["exercise"]: v for v in json.loads(path.read_text())["verdicts"]}


def gradebook_points(root: Path) -> dict[tuple[str, str], tuple[float, float]]:
    out = {}
    with Gradebook(f"sqlite:///{root / 'autograder' / 'gradebook.db'}", "tilelab") as gb:
        for sub in gb.db.query(SubmittedAssignment).all():
            grades = {g.name: g.score for nb in sub.notebooks for g in nb.grades}
            for e in exercises.ASSIGNMENTS[sub.assignment.name]:
                out[(sub.student.id, e)] = (grades[f"test_{e}_correct"],
                                            grades.get(f"test_{e}_speed", 0.0))
    return out


def test_every_case_is_caught_and_nobody_else_is_affected(corpus, record_property):
    root, summary = corpus
    points = gradebook_points(root)
    for student, graded in summary["kernel_only"].items():  # the clean grade's points
        for e, v in graded.items():
            p = scoring.points(v)  # what the class run writes into the gradebook
            points[(student, e)] = (p.correct, p.speed)
    cases = summary["cases"]
    caught, problems = 0, []
    for case in cases:
        if kernel_only(case):
            v = summary["kernel_only"][case.student][case.exercise].to_dict()
        else:
            a = exercises.get(case.exercise).assignment
            v = verdicts(root, case.student, a)[case.exercise]
        text = "\n".join(v["messages"])
        got = points.get((case.student, case.exercise))
        if re.search(case.message, text) and got == case.points:
            caught += 1
        else:
            problems.append((case.student, case.what, got, text[:600]))
    crashes = [f for f in summary["failures"] if f["step"] in ("internal", "grade", "export")]
    affected = [s for s in GOOD if points.get((s, "naive")) != (3, 0)]
    expected_rows = len(GOOD) + sum(not kernel_only(c) for c in cases)
    rows = len({s for s, _ in gradebook_points(root)})
    after = fingerprints(root)
    lost = [p for p, f in summary["before"].items() if after.get(p) != f]
    wrong = [c.student for c in cases if points.get((c.student, c.exercise)) != c.points]
    wrong += [s for s in {s for s, _ in points} if s not in GOOD and s not in
              {c.student for c in cases}]  # a score for someone who is not in the class
    record_property(SUMMARY_LINE, (  # printed at the end of the run (tests/conftest.py)
        f"corpus ({summary['shard']} shard): {len(cases)} cases tried, "
        f"{caught} caught with a clear message, "
        f"{len(crashes)} grader crashes, {len(affected)} other students affected, "
        f"{len(lost)} files lost, {len(wrong)} forged or wrong scores, "
        f"{expected_rows - rows} gradebook rows lost"
    ))
    assert not problems, "\n\n".join(map(str, problems))
    assert crashes == [] and affected == [] and rows == expected_rows
    assert lost == [] and wrong == []


def test_calibrated_gates_reach_every_verdict(corpus):
    root, summary = corpus
    assert summary["gates"]["naive"] == 3.5
    assert summary["gates"]["tiled"] == exercises.get("tiled").gate  # the registry default
    assert verdicts(root, "aaron", "01-naive")["naive"]["gate"] == 3.5


def test_feedback_never_shows_a_solution_or_a_system_file(corpus):
    root, summary = corpus
    solution_line = "acc += A[row * K + k] * B[k * N + col];"
    needs(summary, "s01", "p10")
    s01 = summary["kernel_only"]["s01"]["naive"]  # the class run's feedback is its verdict
    assert "root:x:0:0" not in scoring.report(s01) + json.dumps(s01.to_dict())
    for path in files_of(root / "autograder" / "feedback" / "p10"):
        text = path.read_text(errors="replace")
        assert "root:x:0:0" not in text
        assert solution_line not in text, path


def test_no_cell_connected_to_the_graders_machine(corpus):
    assert corpus[1]["connections"] == 0


def test_no_process_a_notebook_started_is_left(corpus):
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path("/proc", pid, "cmdline").read_bytes()
        except OSError:
            continue
        if MARKER.encode() in cmd:
            left.append(pid)
    assert left == []


def test_no_submission_config_or_feedback_of_another_was_touched(corpus):
    root, summary = corpus
    assert fingerprints(root) == summary["before"]  # the 300 MiB file included
    assert (root / "autograder" / "feedback" / "aaron" / "01-naive" / "naive.html").is_file()
    assert not (root / "autograder" / "submitted" / "ghost").exists()
    assert not Path("/tmp/tilelab-corpus-pwned").exists()


def test_only_students_of_the_gradebook_are_graded(corpus):
    root, summary = corpus
    assert summary["unknown_students"] == [STRANGER]
    assert any(f["step"] == "students" and STRANGER in f["error"] for f in summary["failures"])
    assert (STRANGER, "naive") not in gradebook_points(root)


# ------------------------------------------------------------------ on a GPU

GPU_CASES = {
    "endless loop": ("naive", KERNELS_OF["k04"], "longer than"),
    "out-of-bounds write": ("naive", KERNELS_OF["k05"], "elements wrong|memcheck|out of bounds"),
    "shared-memory over-ask": ("tiled", KERNELS_OF["k09"], "does not compile|shared"),
    "printf flood": ("naive", KERNELS_OF["k10"], "correct on|longer than"),
    **{name: (ex, fixture(name), message) for _, name, ex, message, points in EVIDENCE_CASES
       if points == (0, 0) and name != "naive-global_race"},
    "global race": ("naive", fixture("naive-global_race"), "not on the emulator"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(GPU_CASES))
def test_hostile_kernels_on_a_gpu_leave_it_usable(name, monkeypatch):
    exercise_id, source, message = GPU_CASES[name]
    monkeypatch.setenv("TILELAB_GRADE_TIMEOUT", "90")
    v = grade_source(exercise_id, source, backend_name="gpu", speed=False)
    print(f"{name}: {scoring.report(v)}")
    assert re.search(message, "\n".join(v.messages)), scoring.report(v)
    if name != "printf flood":
        assert not v.correct and v.points_correct == 0
    after = grade_source("naive", NAIVE, backend_name="gpu", speed=False)
    assert after.correct, scoring.report(after)  # the next student's grading is unaffected
