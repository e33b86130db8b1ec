"""The grading sandbox's read-only caches: the base cache built once under a name made of
its content (two processes racing leave one copy and no temporary folder), the emulator
finding builds in a read-only base, the learner's own builds bound read-only in a learner's
own check and never in a class run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import tilelab.emu as emu
from tilelab.catalog import exercises
from tilelab.emu.compile import cache_dir
from tilelab.grading import sandbox
from tilelab.isolation import basecache
from tilelab.isolation import bubblewrap as bwrap

needs_sandbox = pytest.mark.skipif(bwrap.problem() is not None,
                                   reason=f"no sandbox here: {bwrap.problem()}")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh ``$TILELAB_CACHE`` (user cache) for this test, no base cache from another."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TILELAB_CACHE", str(root))
    for name in ("TILELAB_CACHE_BASE", "TILELAB_CLASS_GRADING", "TILELAB_VERDICT_CACHE",
                 "TILELAB_SANDBOXED"):
        monkeypatch.delenv(name, raising=False)
    basecache.base_cache.cache_clear()
    yield root
    basecache.base_cache.cache_clear()


def reference(exercise_id: str) -> str:
    ex = exercises.get(exercise_id)
    return ex.reference.source().replace(ex.reference.name + "(", ex.kernel + "(")


def test_pycudas_folder_is_the_runtimes_and_a_checks_process_never_loads_the_emulator():
    from tilelab.device import runtime

    assert basecache.PYCUDA_CACHE == runtime.PYCUDA_CACHE
    code = "import sys, tilelab.grading.sandbox; print('tilelab.emu' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "False"


def test_the_grading_worker_loads_no_notebook_or_plotting_package():
    # every check starts one: what it imports, it pays for on every check
    code = ("import sys, tilelab.grading.worker, tilelab.grading.pipeline; print(sorted("
            "{m.split('.')[0] for m in sys.modules} & {'nbgrader', 'nbformat', 'matplotlib', "
            "'jupyter_client', 'IPython', 'dask', 'distributed', 'sqlalchemy', 'pandas'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert out.stdout.strip() == "[]"


def test_the_key_changes_with_the_backend_and_the_emulators_sources(tmp_path, monkeypatch):
    assert basecache.key("emu") == basecache.key("emu")
    assert basecache.key("emu") != basecache.key("gpu")
    fake = tmp_path / "emu"
    (fake / "prelude").mkdir(parents=True)
    (fake / "prelude" / "tilelab_emu.h").write_text("// one prelude\n")
    monkeypatch.setattr(basecache, "EMU_DIR", fake)
    before = basecache.key("emu")
    (fake / "prelude" / "tilelab_emu.h").write_text("// another prelude\n")
    assert basecache.key("emu") != before


@needs_sandbox
@pytest.mark.slow
def test_two_processes_racing_build_one_base_cache_and_leave_no_temporary_folder(cache):
    code = ("from tilelab.isolation import basecache; import sys; "
            "print(basecache.base_cache(sys.argv[1]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", code, "emu"], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outs = {p.communicate(timeout=300)[0].strip() for p in procs}
    folder = cache / "base" / basecache.key("emu")
    assert outs == {str(folder)}
    assert [p.name for p in (cache / "base").iterdir()] == [folder.name]  # no temp left
    probes = list((folder / "emu").glob("prelude-*.json"))
    assert len(probes) == 2  # the probe of the plain and of the analysed build
    assert len(list((folder / "emu").glob("pch-*/tilelab_emu.h.gch"))) == 2  # precompiled
    assert not list((folder / "emu").glob(".pch-*"))  # no folder of a build left
    assert basecache.base_cache("emu") == folder  # found, not built again
    assert [p.name for p in (folder / "emu").glob("prelude-*.json")] == [p.name for p in probes]


@pytest.mark.slow
def test_a_build_with_the_precompiled_prelude_and_runtime_is_the_build_without_them(
        cache, monkeypatch):
    """g++ reads the prelude precompiled and links its runtime compiled once (both made
    once, in the cache, outside a sandbox): the library's kernels, shared memory, results
    and analysis are those of a build that reads the headers and compiles the runtime with
    the kernel, and an #include of anything else is refused as before."""
    import numpy as np

    from tilelab.device.runtime import get_runtime
    from tilelab.emu import compile as emu_compile
    from tilelab.emu.errors import CompileError
    from tilelab.emu.translate import translate
    from tilelab.grading.correctness import launch

    src = reference("tiled")
    flags = emu_compile._flags(False)
    runtime = emu_compile.runtime_object(flags)
    assert runtime is not None and runtime.is_file()
    assert emu_compile.runtime_object(flags) == runtime  # found, not made again
    pch = emu_compile.prelude_pch([*flags, emu_compile.SPLIT])
    assert pch is not None and (pch / emu_compile.PCH).is_file()
    assert emu_compile.prelude_pch([*flags, emu_compile.SPLIT]) == pch
    seen = []
    real = emu_compile._gxx

    def gxx(*args):
        proc, headers, stderr = real(*args)
        seen.append((headers, args))
        return proc, headers, stderr

    monkeypatch.setattr(emu_compile, "_gxx", gxx)
    code = translate(src).code
    split = emu_compile.build(code, analysis=False, source=src)
    headers, args = seen[-1]
    assert headers == {os.path.realpath(pch / emu_compile.PCH)}  # no header read
    assert args[-1] == runtime and emu_compile.SPLIT in args[1]
    ex, shape, rt = exercises.get("tiled"), (64, 96, 64), get_runtime("emu")
    inputs = ex.problem.make_inputs(shape, np.random.default_rng(3))

    def result() -> np.ndarray:
        fn = rt.SourceModule(src + f"// {len(seen)}\n").get_function(ex.kernel)
        return launch(rt, fn, ex.problem, ex.launch, shape, inputs)

    def analysis() -> tuple:  # what a race, bank and traffic report says, in any block order
        from support.emu_samples import TILED_MATMUL, without_barrier

        import tilelab.emu as cuda

        n = 32
        a, b = (np.arange(n * n, dtype=np.float32).reshape(n, n) for _ in range(2))
        r = cuda.analyze(without_barrier(TILED_MATMUL, 1) + f"// {len(seen)}\n",
                         "matmul_tiled", cuda.In(a), cuda.In(b),
                         cuda.Out(np.zeros((n, n), np.float32)), np.int32(n), np.int32(n),
                         np.int32(n), block=(16, 16, 1), grid=(2, 2))
        return (sorted((x.array, sorted(x.lines), sorted(x.kinds)) for x in r.races),
                r.bank_lines, r.traffic)

    got, analysed = result(), analysis()
    assert analysed[0] and analysed[1] and analysed[2]  # races, banks and traffic found
    with monkeypatch.context() as one_unit:
        one_unit.setattr(emu_compile, "prelude_pch", lambda flags: None)
        one_unit.setattr(emu_compile, "runtime_object", lambda flags: None)
        whole = emu_compile.build(code + "// read the headers\n", analysis=False, source=src)
        headers, args = seen[-1]
        assert len(headers) > 100 and args[-1] is None and emu_compile.SPLIT not in args[1]
        assert np.array_equal(result(), got)
        assert analysis() == analysed
    assert (split.kernels, split.static_shared) == (whole.kernels, whole.static_shared)
    monkeypatch.setattr(emu_compile, "_gxx", real)
    with pytest.raises(CompileError, match="not allowed"):
        emu_compile.build(translate('#include "/etc/hostname"\n' + src).code,
                          analysis=False, source=src)


def test_the_emulator_uses_a_build_in_a_read_only_base_in_place(tmp_path, monkeypatch):
    from tilelab import emu

    src = reference("naive")
    first = tmp_path / "first"
    monkeypatch.setenv("TILELAB_CACHE", str(first))
    monkeypatch.delenv("TILELAB_CACHE_BASE", raising=False)
    built = emu.SourceModule(src).library.path
    assert built.parent == first / "emu"
    os.chmod(first / "emu", 0o555)
    try:
        second = tmp_path / "second"
        monkeypatch.setenv("TILELAB_CACHE", str(second))
        monkeypatch.setenv("TILELAB_CACHE_BASE", str(first))
        assert emu.SourceModule(src).library.path == built
        assert not list((second / "emu").glob("*.so"))  # nothing compiled again
    finally:
        os.chmod(first / "emu", 0o755)


def test_only_the_emulators_builds_come_back_from_a_check(tmp_path, cache):
    made = tmp_path / "work" / ".cache" / "emu"
    made.mkdir(parents=True)
    good = "a" * 40
    (made / f"{good}.so").write_bytes(b"\x7fELF a build")
    (made / f"{good}.json").write_text("{}")
    (made / f"ptxas-{'b' * 40}.json").write_text("{}")
    (made / "prelude-xyz.json").write_text("{}")  # the base cache's, not a build
    (made / "notes.txt").write_text("not a build")
    os.symlink("/etc/passwd", made / f"{'c' * 40}.json")
    cubins = tmp_path / "work" / ".cache" / "pycuda"
    cubins.mkdir()
    (cubins / f"{'d' * 32}.cubin").write_bytes(b"a cubin PyCUDA wrote")
    os.symlink(tmp_path / "elsewhere.cubin", cubins / f"{'e' * 32}.cubin")  # a base's, linked
    own = basecache.own_cache()
    own.mkdir(parents=True)
    (own / f"{good}.json").write_text('{"already": 1}')
    assert basecache.keep_builds(tmp_path / "work") == 3
    assert sorted(p.name for p in own.iterdir()) == sorted(
        [f"{good}.so", f"{good}.json", f"ptxas-{'b' * 40}.json"])
    assert json.loads((own / f"{good}.json").read_text()) == {"already": 1}  # kept
    assert [p.name for p in basecache.own_cache("pycuda").iterdir()] == [f"{'d' * 32}.cubin"]


@pytest.mark.parametrize("variable", ["TILELAB_CLASS_GRADING", "TILELAB_VERDICT_CACHE",
                                      "TILELAB_SANDBOXED"])
def test_a_class_run_never_reads_a_learners_own_builds(cache, monkeypatch, variable):
    assert basecache.own_builds_allowed()
    monkeypatch.setenv(variable, "1")
    assert not basecache.own_builds_allowed()


@needs_sandbox
@pytest.mark.slow
def test_a_learners_check_keeps_its_builds_and_a_class_runs_check_does_not(cache, monkeypatch):
    src = reference("naive")
    monkeypatch.setenv("TILELAB_CLASS_GRADING", "1")
    v = sandbox.grade_source("naive", src, backend_name="emu", sandboxed=True)
    assert v.correct, v.messages
    assert not list(basecache.own_cache().glob("*.so"))  # a class run keeps nothing
    monkeypatch.delenv("TILELAB_CLASS_GRADING")
    v = sandbox.grade_source("naive", src, backend_name="emu", sandboxed=True)
    assert v.correct, v.messages
    kept = sorted(p.name for p in basecache.own_cache().glob("*.so"))
    assert len(kept) == 2  # the candidate's build and its analysed build
    # inside the next check's sandbox the emulator finds them, read-only, in place
    read_only, env = basecache.binds("emu", own=True)
    code = ("from tilelab import emu; import sys; "
            "print(emu.SourceModule(sys.stdin.read()).library.path)")
    with bwrap.private_folder() as work:
        res = bwrap.run([sys.executable, "-c", code], work, read_only=read_only, env=env,
                        stdin=src.encode(), limits=bwrap.Limits(wall_seconds=120))
    assert res.returncode == 0, res.stderr.decode()[-2000:]
    path = res.stdout.decode().strip()
    assert path.startswith(f"{basecache.OWN}/emu/") and path.rsplit("/", 1)[1] in kept
    assert not [p for p in os.listdir(cache / "base") if p.startswith(".")]  # no temp left


@needs_sandbox
@pytest.mark.slow
def test_a_build_folder_a_killed_process_left_is_removed_by_the_next_build(cache):
    top = cache / "base"
    old, fresh = top / ".abandoned-by-a-dead-build", top / ".being-built-now"
    for path in (old, fresh):
        path.mkdir(parents=True)
    os.utime(old, (0, 0))
    assert basecache.base_cache("emu") == top / basecache.key("emu")
    assert not old.exists() and fresh.exists()  # another process may be building that one


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["empty library", "truncated library", "truncated description"])
def test_a_damaged_cache_entry_is_built_again_not_blamed_on_the_kernel(cache, damage):
    """A cached build left empty or cut short (a full disk, a process killed while it wrote)
    is built again: the learner never gets "it does not compile" or an internal error for it
    (seen by a red team: the course's own naive kernel scored 0 until the cache was wiped)."""
    src = reference("naive")
    emu.SourceModule(src).get_function("matmul_naive")
    libs = sorted(cache_dir().glob("*.so"))
    assert libs
    for so in libs:
        meta = so.with_suffix(".json")
        if damage == "empty library":
            so.write_bytes(b"")
        elif damage == "truncated library":
            so.write_bytes(so.read_bytes()[:200])
        else:
            meta.write_text(meta.read_text()[:10])
    mod = emu.SourceModule(src)  # built again, and it runs
    assert mod.get_function("matmul_naive")
    assert all(so.stat().st_size > 1000 for so in cache_dir().glob("*.so"))
