"""nvcc's options on the emulator, with the GPU's documented answers: -ftz=true flushes
single-precision subnormal inputs and results to sign-preserving zero (PTX ISA, .ftz);
--use_fast_math sets -ftz=true --prec-div=false --prec-sqrt=false and turns sinf, expf, ...
into __sinf, __expf, ... (CUDA C++ Programming Guide, "Intrinsic Functions"); __fdividef
returns 0 for 2^126 < |y| < 2^128; the fast intrinsics keep their documented error bounds
and, as on a GPU, are not exact; -maxrregcount sets the registers a launch is checked
against."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu.fastmath import FidelityWarning, FloatOptions, float_options

F32 = np.float32


@pytest.mark.parametrize("options, want", [
    ((), FloatOptions()),
    (("-ftz=true",), FloatOptions(ftz=True)),
    (("--ftz", "true"), FloatOptions(ftz=True)),
    (("-ftz=true", "-ftz=false"), FloatOptions()),
    (("--use_fast_math",), FloatOptions(ftz=True, prec_div=False, prec_sqrt=False, fast=True)),
    (("-use_fast_math", "-ftz=false"), FloatOptions(False, False, False, True)),
    (("-ftz=false", "-use_fast_math"), FloatOptions(False, False, False, True)),  # nvcc's way
    (("--use_fast_math", "--prec-div=true"), FloatOptions(True, True, False, True)),
    (("-prec-div=false",), FloatOptions(prec_div=False)),
    (("-use-fast-math",), FloatOptions()),  # not an nvcc option (nvcc refuses it)
    (("-DX=1", "-O3", "-lineinfo"), FloatOptions()),
])
def test_floating_point_options_are_read_as_nvcc_reads_them(options, want):
    assert float_options(options) == want


_FTZ = """__global__ void k(float* o, const float* x, double* d)
{
  float a = x[0], b = x[1], c = x[2];
  o[0] = a * b;         // 1e-20 * 1e-20: a subnormal result
  o[1] = -a * b;
  o[2] = c + 0.0f;      // a subnormal input
  o[3] = c * 1e30f;
  o[4] = (c == 0.0f) ? 1.0f : 0.0f;
  o[5] = x[3];          // a move: never flushed
  d[0] = (double)c;
}
"""


def _ftz_run(*options: str) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([1e-20, 1e-20, 1e-40, 1e-40], F32)
    o, d = np.full(6, 7, F32), np.zeros(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FidelityWarning)
        mod = emu.SourceModule(_FTZ, options=list(options))
    mod.get_function("k")(emu.Out(o), emu.In(x), emu.Out(d), block=(1, 1, 1))
    return o, d


def test_without_ftz_subnormal_floats_are_kept():
    o, d = _ftz_run()
    tiny = float(F32(1e-20) * F32(1e-20))
    assert 0 < tiny < np.finfo(F32).tiny
    assert o.tolist() == [tiny, -tiny, F32(1e-40), F32(F32(1e-40) * F32(1e30)), 0.0, F32(1e-40)]
    assert d[0] == float(F32(1e-40))


@pytest.mark.parametrize("option", ["-ftz=true", "--use_fast_math"])
def test_ftz_flushes_subnormal_inputs_and_results_to_signed_zero(option):
    o, d = _ftz_run(option)
    assert o[0] == 0 and not np.signbit(o[0]) and o[1] == 0 and np.signbit(o[1])
    assert o[2] == 0 and o[3] == 0 and o[4] == 1  # the input read as zero
    assert o[5] == F32(1e-40)  # a copy is not arithmetic
    assert d[0] == 0  # cvt.ftz.f64.f32


_FAST = """__global__ void k(float* o, const float* x, const float* y, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float a = x[i], b = y[i];
  o[i] = __fdividef(a, b);
  o[n + i] = __sinf(a);
  o[2 * n + i] = sinf(a);
  o[3 * n + i] = __expf(b);
  o[4 * n + i] = expf(b);
  o[5 * n + i] = __logf(fabsf(a) + 1.0f);
  o[6 * n + i] = __powf(fabsf(a) + 1.0f, 1.5f);
}
"""


def _fast_run(x: np.ndarray, y: np.ndarray, *options: str) -> np.ndarray:
    n = len(x)
    o = np.zeros(7 * n, F32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FidelityWarning)
        mod = emu.SourceModule(_FAST, options=list(options))
    mod.get_function("k")(emu.Out(o), emu.In(x), emu.In(y), np.int32(n), block=(64, 1, 1),
                          grid=((n + 63) // 64, 1))
    return o.reshape(7, n)


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    g = got.astype(F32).view(np.int32).astype(np.int64)
    w = want.astype(F32).view(np.int32).astype(np.int64)
    g = np.where(g < 0, -(g & 0x7FFFFFFF), g)
    w = np.where(w < 0, -(w & 0x7FFFFFFF), w)
    return np.abs(g - w)


def test_fdividef_returns_zero_for_divisors_past_2_to_126_and_is_close_elsewhere():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(256) * 1e3).astype(F32)
    huge = (rng.uniform(1, 1.99, 256) * 2.0**126 * np.sign(rng.standard_normal(256))).astype(F32)
    normal = (rng.standard_normal(256) * 10.0 ** rng.integers(-5, 5, 256)).astype(F32)
    y = np.where(np.arange(256) % 2 == 0, huge, normal).astype(F32)
    x[0] = np.inf
    got = _fast_run(x, y)[0]
    even = np.arange(256) % 2 == 0
    assert np.isnan(got[0])  # infinity / y: NaN
    assert (got[even][1:] == 0).all()
    assert (np.signbit(got[even][1:]) == (np.signbit(x[even][1:]) != np.signbit(y[even][1:]))).all()
    exact = (x[~even].astype(np.float64) / y[~even]).astype(F32)
    assert _ulps(got[~even], exact).max() <= 2  # the documented bound


def test_fast_sine_is_within_its_bound_on_pi_and_as_far_off_as_a_gpus_beyond():
    """On [-pi, pi] the documented bound 2^-21.41; at |x| near 2000 a GPU's __sinf is off by
    the argument's rounding to turns (FMUL.RZ by 1/(2 pi)), about 1e-4: far more than any
    rounding of the exact sine."""
    near = np.linspace(-np.pi, np.pi, 129).astype(F32)
    far = np.linspace(1990, 2010, 127).astype(F32)
    x = np.concatenate([near, far]).astype(F32)
    o = _fast_run(x, np.ones_like(x))
    err = np.abs(o[1].astype(np.float64) - np.sin(x.astype(np.float64)))
    assert err[:129].max() <= 2.0**-21.41
    assert err[129:].max() > 2e-5 and err[129:].max() < 2000 * 2.0**-22
    assert np.abs(o[2].astype(np.float64) - np.sin(x.astype(np.float64))).max() < 2e-7  # sinf


def test_fast_math_turns_the_functions_into_the_intrinsics():
    x = np.linspace(1990, 2010, 64).astype(F32)
    y = np.linspace(-80, 80, 64).astype(F32)
    plain, fast = _fast_run(x, y), _fast_run(x, y, "--use_fast_math")
    assert (fast[2] == fast[1]).all() and not (plain[2] == plain[1]).all()  # sinf is __sinf
    assert (fast[4] == fast[3]).all()  # expf is __expf


def test_fast_exp_log_and_pow_keep_their_documented_bounds_and_are_not_exact():
    x = np.linspace(-20, 20, 64).astype(F32)
    b = np.linspace(-87, 87, 64).astype(F32)
    o = _fast_run(x, b)
    ulp_exp = _ulps(o[3], np.exp(b.astype(np.float64)))
    assert (ulp_exp <= 2 + np.floor(np.abs(1.173 * b))).all()  # 2 + floor(|1.173 x|) ulp
    assert ulp_exp.max() > 4  # a GPU's __expf is not exact at large |x| either
    a = (np.abs(x) + 1).astype(np.float64)
    log_err = np.abs(o[5] - np.log(a))
    assert (np.where((a >= 0.5) & (a <= 2), log_err <= 2.0**-21.41,
                     _ulps(o[5], np.log(a)) <= 3)).all()
    assert (_ulps(o[6], a ** 1.5) <= 8).all()  # exp2(y * __log2f(x)): a few ulp here


def test_a_fidelity_warning_says_what_may_still_differ():
    src = "__global__ void k(float* o) { o[0] = 1.0f / o[1]; }"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        emu.SourceModule(src)
        plain = list(seen)
        mod = emu.SourceModule(src, options=["--use_fast_math"])
    assert not [w for w in plain if issubclass(w.category, FidelityWarning)]
    said = [str(w.message) for w in seen if issubclass(w.category, FidelityWarning)]
    assert len(said) == 1 and "2^126 < |y| < 2^128" in said[0] and "subnormal" in said[0]
    assert any("__fdividef" in d for d in mod.differences)


_HEAVY = """__global__ void heavy(const float* x, float* out)
{
  int t = threadIdx.x;
  float r[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) r[j] = x[t + j];
#pragma unroll
  for (int s = 0; s < 4; ++s)
#pragma unroll
    for (int j = 0; j < 64; ++j) r[j] = r[j] * r[(j + 7) % 64] + r[(63 - j)] * 0.25f;
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < 64; ++j) acc += r[j] * j;
  out[t] = acc;
}
"""


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="ptxas (nvcc) counts the registers")
@pytest.mark.parametrize("options, regs", [
    (["-maxrregcount=64"], 64), (["--maxrregcount", "40"], 40),
    (["-Xptxas", "-maxrregcount=32"], 32),
])
def test_maxrregcount_lets_a_launch_of_1024_threads_run_as_on_a_gpu(options, regs):
    x = np.random.default_rng(3).random(1100).astype(F32)
    out = np.zeros(1024, F32)
    plain = emu.SourceModule(_HEAVY).get_function("heavy")
    assert plain.num_regs > 64
    with pytest.raises(emu.LaunchError, match="too many resources requested for launch"):
        plain(emu.In(x), emu.Out(out), block=(1024, 1, 1))
    capped = emu.SourceModule(_HEAVY, options=options).get_function("heavy")
    assert capped.num_regs <= regs
    capped(emu.In(x), emu.Out(out), block=(1024, 1, 1))
    assert np.isfinite(out).all()
