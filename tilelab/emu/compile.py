"""Compile translated sources with g++ into shared libraries, cached by content hash.

The library is loaded only in forked children: once here, to read its kernel descriptors
(kept next to it as JSON), and once per launch.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .errors import CompileError
from .native import describe_library, run_forked

PRELUDE_DIR = Path(__file__).with_name("prelude")
FLAGS = (
    "-std=c++17", "-O2", "-gdwarf-4", "-fPIC", "-shared", "-fvisibility=hidden",
    "-fno-threadsafe-statics", "-fno-strict-aliasing", "-fno-math-errno",
    "-fstack-clash-protection", "-w", "-Wl,-z,defs",
)


@dataclass(frozen=True)
class Library:
    """A compiled kernel library and what its descriptors say."""

    path: Path
    kernels: tuple[dict, ...]
    static_shared: int

    def kernel(self, name: str) -> tuple[int, dict] | None:
        """Index and descriptor of kernel ``name``."""
        for i, k in enumerate(self.kernels):
            if k["name"] == name:
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
    """The C++ compiler (``$TILELAB_EMU_CXX`` or g++) and its version line."""
    cxx = os.environ.get("TILELAB_EMU_CXX", "g++")
    if not shutil.which(cxx):
        raise CompileError(f"The CPU emulator needs a C++ compiler, and {cxx!r} was not found. "
                           "Install g++ (Debian/Ubuntu: apt install g++).")
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return cxx, (out.stdout.splitlines() or ["?"])[0]


@functools.cache
def _prelude_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(PRELUDE_DIR.glob("*.h")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


def build(code: str, *, analysis: bool, defines: tuple[str, ...] = (), source: str = ""
          ) -> Library:
    """Compile ``code`` (a translation of ``source``) or reuse the cached library."""
    cxx, version = compiler()
    flags = [*FLAGS, *(["-DTILELAB_ANALYSIS"] if analysis else []), *defines]
    key = hashlib.sha256(json.dumps([code, flags, version, _prelude_digest()]).encode())
    root = cache_dir()
    so, meta = root / f"{key.hexdigest()[:40]}.so", root / f"{key.hexdigest()[:40]}.json"
    if so.exists() and meta.exists():
        info = json.loads(meta.read_text())
        return Library(so, tuple(info["kernels"]), info["static_shared"])
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        src, out = Path(tmp) / "kernel.cpp", Path(tmp) / "lib.so"
        src.write_text(code)
        try:
            proc = subprocess.run([cxx, *flags, "-I", str(PRELUDE_DIR), src.name, "-o", out.name],
                                  capture_output=True, text=True, timeout=300, check=False,
                                  cwd=tmp, env={**os.environ, "LC_ALL": "C"})
        except subprocess.TimeoutExpired as exc:
            raise CompileError("g++ took more than 5 minutes on this kernel; simplify it.") from exc
        if proc.returncode != 0:
            msg, lines = clean_errors(proc.stderr, tmp, source)
            raise CompileError(msg, proc.stderr, lines)
        info = _describe(out)
        os.replace(out, so)
        tmp_meta = Path(tmp) / "meta.json"
        tmp_meta.write_text(json.dumps(info))
        os.replace(tmp_meta, meta)
    return Library(so, tuple(info["kernels"]), info["static_shared"])


def _describe(path: Path) -> dict:
    def child(fd: int) -> None:
        os.write(fd, json.dumps(describe_library(str(path))).encode())

    res = run_forked(child, timeout=60)
    try:
        info = json.loads(res.report)
    except ValueError:
        info = {}
    if "kernels" not in info:
        why = info.get("message") or (f"signal {res.signal}" if res.signal else "no report")
        raise CompileError(f"The compiled kernel module failed to load ({why}). Does the source "
                           "run code at load time (a global object with a constructor)?")
    return info


_DIAG = re.compile(r"^(?P<file>[^:\n]*):(?P<line>\d+):(?:\d+:)? (?P<kind>fatal error|error|"
                   r"warning|note): (?P<text>.*)$")


def clean_errors(stderr: str, tmp: str = "", source: str = "") -> tuple[str, tuple[int, ...]]:
    """g++'s errors about the learner's ``kernel.cu`` (with its source lines), minus noise."""
    user: list[str] = []
    other: list[str] = []
    lines: set[int] = set()
    src = source.replace("\r\n", "\n").split("\n")
    target = None
    for raw in stderr.splitlines():
        text = raw.replace(str(PRELUDE_DIR) + "/", "<tilelab prelude>/")
        if tmp:
            text = text.replace(tmp + "/", "")
        m = _DIAG.match(text)
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
    return "kernel.cu did not compile:\n" + "\n".join(keep), tuple(sorted(lines))
