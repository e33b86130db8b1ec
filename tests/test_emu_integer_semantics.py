"""Integer and directed-rounding arithmetic on the emulator as a GPU computes it: shifts by
the width or more (PTX clamps the count), division and remainder by zero and INT_MIN / -1
(no fault: all ones, INT_MIN and 0, as an H200 gives them), signed overflow wrapping, and
the double intrinsics in a directed mode at denormal results."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from tilelab import emu
from tilelab.emu.lexer import mask
from tilelab.emu.shifts import rewrite_shifts
from tilelab.emu.translate import _apply


def _rewritten(src: str) -> str:
    return _apply(src, rewrite_shifts(mask(src)))


@pytest.mark.parametrize(("src", "want"), [
    ("x = a << b;", "x = tl_emu::shl(a , b);"),
    ("x = a << b << c;", "x = tl_emu::shl(tl_emu::shl(a , b) , c);"),
    ("x = (int)a >> b + 1;", "x = tl_emu::shr((int)a , b + 1);"),
    ("if (c) x = y << n;", "if (c) x = tl_emu::shl(y , n);"),
    ("t = a & b << c | d;", "t = a & tl_emu::shl(b , c) | d;"),
    ("q = x ? a << b : c >> d;", "q = x ? tl_emu::shl(a , b) : tl_emu::shr(c , d);"),
    ("w = f(a, b) << g(c);", "w = tl_emu::shl(f(a, b) , g(c));"),
    ("m = p->v << s.d[i];", "m = tl_emu::shl(p->v , s.d[i]);"),
    # left as they were: a constant count, a directive, template brackets
    ("v = a << 3;", "v = a << 3;"),
    ("#define SH(a, b) ((a) << (b))", "#define SH(a, b) ((a) << (b))"),
    ("z = Foo<Bar<int>>::v << n;", "z = Foo<Bar<int>>::v << n;"),
    ("z = static_cast<int>(a) << k;", "z = static_cast<int>(a) << k;"),
    ("for (int s = n >> 1; s > 0; s >>= 1) {}", "for (int s = n >> 1; s > 0; s >>= 1) {}"),
    # compound shifts, their left side evaluated once
    ("a[i++] <<= n + 1, b = 2;", "tl_emu::shl_to(a[i++] , n + 1), b = 2;"),
    ("for (; s > 0; s >>= k) {}", "for (; s > 0; tl_emu::shr_to(s , k)) {}"),
])
def test_shifts_by_a_variable_count_go_through_the_gpus_rule(src: str, want: str):
    assert _rewritten(src) == want


SRC = r"""
__global__ void ints(const int* a, const int* b, const long long* la, const long long* lb,
                     long long* o)
{
  int i = threadIdx.x;
  int x = a[i], y = b[i];
  long long p = la[i], q = lb[i];
  o[i * 10 + 0] = x << y;
  o[i * 10 + 1] = x >> y;
  o[i * 10 + 2] = (long long)((unsigned)x >> y);
  o[i * 10 + 3] = p << q;
  o[i * 10 + 4] = p >> q;
  o[i * 10 + 5] = x / y;
  o[i * 10 + 6] = x % y;
  o[i * 10 + 7] = p / q;
  o[i * 10 + 8] = p % q;
  o[i * 10 + 9] = (long long)(x + y);
  o[80 + i * 2] = (x <<= y);
  long long r = p;
  r >>= q;
  o[80 + i * 2 + 1] = r;
}
"""
I32_MIN, I64_MIN = -2**31, -2**63


def _shift(x: int, n: int, width: int, left: bool, signed: bool) -> int:
    """PTX's shl/shr: the count as 32 bits, clamped at the width."""
    n &= 0xFFFFFFFF
    if n >= width:
        return -1 if (not left and signed and x < 0) else 0
    mask = (1 << width) - 1
    r = (x << n) & mask if left else ((x if signed else x & mask) >> n) & mask
    return r - (1 << width) if signed and r >> (width - 1) else r


def _div(x: int, y: int, width: int) -> tuple[int, int]:
    """The GPU's quotient and remainder (signed operands), as an H200 gives them."""
    if y == 0:
        fits = width == 64 and 0 <= x <= 0xFFFFFFFF
        return (0xFFFFFFFF, 0xFFFFFFFF) if fits else (-1, -1)
    if x == -(1 << (width - 1)) and y == -1:
        return x, 0
    q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
    return q, x - q * y


@pytest.mark.parametrize("analysis", [False, True], ids=["graded", "analysis"])
def test_shifts_division_and_overflow_compute_what_a_gpu_computes(analysis: bool):
    a = np.array([7, -7, I32_MIN, I32_MIN, 5, -1, 100, 2**31 - 1], np.int32)
    b = np.array([0, 0, -1, 0, 33, 40, -3, 1], np.int32)
    la = np.array([65, -65, I64_MIN, 2**40, 7, 2**32 - 1, -1, 9], np.int64)
    lb = np.array([0, 0, -1, 0, 64, 2**32 + 1, 70, 2**63 - 1], np.int64)
    o = np.zeros(96, np.int64)
    f = emu.SourceModule(SRC, analysis=analysis).get_function("ints")
    f(emu.In(a), emu.In(b), emu.In(la), emu.In(lb), emu.Out(o), block=(8, 1, 1))
    got = o[:80].reshape(8, 10)
    for i in range(8):
        x, y, p, q = int(a[i]), int(b[i]), int(la[i]), int(lb[i])
        want = [_shift(x, y, 32, True, True), _shift(x, y, 32, False, True),
                _shift(x & 0xFFFFFFFF, y, 32, False, False), _shift(p, q, 64, True, True),
                _shift(p, q, 64, False, True), *_div(x, y, 32), *_div(p, q, 64),
                (x + y + 2**31) % 2**32 - 2**31]
        assert got[i].tolist() == want, (i, x, y, p, q)
        assert o[80 + i * 2:82 + i * 2].tolist() == [want[0], want[4]], (i, x, y, p, q)


def _rounded(exact: Fraction, up: bool) -> float:
    """``exact`` rounded toward +inf (``up``) or -inf, to a double (denormals included)."""
    near = float(exact)
    if Fraction(near) == exact:
        return near
    if (Fraction(near) < exact) == up:
        return math.nextafter(near, math.inf if up else -math.inf)
    return near


def test_double_directed_rounding_reaches_the_denormals():
    src = r"""
    __global__ void dr(const double* a, const double* b, double* o)
    {
      int i = threadIdx.x;
      o[i * 4 + 0] = __ddiv_rd(a[i], b[i]);
      o[i * 4 + 1] = __ddiv_ru(a[i], b[i]);
      o[i * 4 + 2] = __dmul_rd(a[i], b[i]);
      o[i * 4 + 3] = __dmul_ru(a[i], b[i]);
    }
    """
    a = np.array([-5e-324, 5e-324, 1e-200, -1e-310, -1e-300, 1e-320], np.float64)
    b = np.array([3.0, 7.0, 1e-200, 1e10, 1e-10, 0.3], np.float64)
    o = np.zeros(24, np.float64)
    emu.SourceModule(src, options=["-ftz=true"]).get_function("dr")(
        emu.In(a), emu.In(b), emu.Out(o), block=(6, 1, 1))
    for i in range(6):
        x, y = Fraction(float(a[i])), Fraction(float(b[i]))
        want = [_rounded(x / y, False), _rounded(x / y, True), _rounded(x * y, False),
                _rounded(x * y, True)]
        assert o[i * 4:i * 4 + 4].tobytes() == np.array(want).tobytes(), (i, o[i * 4:i * 4 + 4],
                                                                          want)
