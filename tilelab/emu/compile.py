"""Compile translated sources with g++ into shared libraries, cached by content hash.

The library is loaded only in forked children: once here, to read its kernel descriptors
(kept next to it as JSON), and once per launch; never before it passed the checks of
``hostcalls`` (no host function called) and included only the prelude's headers.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import casts, elf, hostcalls, overloads, seccomp
from .errors import DID_NOT_COMPILE, CompileError
from .native import describe_library, run_forked, tagged
from .translate import translate

PRELUDE_DIR = Path(__file__).with_name("prelude")
#: g++'s check of each load's and store's alignment (tilelab_emu_align.h)
ALIGNMENT = "-fsanitize=alignment"
#: -fwrapv: signed arithmetic wraps as a GPU's 32-bit add and multiply do (else g++ may
#: widen `(long long)(a + b)` past INT_MAX, which overflow allows it to).
FLAGS = (
    "-std=c++17", "-O2", "-gdwarf-4", "-fPIC", "-shared", "-fvisibility=hidden",
    "-fno-threadsafe-statics", "-fno-strict-aliasing", "-fno-math-errno", "-fno-weak",
    "-fwrapv", "-fstack-clash-protection", "-Wfloat-conversion", "-Wl,-z,defs",
    # a misaligned load or store faults, as on a GPU (tilelab_emu_align.h): its handler is
    # the prelude's, and UBSan's runtime is not linked (nor TSan's, in analysis mode); the
    # libraries come after the objects (see _gxx), each linked only where it is used (else
    # the link takes twice as long)
    ALIGNMENT, "-nodefaultlibs", "-Wl,--as-needed", "-lstdc++", "-lm",
    "-lgcc_s", "-lc", "-lgcc",
)


#: CPU seconds each process of a g++ run may spend (a course kernel's build takes a second
#: or two; a check makes two builds, the graded and the analysis one): without
#: it, compile-time evaluation (constexpr, static_assert) could hold a check for minutes.
#: CPU time, not the wall clock: on a busy grading machine an honest build waits for a core
#: many times longer than it computes (two emulator runs compiling beside each other on a
#: loaded two-core machine once took an honest atomics kernel past a 30 s wall-clock limit,
#: and told its learner to simplify it)
COMPILE_SECONDS = 30.0
#: Wall-clock seconds one g++ run may take, however busy the machine (a stalled compiler)
COMPILE_WALL_SECONDS = 600.0
#: Runs the compiler with a CPU-time limit on each of its processes (the driver, cc1plus,
#: the assembler, the linker inherit it): ``python -S -c CAP SECONDS g++ ARGS...``
#: (never above a limit the process already has: a grading worker's own CPU limit stands)
_CPU_CAP = ("import os, resource, sys; n = int(sys.argv[1]); "
            "h = resource.getrlimit(resource.RLIMIT_CPU)[1]; "
            "h = n + 1 if h == resource.RLIM_INFINITY else h; "
            "resource.setrlimit(resource.RLIMIT_CPU, (min(n, h), min(n + 1, h))); "
            "os.execvp(sys.argv[2], sys.argv[2:])")
#: what the g++ driver says when the CPU limit ended one of its programs
_CPU_SPENT = re.compile(r"CPU time limit exceeded signal terminated program")


def _too_long() -> CompileError:
    return CompileError(
        f"g++ spent more than {COMPILE_SECONDS:g} s compiling this kernel (of its own work, "
        "however busy the machine; a course kernel compiles in a second or two): something "
        "makes the compiler work hard, such as long constexpr or static_assert evaluations "
        "or deep templates. Simplify it.")


def _run_gxx(argv: list[str], tmp: str, limited: bool = True) -> subprocess.CompletedProcess:
    """``argv`` (g++) in ``tmp``; where ``limited``, each of g++'s processes within
    :data:`COMPILE_SECONDS` of CPU time (else five minutes), else a CompileError."""
    cpu = int(COMPILE_SECONDS) if limited else 300
    try:
        proc = subprocess.run([sys.executable, "-S", "-c", _CPU_CAP, str(cpu), *argv],
                              capture_output=True, text=True, timeout=COMPILE_WALL_SECONDS,
                              check=False, cwd=tmp, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired:
        raise CompileError(f"g++ did not finish within {COMPILE_WALL_SECONDS:g} s (the machine "
                           "was too busy, or the compiler stalled): this says nothing about "
                           "the kernel; grade it again") from None
    if proc.returncode == -signal.SIGXCPU or (
            proc.returncode != 0 and _CPU_SPENT.search(proc.stderr or "")):
        if not limited:
            raise CompileError("g++ took more than 5 minutes of CPU time on this kernel; "
                               "simplify it.")
        raise _too_long()
    return proc


@dataclass(frozen=True)
class Library:
    """A compiled kernel library and what its descriptors say."""

    path: Path
    kernels: tuple[dict, ...]
    static_shared: int
    globals: tuple[dict, ...] = ()  # name, size, constant, init (hex) of each device global

    def kernel(self, name: str) -> tuple[int, dict] | None:
        """Index and descriptor of the kernel whose symbol (mangled name unless extern "C",
        as PyCUDA's ``get_function`` wants it) is ``name``."""
        for i, k in enumerate(self.kernels):
            if k.get("symbol", k["name"]) == name:
                return i, k
        return None


def cache_dir() -> Path:
    """``$TILELAB_CACHE/emu``, else ``~/.cache/tilelab/emu`` (a temp dir if unwritable)."""
    base = os.environ.get("TILELAB_CACHE")
    root = Path(base) / "emu" if base else Path.home() / ".cache" / "tilelab" / "emu"
    try:
        root.mkdir(parents=True, exist_ok=True)
        if os.access(root, os.W_OK):
            return root
    except OSError:
        pass
    root = Path(tempfile.gettempdir()) / f"tilelab-emu-{os.getuid()}"
    root.mkdir(parents=True, exist_ok=True)
    return root


@functools.cache
def compiler() -> tuple[str, str]:
    """The C++ compiler (``$TILELAB_EMU_CXX`` or g++) and what names its version in the
    cache's keys: its file's real path, size and time (a new version is a new file; read
    without running it)."""
    cxx = os.environ.get("TILELAB_EMU_CXX", "g++")
    found = shutil.which(cxx)
    if not found:
        raise CompileError(f"The CPU emulator needs a C++ compiler, and {cxx!r} was not found. "
                           "Install g++ (Debian/Ubuntu: apt install g++).")
    st = os.stat(found)
    return cxx, f"{os.path.realpath(found)} {st.st_size} {st.st_mtime_ns}"


def compiler_version(cxx: str) -> str:
    """The first line of ``cxx --version`` (for a message)."""
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return (out.stdout.splitlines() or [cxx])[0]


@functools.cache
def _prelude_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(PRELUDE_DIR.glob("*.h")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


# Every memory access reaches the hooks of tilelab_emu_tsan.h (analysis mode, and kernels with
# volatile accesses to keep the lanes of a warp in step); the TSan runtime is not linked.
TSAN_FLAGS = (
    "-fsanitize=thread", "--param=tsan-distinguish-volatile=1",
    "--param=tsan-instrument-func-entry-exit=0", "-DTILELAB_TSAN",
)


@functools.cache
def fma_flags() -> tuple[str, ...] | None:
    """The g++ flags that let ``a * b + c`` become one fused multiply-add, as nvcc's
    default ``--fmad=true`` does, or None on a CPU without FMA (x86-64 before Haswell: there
    products are rounded before the add, and results may differ from a GPU's in the last
    bit)."""
    machine = os.uname().machine
    if machine not in ("x86_64", "AMD64"):
        return ("-ffp-contract=fast",)  # aarch64, ppc64le, s390x, riscv64 have FMA
    try:
        flags = re.search(r"^flags\s*:(.*)$", Path("/proc/cpuinfo").read_text(), re.M)
    except OSError:
        flags = None
    if not (flags and "fma" in flags.group(1).split()):
        return None
    # g++'s tuning for some x86 CPUs (znver, and -mtune=generic from GCC 13) leaves a loop's
    # accumulating a += x * y unfused ("FMA chains"); nvcc fuses it, so g++ must too.
    keep_chains = () if "clang" in compiler()[1].lower() else ("--param=avoid-fma-max-bits=0",)
    return ("-ffp-contract=fast", "-mfma", *keep_chains)


def _flags(analysis: bool, lockstep: bool = False, fmad: bool = True) -> list[str]:
    # Analysis mode records the source's accesses: no auto-vectorised loops, and a float4
    # copied whole (no scalar replacement of aggregates), as a GPU loads it; and no call
    # made a jump, so that an atomic's return address is its caller's line.
    contract = (fmad and fma_flags()) or ("-ffp-contract=off",)
    return [*FLAGS, *contract,
            *(["-DTILELAB_ANALYSIS", "-fno-tree-vectorize", "-fno-tree-sra",
               "-fno-optimize-sibling-calls"]
              if analysis else []),
            *(TSAN_FLAGS if analysis or lockstep else ())]


def _digest(parts: list) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:40]


def _gxx(cxx: str, flags: list[str], code: str, tmp: str, limited: bool = True,
         pch: Path | None = None, runtime: Path | None = None,
         ) -> tuple[subprocess.CompletedProcess, set[str], str]:
    """Compile ``code`` to ``tmp/lib.so``: the process, the headers read, the other stderr
    (``limited``: see :func:`_run_gxx`; ``pch``: a folder of :func:`prelude_pch`, searched
    before the prelude's own; ``runtime``: :func:`runtime_object`'s object, linked in)."""
    (Path(tmp) / "kernel.cpp").write_text(code)
    first = ["-I", str(pch)] if pch is not None else []
    linked = [str(runtime)] if runtime is not None else []
    libs = [f for f in flags if f.startswith("-l")]  # after what needs them
    proc = _run_gxx([cxx, *(f for f in flags if f not in libs), "-H", *first, "-I",
                     str(PRELUDE_DIR), "kernel.cpp", *linked, *libs, "-o", "lib.so"], tmp, limited)
    headers, rest, guards = set(), [], False
    for line in proc.stderr.splitlines():
        m = re.match(r"^[.!x]+ (.+)$", line)  # -H: one line per file read
        if m:
            headers.add(os.path.realpath(os.path.join(tmp, m.group(1))))
        elif line == "Multiple include guards may be useful for:":  # -H's summary
            guards = True
        elif not (guards and line and " " not in line):
            guards = False
            rest.append(line)
    return proc, headers, "\n".join(rest) + "\n" if rest else ""


@dataclass(frozen=True)
class PreludeNeeds:
    """What a build of the prelude alone imports (dynamic symbols) and includes."""

    symbols: frozenset[str]
    headers: frozenset[str]

    @functools.cached_property
    def _dirs(self) -> frozenset[str]:
        return frozenset(os.path.dirname(h) for h in self.headers)

    def allows_header(self, path: str) -> bool:
        """Whether ``path`` (a real path) is a header of the prelude's or one beside them."""
        return path in self.headers or os.path.dirname(path) in self._dirs


_NEEDS: dict[str, PreludeNeeds] = {}


def prelude_needs(analysis: bool, lockstep: bool = False) -> PreludeNeeds:
    """Compile ``hostcalls.PROBE_SOURCE`` once per prelude, compiler and mode (cached)."""
    cxx, version = compiler()
    flags = [f for f in _flags(analysis, lockstep) if not f.startswith("-g")]  # -g: same code
    key = _digest(["prelude-needs", 1, hostcalls.PROBE_SOURCE, flags, version,
                   _prelude_digest(), str(PRELUDE_DIR)])
    if key in _NEEDS:
        return _NEEDS[key]
    root = cache_dir()
    path = root / f"prelude-{key}.json"
    try:
        info = _first_json(f"prelude-{key}.json", [root, *base_caches()])
        needs = PreludeNeeds(frozenset(info["symbols"]), frozenset(info["headers"]))
    except (OSError, ValueError, KeyError, TypeError):
        code = translate(hostcalls.PROBE_SOURCE, analysis=analysis).code
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            proc, headers, stderr = _gxx(cxx, flags, code, tmp)
            if proc.returncode != 0:
                raise CompileError(f"The CPU emulator's prelude did not compile with "
                                   f"{compiler_version(cxx)}; "
                                   f"g++ said:\n{stderr[-4000:]}", stderr) from None
            symbols = hostcalls.undefined_symbols(Path(tmp) / "lib.so")
            needs = PreludeNeeds(frozenset(symbols), frozenset(headers))
            tmp_path = Path(tmp) / "needs.json"
            tmp_path.write_text(json.dumps({"symbols": sorted(symbols),
                                            "headers": sorted(headers)}))
            os.replace(tmp_path, path)
    _NEEDS[key] = needs
    return needs


#: The prelude precompiled (g++ reads it in place of ``tilelab_emu.h`` and what it includes).
PCH = "tilelab_emu.h.gch"


def _compile_only(flags: list[str]) -> list[str]:
    """``flags`` without the linker's: those a precompiled header is built with."""
    return [f for f in flags
            if f not in ("-shared", "-nodefaultlibs") and not f.startswith(("-Wl,", "-l"))]


def _made_once(kind: str, flags: list[str], product: str, argv: list[str],
               make: bool | None) -> Path | None:
    """A folder holding ``product``, made once per ``kind``, compile flags, compiler and
    prelude by running ``argv`` (g++, in the folder): found in this process's cache or a
    base cache, or, where ``make`` (by default: outside a sandbox, whose caches are the base
    it is given and a cache of its own that ends with it), made now into this process's
    cache. None where there is none, or it could not be made."""
    cxx, version = compiler()
    key = _digest([kind, 1, _compile_only(flags), version, _prelude_digest(),
                   str(PRELUDE_DIR)])
    root, name = cache_dir(), f"{kind}-{key}"
    for folder in (root, *base_caches()):
        if (folder / name / product).is_file():
            return folder / name
    if not (make if make is not None else not base_caches()):
        return None
    building = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        if _run_gxx([cxx, *argv], str(building), limited=False).returncode != 0:
            return None
        with contextlib.suppress(OSError):  # another process's may be there first
            os.rename(building, root / name)
        return root / name if (root / name / product).is_file() else None
    finally:
        shutil.rmtree(building, ignore_errors=True)


def prelude_pch(flags: list[str], make: bool | None = None) -> Path | None:
    """A folder holding the prelude precompiled with ``flags``, so that a kernel's build
    parses no header (see :func:`_made_once` for where it is found and when made). None
    where there is none: g++ then reads the headers themselves, and so it does where a
    precompiled header does not fit the build (g++ checks it)."""
    return _made_once("pch", flags, PCH, [*_compile_only(flags), "-x", "c++-header",
                                          str(PRELUDE_DIR / "tilelab_emu.h"), "-o", PCH], make)


#: The prelude's runtime (scheduler, fault handler, analyses, memory hooks) as one object.
RUNTIME = "tilelab_emu_rt.o"
#: Defined in a kernel's build that links :data:`RUNTIME`: its unit declares the runtime.
SPLIT = "-DTILELAB_SPLIT"


def runtime_object(flags: list[str], make: bool | None = None) -> Path | None:
    """The prelude's out-of-line code and variables compiled once with ``flags`` (the
    header alone), for a kernel's build to link instead of compiling them again: most of a
    build's time, whatever the kernel (see :func:`_made_once` for where it is found and
    when made). None where there is none: the kernel's build then compiles it too. The
    runtime's own loads and stores (the scheduler's, a fiber switch's) are not checked for
    their alignment: only the kernel's unit is."""
    flags = [f for f in flags if f != ALIGNMENT]
    found = _made_once("rt", flags, RUNTIME,
                       [*_compile_only(flags), "-include", str(PRELUDE_DIR / "tilelab_emu.h"),
                        "-x", "c++", "-c", os.devnull, "-o", RUNTIME], make)
    return found / RUNTIME if found is not None else None


def warm() -> None:
    """Build what every build of the common kinds needs first: the prelude's probe, its
    runtime object and precompiled header, for the graded build and the analysis build (a
    base cache)."""
    for analysis in (False, True):
        prelude_needs(analysis)
        flags = _flags(analysis)
        if runtime_object(flags, make=True) is not None:
            prelude_pch([*flags, SPLIT], make=True)
        else:
            prelude_pch(flags, make=True)


def base_caches(part: str = "emu") -> list[Path]:
    """Read-only caches to look in after :func:`cache_dir` (``$TILELAB_CACHE_BASE``: a
    grading sandbox finds the prelude's probe there, built once per machine, and in a
    learner's own check that learner's earlier builds), each at its folder ``part`` (the
    GPU runtime's PyCUDA builds are beside the emulator's)."""
    return [Path(p) / part for p in os.environ.get("TILELAB_CACHE_BASE", "").split(os.pathsep)
            if p]


def _first_json(name: str, roots: list[Path]) -> dict:
    for root in roots:
        try:
            return json.loads((root / name).read_text())
        except (OSError, ValueError):
            continue
    raise OSError(f"{name} is in no cache")


def _check_imports(path: Path, needs: PreludeNeeds, source: str,
                   symbols: elf.Symbols | None = None) -> None:
    """Raise ``CompileError`` if the library imports anything a kernel could not call, or
    defines the name of a library function it could import
    (:func:`hostcalls.library_names_defined`); ``symbols``: its symbols, where already read."""
    if symbols is None:
        symbols = hostcalls.library_symbols(path)
    bad = {s for s in symbols.imported
           if s not in needs.symbols and not hostcalls.kernel_callable(s)}
    if bad:
        raise hostcalls.host_call_error(bad, source)
    if named := hostcalls.library_names_defined(symbols.defined, needs.symbols):
        raise hostcalls.library_name_error(named, source)


def _cached(so: Path, meta: Path) -> tuple[dict, elf.Symbols] | None:
    """A cached build's description and symbols, or None where the entry is
    missing or damaged (an empty or truncated library or description: a full disk, a
    process killed while it wrote): such an entry is built again, never reported as the
    learner's error."""
    try:
        info = json.loads(meta.read_text(encoding="utf-8"))
        if not (isinstance(info, dict) and isinstance(info.get("kernels"), list)
                and isinstance(info.get("static_shared"), int)):
            return None
        symbols = elf.read_symbols(so)  # a library pyelftools can read whole
    except (OSError, ValueError):  # elf.Unreadable and json's errors are ValueErrors
        return None
    return info, symbols


def build(code: str, *, analysis: bool, defines: tuple[str, ...] = (), source: str = "",
          lockstep: bool = False, fmad: bool = True) -> Library:
    """Compile ``code`` (a translation of ``source``) or reuse the cached library.

    ``fmad`` contracts ``a * b + c`` into fused multiply-adds (nvcc's ``--fmad``).

    Names only the prelude may use are poisoned after its ``#include``; the library is
    checked for host-function imports before it is ever loaded (and again when cached).
    """
    cxx, version = compiler()
    needs = prelude_needs(analysis, lockstep)
    reserved = hostcalls.poisoned(needs.symbols)
    for d in defines:  # -DF=write would reach a poisoned name unseen
        for word in re.findall(r"[A-Za-z_]\w*", d.partition("=")[2]):
            if word in reserved:
                raise CompileError(f"The option {d} names `{word}`, which kernels cannot use.")
    head, _, rest = code.partition("\n")
    if head != '#include "tilelab_emu.h"':
        raise CompileError("internal error: a translation must start with the prelude.")
    code = f"{head}\n{hostcalls.poison_pragma(reserved)}\n{rest}"
    flags = [*_flags(analysis, lockstep, fmad), *defines]
    # a -D may change what the prelude says: such a build compiles all of it, in one unit
    runtime = None if defines else runtime_object(flags)
    if runtime is not None:
        flags.append(SPLIT)
    key = _digest([code, flags, version, _prelude_digest()])
    root = cache_dir()
    for folder in (root, *base_caches()):  # a read-only base's builds are used in place
        so, meta = folder / f"{key}.so", folder / f"{key}.json"
        if (found := _cached(so, meta)) is not None:
            info, symbols = found
            _check_imports(so, needs, source, symbols)
            return Library(so, tuple(info["kernels"]), info["static_shared"],
                           tuple(info.get("globals", ())))
    so, meta = root / f"{key}.so", root / f"{key}.json"
    pch = None if defines else prelude_pch(flags)  # a -D may change what the prelude says
    gch = os.path.realpath(pch / PCH) if pch is not None else None
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        out = Path(tmp) / "lib.so"
        proc, headers, stderr = _gxx(cxx, flags, code, tmp, True, pch, runtime)
        foreign = sorted(h for h in headers if not needs.allows_header(h) and h != gch)
        if foreign:  # never show what g++ said: it may quote the file
            raise CompileError(f"kernel.cu includes {foreign[0][:120]}, which is not allowed in "
                               "kernels run by the CPU emulator. Remove the #include.")
        if proc.returncode == 0 and casts.has_implicit_int_conversions(stderr):
            # convert as a GPU does where a floating value becomes an integer unwritten
            code = casts.rewrite_implicit(code, _diagnostics(cxx, flags, code, tmp))
            proc, headers, stderr = _gxx(cxx, flags, code, tmp, True, pch, runtime)
        if proc.returncode != 0:
            if found := hostcalls.poisoned_names(stderr):
                raise hostcalls.host_call_error(found, source, found)
            if (refusal := overloads.nvcc_refusal(stderr, source)) is not None:
                raise refusal
            msg, lines = clean_errors(stderr, tmp, source)
            raise CompileError(msg, stderr, lines)
        _check_imports(out, needs, source)
        info = _describe(out)
        os.replace(out, so)
        tmp_meta = Path(tmp) / "meta.json"
        tmp_meta.write_text(json.dumps(info))
        os.replace(tmp_meta, meta)
    return Library(so, tuple(info["kernels"]), info["static_shared"],
                   tuple(info.get("globals", ())))


def _diagnostics(cxx: str, flags: list[str], code: str, tmp: str,
                 limited: bool = True) -> list[dict]:
    """g++'s warnings on ``code`` as JSON (with source ranges); [] if unreadable
    (``limited``: see :func:`_run_gxx`)."""
    (Path(tmp) / "kernel.cpp").write_text(code)
    check = [f for f in flags if f != "-shared" and not f.startswith("-Wl,")]
    proc = _run_gxx([cxx, *check, "-fsyntax-only", "-fdiagnostics-format=json", "-I",
                     str(PRELUDE_DIR), "kernel.cpp"], tmp, limited)
    try:
        found = json.loads(proc.stderr or "[]")
    except ValueError:
        return []
    return found if isinstance(found, list) else []
#: Seconds a compiled module may take to load (its global constructors run then): a
#: sound one loads in milliseconds.
LOAD_SECONDS = 10.0


def _describe(path: Path) -> dict:
    confined = seccomp.require()
    seccomp.prepare(confined)

    def child(fd: int, tag: bytes) -> None:
        seccomp.install_loading_filter(confined)  # a constructor in the source runs under it
        os.write(fd, tagged(tag, json.dumps(describe_library(str(path))).encode()))

    res = run_forked(child, timeout=LOAD_SECONDS)
    if res.timed_out:
        raise CompileError(f"The compiled kernel module did not finish loading within "
                           f"{LOAD_SECONDS:g} s: code runs at load time (a global object with "
                           "a constructor?) and does not end. Kernels cannot; remove it.")
    if res.forged:
        raise CompileError("The compiled kernel module wrote on the emulator's own report "
                           "channel while loading (code run at load time, such as a global "
                           "object with a constructor?); kernels cannot. Remove it.")
    try:
        info = json.loads(res.report)
    except ValueError:
        info = {}
    if "kernels" not in info:
        why = info.get("message") or (f"signal {res.signal}" if res.signal else "no report")
        if res.signal == signal.SIGSYS:
            why = "it tried to call the operating system while loading; kernels cannot"

        raise CompileError(f"The compiled kernel module failed to load ({why}). Does the source "
                           "run code at load time (a global object with a constructor)?")
    return info


_DIAG = re.compile(r"^(?P<file>[^:\n]*):(?P<line>\d+):(?:\d+:)? (?P<kind>fatal error|error|"
                   r"warning|note): (?P<text>.*)$")


#: the linker's error at a line of kernel.cu (``kernel.cu:4:(.text+0x10): relocation ...``)
_LINK = re.compile(r"kernel\.cu:(\d+):\([^)]*\): (.*)$")


def clean_errors(stderr: str, tmp: str = "", source: str = "") -> tuple[str, tuple[int, ...]]:
    """g++'s errors about the learner's ``kernel.cu`` (with its source lines), minus noise."""
    user: list[str] = []
    other: list[str] = []
    lines: set[int] = set()
    src = source.replace("\r\n", "\n").split("\n")
    target = None
    warning = False  # inside a warning and its notes: g++'s warnings are not shown
    for raw in stderr.splitlines():
        text = raw.replace(str(PRELUDE_DIR) + "/", "<tilelab prelude>/")
        if tmp:
            text = text.replace(tmp + "/", "")
        m = _DIAG.match(text)
        if m and (m.group("kind") == "warning" or (warning and m.group("kind") == "note")):
            warning, target = True, None
            continue
        if m or text.startswith("kernel.cu: ") or re.match(r"^In file included from", text):
            warning = False
        if m:
            if m.group("file") == "kernel.cu":
                n = int(m.group("line"))
                lines.add(n)
                user.append(text)
                if 0 < n <= len(src) and m.group("kind") != "note":
                    user.append(f"{n:>5} | {src[n - 1]}")
                target = None
            else:
                target = other if m.group("kind") != "note" and "kernel.cpp" not in \
                    m.group("file") else None
                if target is not None:
                    target.append(text)
        elif text.startswith("kernel.cu: "):
            user.append(text)
            target = None
        elif "undefined reference to" in text:
            ref = re.search(r"(kernel\.cu:(\d+): )?undefined reference to .*", text)
            if ref:
                user.append(ref.group(0) + " (declared but never defined?)")
                if ref.group(2):
                    lines.add(int(ref.group(2)))
            target = None
        elif link := _LINK.search(text):  # the linker's, on a line of kernel.cu
            n = int(link.group(1))
            lines.add(n)
            user.append(f"kernel.cu:{n}: the link failed: {link.group(2).strip()}"
                        + (" (static data past 2 GiB: a __device__ or __shared__ array too "
                           "large?)" if "relocation" in link.group(2) else ""))
            target = None
        elif re.match(r"^(In file included from|\s+from )", text):
            target = None
        elif target is not None and re.match(r"^\s+(\d+\s*)?\|", text):
            target.append(text)
    keep = user if lines or user else other
    if not user and any("<tilelab entry points>" in ln for ln in other):
        keep = ["the source ends inside an unclosed { or ( (or a kernel's parameter list could "
                "not be used); g++ said:", *keep]
    if not keep:
        keep = [ln for ln in stderr.replace(tmp + "/", "").splitlines()
                if "collect2" not in ln][:60]
    return DID_NOT_COMPILE + "\n".join(keep), tuple(sorted(lines))
