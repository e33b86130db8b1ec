"""cuBLAS SGEMM on PyCUDA's context and buffers, through ctypes.

Why ctypes on the ``nvidia-cublas`` wheel's library: it is NVIDIA's own build of cuBLAS,
pinned like any other dependency, and calling it directly lets the benchmark pass the very
device buffers PyCUDA allocated, in the context PyCUDA made current, timed by the same
CUDA events and interleaved launch by launch with our kernels. A binding that brings its
own context or memory pool (CuPy, PyTorch) would time a different process state.
The CUDA runtime inside cuBLAS adopts the context that is current on the calling thread,
so a handle created after ``pycuda.autoinit`` lives in PyCUDA's context.

TF32: the handle's math mode is set to ``CUBLAS_DEFAULT_MATH`` (plain FP32; tensor-core
TF32 only with ``CUBLAS_TF32_TENSOR_OP_MATH``) and read back; :func:`sgemm_error` lets
the caller check the result against float64 at a tolerance TF32 would fail.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import importlib.metadata
from pathlib import Path

import numpy as np

CUBLAS_DEFAULT_MATH = 0
CUBLAS_TF32_TENSOR_OP_MATH = 3
CUBLAS_OP_N = 0
# Relative error (Frobenius norm) against float64 that FP32 stays under: FP32 keeps 23
# mantissa bits (unit roundoff 2**-24) and measured about 1e-6 at K = 4096 on uniform(-1, 1)
# inputs (book/data/sgemm.json); TF32 rounds every input to 10 bits (2**-11), 8192 times
# coarser, which no K-term sum of such products brings back under this line.
FP32_TOLERANCE = 1e-5


class CublasError(RuntimeError):
    """cuBLAS could not be loaded or a call failed; the message says which and why."""


def library_path() -> str:
    """The ``libcublas.so`` of the ``nvidia-cublas`` wheel, else the system's."""
    for dist in ("nvidia-cublas", "nvidia-cublas-cu12"):
        try:
            files = importlib.metadata.files(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in files:
            name = Path(str(f)).name
            if name.startswith("libcublas.so") and "Lt" not in name:
                return str(f.locate())
    found = ctypes.util.find_library("cublas")
    if found:
        return found
    raise CublasError(
        "no libcublas found: install the nvidia-cublas wheel (requirements-gpu.txt) "
        "or the CUDA toolkit's cuBLAS"
    )


def package_version() -> str | None:
    """The installed ``nvidia-cublas`` wheel's version (None for a system library)."""
    for dist in ("nvidia-cublas", "nvidia-cublas-cu12"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


class Cublas:
    """One cuBLAS handle in the current CUDA context, FP32 math, default stream."""

    def __init__(self) -> None:
        self.path = library_path()
        lt = Path(self.path).with_name(Path(self.path).name.replace("libcublas", "libcublasLt"))
        if lt.is_file():  # the wheel's libcublas finds its Lt beside it only if loaded first
            ctypes.CDLL(str(lt), mode=ctypes.RTLD_GLOBAL)
        self.lib = ctypes.CDLL(self.path)
        self.handle = ctypes.c_void_p()
        self._ok(self.lib.cublasCreate_v2(ctypes.byref(self.handle)), "cublasCreate")
        self._ok(self.lib.cublasSetMathMode(self.handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")
        mode = ctypes.c_int(-1)
        self._ok(self.lib.cublasGetMathMode(self.handle, ctypes.byref(mode)), "cublasGetMathMode")
        if mode.value != CUBLAS_DEFAULT_MATH:
            raise CublasError(f"cuBLAS math mode is {mode.value}, not plain FP32")
        self.math_mode = "CUBLAS_DEFAULT_MATH"
        ver = ctypes.c_int()
        self._ok(self.lib.cublasGetVersion_v2(self.handle, ctypes.byref(ver)), "cublasGetVersion")
        self.version = ver.value
        self._alpha = ctypes.c_float(1.0)
        self._beta = ctypes.c_float(0.0)

    def _ok(self, status: int, call: str) -> None:
        if status != 0:
            raise CublasError(f"{call} failed with cuBLAS status {status}")

    def sgemm(self, a, b, c, m: int, n: int, k: int) -> None:
        """Row-major ``C[m,n] = A[m,k] @ B[k,n]`` on device pointers.

        cuBLAS is column-major: a row-major matrix is its transpose in column-major, so
        computing ``C^T = B^T A^T`` column-major (B first, no transposes) writes row-major C.
        """
        self._ok(
            self.lib.cublasSgemm_v2(
                self.handle, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                ctypes.byref(self._alpha), ctypes.c_void_p(int(b)), n,
                ctypes.c_void_p(int(a)), k, ctypes.byref(self._beta),
                ctypes.c_void_p(int(c)), n,
            ),
            "cublasSgemm",
        )

    def close(self) -> None:
        if self.handle:
            self.lib.cublasDestroy_v2(self.handle)
            self.handle = ctypes.c_void_p()


def relative_error(got: np.ndarray, expected: np.ndarray) -> float:
    """‖got − expected‖ / ‖expected‖ (Frobenius), NaN-safe: NaN counts as infinite."""
    if not np.all(np.isfinite(got)):
        return float("inf")
    diff = got.astype(np.float64) - expected
    return float(np.linalg.norm(diff) / max(np.linalg.norm(expected), 1e-300))
