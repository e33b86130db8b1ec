"""``compile`` as PyCUDA has it: the emulator's refusal is nvcc's CompileError."""

from __future__ import annotations

import pickle

import tilelab.emu as emu

from .driver import CompileError


def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None,
            code=None, cache_dir=None, include_dirs=None, target="cubin"):
    try:
        emu.SourceModule(source, options=list(options or ()), no_extern_c=no_extern_c)
    except emu.CompileError as exc:
        raise CompileError("nvcc compilation of kernel.cu failed", [nvcc],
                           stderr=str(exc)) from None
    return pickle.dumps((source, tuple(options or ()), no_extern_c))
