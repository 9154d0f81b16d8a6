"""exp, expm1, exp2, tanh, erf, log, log1p, log2, pow, sin and cos for the CPU kernels, written so that LLVM vectorizes the
loops that call them.

Numba compiles ``math.exp`` to a call of the C library once per element, which no loop vectorizer can
widen; these are arithmetic, a comparison or two and a bit cast, all of which it can.  ``exp``,
``tanh``, ``log`` and ``log1p`` compute in float64 and are exact to a few units in the last place of
float64; ``exp32``, ``tanh32``, ``erf32``, ``log32`` and ``log1p32`` compute in float32 (twice the
lanes of float64, and shorter polynomials), for float32 statements (compiler/numba_codegen.py picks
them): ``exp32``, ``log32`` and ``log1p32`` within 2 float32 ulp, ``tanh32`` and ``erf32`` within 8 (an
absolute error under 5e-7), as XLA's float32 kernels are.

``exp``: ``x = n ln2 + r`` with ``|r| <= ln2 / 2`` (Cody and Waite's two-part ln2), ``e^r`` by its
Taylor series to degree 13, ``2^n`` built from the exponent bits in two halves so that results down
to the subnormals come out.  ``tanh``: ``1 - 2 / (e^{2|x|} + 1)`` with the sign, Cephes' rational
approximation (degree 2 over 3 in ``x^2``) for ``|x| < 0.625``, where the difference would cancel: within
1.4 ulp.  ``exp32``: the same reduction with Cephes' ``expf`` polynomial (degree 7), in int32 and float32
so that AVX2 converts and shifts eight lanes at once.  The nearest integer ``n`` is LLVM's ``rint``, one
instruction (adding a half of the argument's sign and truncating made ``exp32`` 35% slower, ``exp`` 27%).
``tanh32``: Eigen's rational approximation (degree 13 over 6) on ``|x| < 7.9``, ±1 beyond.  ``erf32``:
the rational approximation of Eigen's ``generic_fast_erf_float`` on ``(-4, 4)``, ±1 beyond (float32
holds nothing else there), as the NumPy backend's float32 ``erf`` computes it.  ``erf64``: fdlibm's
``s_erf.c`` without branches (each range's rational approximation, then a selection), within an ulp.
``log``: fdlibm's ``__ieee754_log`` (the significand brought to ``[sqrt(1/2), sqrt(2))``, ``log(1 + f)`` by
``s = f / (2 + f)`` and a polynomial in ``s^2``); ``log32``: Cephes' ``logf`` (a polynomial in ``f``, no division).
``log1p(x)``: ``log(u)`` of ``u = 1 + x`` corrected by the rounding of that sum, ``((u - 1) - x) / u``.
``log2``: fdlibm's ``e_log2.c`` on ``log``'s reduction (``log(1 + f)`` split so that its product by the first
33 bits of 1 / ln 2 is exact, the exponent added last), ``log2_32`` the float32 form on ``logf``'s: within an
ulp, and exactly ``k`` at ``2^k``.  ``exp2``: ``2^n e^(r ln 2)`` with ``n`` the nearest integer, ``r`` exact and
``e^(r ln 2)`` by ``exp``'s (``exp32``'s) polynomial: within an ulp, and exact at integers.
``expm1(x)``: ``exp``'s reduction, ``e^r - 1 = r + r^2 q(r)`` by its Taylor series (to degree 14; float32's
``expm1_32`` to 8), then ``2^n (e^r - 1) + (2^n - 1)``, whose terms are exact and do not cancel: within 2 ulp
(float32: 1.4), as fast as NumPy's (Kahan's ``(u - 1) x / log(u)``, an exponential, a logarithm and a
division, was three to four times slower).  ``pow32(x, y)``: ``x ** y`` of
float32 operands as ``exp(y log|x|)`` in float64 (well within a float32 ulp), with the C library's special
cases (a negative base to an odd integer power, NaN for a negative base to a non-integer, ``x ** 0``,
``1 ** y`` and ``(-1) ** inf`` are 1); in float64 that form's error would grow with ``|y log x|`` in ulps, so
``powi64(x, n)``, an integer power, is binary powering in double-double (exact products by fused
multiply-adds), within an ulp where ``|x| ** n`` stays within 2^-POWI_SAFE and 2^POWI_SAFE (``powi32``,
its float32 form, powers in plain float64, a few roundings that the float32 result hides), and ``pow64(x,
y)`` is ``e^(y log x)`` with ``log x`` and the product in double-double (``_log_dd``), within an ulp where
``pow64_safe`` holds (``x`` positive, normal and finite, ``|y log x| < 708``); kernels do other arguments
again with ``powi64_exact`` and ``pow64_exact`` (the C library's).
``sin32`` and ``cos32``: a float32 argument reduced in float64 by Cody and Waite's two-part pi/2 (its
first 33 bits, whose products by the quotients below 2^20 are exact, and the rest), then the Taylor
series of sin and cos on the remainder, the quadrant picking one: within an ulp for ``|x| <
TRIG_LIMIT`` (2^20); beyond, the kernels call ``sin32_exact`` and ``cos32_exact`` (the C library's, in
float64) for the chunk again.  ``sin64`` and ``cos64``: a float64 argument reduced by fdlibm's three-part
pi/2 into a sum of two doubles (each difference's rounding error kept by TwoSum), then fdlibm's
``__kernel_sin`` and ``__kernel_cos`` polynomials on that sum: within an ulp below ``TRIG_LIMIT``, and
``sin64_exact`` and ``cos64_exact`` (the C library's) beyond.
Subnormal inputs are scaled into the normal range first.

Numba's on-disk cache keys a kernel on its own file only.  The generated kernels carry this file's hash
in their names (compiler/numba_codegen.py), but numba_kernels.py, which inlines these functions, does
not: after editing this file in a source checkout, delete ``backends/__pycache__/numba_kernels.*.nb*``
(an installed release writes all its files anew).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from llvmlite import ir
from numba import float32, float64, int32, int64, njit, types
from numba.extending import intrinsic, overload

__all__ = ["exp", "tanh", "log", "log1p", "expm1", "exp32", "tanh32", "erf32", "log32", "log1p32", "expm1_32",
           "pow32", "powi32", "sin32", "cos32", "sin32_exact", "cos32_exact", "sin64", "cos64", "sin64_exact", "cos64_exact",
           "erf64", "TRIG_LIMIT", "powi64", "powi64_exact", "POWI_SAFE", "pow64", "pow64_safe", "pow64_exact", "exp_of",
           "log2", "exp2", "log2_32", "exp2_32"]

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


def _bitcast(src, dst, llvm_type):
    """An intrinsic reading the bits of a ``src`` value as a ``dst`` one (a no-op in machine code)."""

    @intrinsic
    def cast(typingctx, x):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], llvm_type)

        return dst(src), codegen

    return cast


_double_from_bits = _bitcast(types.int64, types.float64, ir.DoubleType())
_float_from_bits = _bitcast(types.int32, types.float32, ir.FloatType())
_bits_of_double = _bitcast(types.float64, types.int64, ir.IntType(64))
_bits_of_float = _bitcast(types.float32, types.int32, ir.IntType(32))


@intrinsic
def _fma(typingctx, a, b, c):
    """``a * b + c`` rounded once (LLVM's fma: the processor's fused multiply-add), whatever a kernel's
    contraction flags would make of the spelled-out product and sum."""
    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fma = builder.module.declare_intrinsic("llvm.fma", [double], ir.FunctionType(double, [double] * 3))
        return builder.call(fma, args)

    return types.float64(types.float64, types.float64, types.float64), codegen


@intrinsic
def _round_even(typingctx, x):
    """``x`` rounded to the nearest integer, ties to even: LLVM's rint, one instruction on a vector.  Adding
    and subtracting ``1.5 * 2**52`` rounds so too, but a kernel that may reassociate would fold it away."""
    def codegen(context, builder, signature, args):
        kind = args[0].type
        rint = builder.module.declare_intrinsic("llvm.rint", [kind], ir.FunctionType(kind, [kind]))
        return builder.call(rint, args)

    return x(x), codegen


@njit(inline="always", cache=True)
def _pow2(n):
    return _double_from_bits((n + 1023) << 52)


@njit(inline="always", cache=True)
def _pow2_halves(n):
    """``(a, b)`` with ``a b = 2^n`` for ``n`` from -2044 to 2046: a result times ``a`` then ``b`` reaches
    the subnormals, and a large one is not made infinite before its last product."""
    half = n >> 1
    return _pow2(half), _pow2(n - half)


@njit(inline="always", cache=True)
def _nearest(v):
    """The integer nearest a float64 ``v``, halves away from 0: exp2's, whose argument is often a half
    (``2^0.5`` as ``2 e^(-ln2 / 2)`` comes out as NumPy's, ``e^(ln2 / 2)`` an ulp lower).  exp's reduction
    rounds by the faster :func:`_round_even`: ``x / ln2`` is a half too rarely to matter."""
    return int(v + (0.5 if v >= 0 else -0.5))


@njit(inline="always", cache=True)
def _reduced_by_ln2(c):
    """``(n, r)`` with ``c = n ln2 + r`` and ``|r| <= ln2 / 2``: Cody and Waite's two-part ln2, whose high
    part times ``n`` is exact."""
    fn = _round_even(c * _LOG2E)
    return int(fn), (c - fn * _LN2_HI) - fn * _LN2_LO


@njit(inline="always", cache=True)
def _upper_half(x):
    """``x`` with the low 32 bits of its significand cleared: the product of two such is exact."""
    return _double_from_bits(_bits_of_double(x) & -4294967296)


@njit(inline="always", cache=True)
def _exp_reduced(r):
    """``e^r`` for ``|r| <= ln2 / 2``: its Taylor series to degree 13."""
    p = 1.0 / 6227020800.0
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    return p * r + 1.0


@njit(inline="always", cache=True)
def exp(x):
    x = float(x)
    # the range reduction of a NaN or a far-out x is undefined: clamp it, and select the answer at the end;
    # an x whose answer is 0 (a masked score's -inf) computes exp(0), not a subnormal: subnormal arithmetic
    # takes the slow path of the floating-point unit
    c = 0.0 if x < -745.1332191019412 else min(max(x, -746.0), 710.0)
    n, r = _reduced_by_ln2(c)
    a, b = _pow2_halves(n)
    y = _exp_reduced(r) * a * b
    y = float("inf") if x > 709.782712893384 else y
    y = 0.0 if x < -745.1332191019412 else y
    return x if x != x else y


@njit(inline="always", cache=True)
def tanh(x):
    x = float(x)
    a = abs(x)
    # below 0.625 Cephes' rational approximation (1 - 2 / (e^2|x| + 1) would cancel there: 57 ulps near
    # 0.02), from 0.625 on that difference, which loses little once tanh is past a half
    z = x * x
    p = (-9.64399179425052238628e-1 * z - 9.92877231001918586564e1) * z - 1.61468768441708447952e3
    q = ((z + 1.12811678491632931402e2) * z + 2.23548839060100448583e3) * z + 4.84406305325125486048e3
    # below 1e-8 tanh(x) rounds to x, which keeps a zero's sign (the sum would make -0 +0)
    small = x if a < 1e-8 else x + x * z * (p / q)
    t = 1.0 - 2.0 / (exp(2.0 * min(a, 20.0)) + 1.0)  # tanh(20) is 1 in float64
    big = t if x > 0 else -t
    return small if a < 0.625 else (x if x != x else big)


@njit(inline="always", cache=True)
def _pow2_32(n):
    return _float_from_bits((n + int32(127)) << int32(23))


@njit(inline="always", cache=True)
def _pow2_halves32(n):
    """:func:`_pow2_halves` in float32, for ``n`` from -252 to 254."""
    half = n >> int32(1)
    return _pow2_32(half), _pow2_32(n - half)


@njit(inline="always", cache=True)
def _nearest32(v):
    """:func:`_nearest` in int32."""
    return int32(v + (float32(0.5) if v >= float32(0.0) else float32(-0.5)))


@njit(inline="always", cache=True)
def _reduced_by_ln2_32(c):
    """:func:`_reduced_by_ln2` of a float32, with Cephes' two-part ln2; ``n`` an int32: AVX2 has no
    eight-lane conversion of floats to int64."""
    fn = _round_even(c * float32(_LOG2E))
    return int32(fn), (c - fn * float32(0.693359375)) + fn * float32(2.12194440e-4)


@njit(inline="always", cache=True)
def _exp32_reduced(r):
    """``e^r`` of a float32 ``|r| <= ln2 / 2``: Cephes' ``expf`` polynomial."""
    p = float32(1.9875691500e-4)
    p = p * r + float32(1.3981999507e-3)
    p = p * r + float32(8.3334519073e-3)
    p = p * r + float32(4.1665795894e-2)
    p = p * r + float32(1.6666665459e-1)
    p = p * r + float32(5.0000001201e-1)
    return p * r * r + r + float32(1.0)


@njit(inline="always", cache=True)
def exp32(x):
    x = float32(x)
    c = float32(0.0) if x < float32(-103.97208404541015625) else min(max(x, float32(-104.0)), float32(89.0))
    n, r = _reduced_by_ln2_32(c)
    a, b = _pow2_halves32(n)
    y = _exp32_reduced(r) * a * b
    y = float32(float("inf")) if x > float32(88.72283935546875) else y
    y = float32(0.0) if x < float32(-103.97208404541015625) else y
    return x if x != x else y


@njit(inline="always", cache=True)
def tanh32(x):
    x = float32(x)
    c = min(max(x, float32(-7.90531110763549805)), float32(7.90531110763549805))
    x2 = c * c
    p = x2 * float32(-2.76076847742355e-16) + float32(2.00018790482477e-13)
    p = p * x2 + float32(-8.60467152213735e-11)
    p = p * x2 + float32(5.12229709037114e-08)
    p = p * x2 + float32(1.48572235717979e-05)
    p = p * x2 + float32(6.37261928875436e-04)
    p = p * x2 + float32(4.89352455891786e-03)
    q = x2 * float32(1.19825839466702e-06) + float32(1.18534705686654e-04)
    q = q * x2 + float32(2.26843463243900e-03)
    q = q * x2 + float32(4.89352518554385e-03)
    # below 0.0004 tanh(x) rounds to x; a NaN passes through the clamp and the division; from atanh(1 - 2^-25)
    # on it rounds to 1, where the clamped quotient stays 3 ulps short (a gradient 1 - t^2 would not be 0)
    y = x if abs(x) < float32(0.0004) else c * p / q
    return (float32(1.0) if x > float32(0.0) else float32(-1.0)) if abs(x) >= float32(9.010913848876953125) else y


@njit(inline="always", cache=True)
def erf32(x):
    x = float32(x)
    outside = abs(x) >= float32(4.0)  # float32's erf is exactly 1 there (so gelu(-inf) is -inf * 0, NaN, as eagerly)
    edge = float32(1.0) if x > float32(0.0) else float32(-1.0)
    x = min(max(x, float32(-4.0)), float32(4.0)) if x == x else x
    x2 = x * x
    p = x2 * float32(-2.72614225801306e-10) + float32(2.77068142495902e-08)
    p = p * x2 + float32(-2.10102402082508e-06)
    p = p * x2 + float32(-5.69250639462346e-05)
    p = p * x2 + float32(-7.34990630326855e-04)
    p = p * x2 + float32(-2.95459980854025e-03)
    p = p * x2 + float32(-1.60960333262415e-02)
    q = x2 * float32(-1.45660718464996e-05) + float32(-2.13374055278905e-04)
    q = q * x2 + float32(-1.68282697438203e-03)
    q = q * x2 + float32(-7.37332916720468e-03)
    q = q * x2 + float32(-1.42647390514189e-02)
    return edge if outside else x * p / q


@njit(inline="always", cache=True)
def _exponent_significand(x):
    """``(k, m)`` with ``x = 2^k m`` and ``m`` in ``[sqrt(1/2), sqrt(2))``, of a positive normal float64: the
    logarithms' range reduction, ``log x = k ln2 + log m``."""
    bits = _bits_of_double(x)
    k = ((bits >> 52) & 0x7FF) - 1023
    m = _double_from_bits((bits & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000)  # the significand, in [1, 2)
    big = m > 1.4142135623730951
    return (k + 1 if big else k), (m * 0.5 if big else m)


@njit(inline="always", cache=True)
def _log_parts(x):
    """``(k, f, hfsq, r)`` of a positive float64 ``x = 2^k (1 + f)``, ``1 + f`` in ``[sqrt(1/2), sqrt(2))``:
    ``log(1 + f) = f - hfsq + r`` with ``hfsq = f^2 / 2`` and ``r = s (hfsq + R(s^2))``, ``s = f / (2 + f)``
    (fdlibm's ``__ieee754_log`` and ``k_log1p``)."""
    tiny = x < 2.2250738585072014e-308
    k, m = _exponent_significand(x * 18014398509481984.0 if tiny else x)  # a subnormal times 2**54 is normal
    k = k - 54 if tiny else k
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01))
    t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01
                                                                           + w * 1.479819860511658591e-01)))
    hfsq = 0.5 * f * f
    return float(k), f, hfsq, s * (hfsq + t2 + t1)


@njit(inline="always", cache=True)
def _log_special(x, out):
    """``out``, or the logarithm's answer where ``x`` is 0, infinite, negative or NaN."""
    out = -float("inf") if x == 0.0 else out
    out = x if x == float("inf") else out
    return float("nan") if (x < 0.0 or x != x) else out


@njit(inline="always", cache=True)
def log(x):
    x = float(x)
    dk, f, hfsq, r = _log_parts(x)
    return _log_special(x, dk * _LN2_HI - ((hfsq - (r + dk * _LN2_LO)) - f))


#: 1 / ln 2 as a sum of two doubles, the first with 33 significant bits (fdlibm's e_log2.c)
_INV_LN2_HI = 1.44269504072144627571e+00
_INV_LN2_LO = 1.67517131648865118353e-10


@njit(inline="always", cache=True)
def log2(x):
    # fdlibm's e_log2.c: log(1 + f) split as hi + lo with hi's low 32 bits cleared, so that hi / ln 2 by the
    # first part of 1 / ln 2 is exact, and k added last; a power of two (f = 0) comes out exactly k
    x = float(x)
    dk, f, hfsq, r = _log_parts(x)
    hi = _upper_half(f - hfsq)
    lo = (f - hi) - hfsq + r
    val_hi = hi * _INV_LN2_HI
    val_lo = (lo + hi) * _INV_LN2_LO + lo * _INV_LN2_HI
    w = dk + val_hi
    val_lo += (dk - w) + val_hi
    return _log_special(x, val_lo + w)


@njit(inline="always", cache=True)
def exp2(x):
    x = float(x)
    c = min(max(x, -1080.0), 1030.0)  # a NaN selects itself at the end
    n = _nearest(c)
    a, b = _pow2_halves(n)
    y = _exp_reduced((c - n) * 0.6931471805599453) * a * b  # c - n is exact and within 1/2: |r| <= ln2 / 2
    y = float("inf") if x >= 1024.0 else y
    y = 0.0 if x < -1075.0 else y
    return x if x != x else y


@njit(inline="always", cache=True)
def log1p(x):
    x = float(x)
    u = 1.0 + x
    # log(u) is off by the rounding of 1 + x, which is (u - 1) - x, where log's slope is 1 / u
    out = log(u) - ((u - 1.0) - x) / u
    out = x if (u == 1.0 or x == float("inf")) else out
    return -float("inf") if u == 0.0 else out


@njit(inline="always", cache=True)
def _log32_parts(x):
    """``(e, f, z, q)`` of a positive float32 ``x = 2^e (1 + f)``, ``1 + f`` in ``[sqrt(1/2), sqrt(2))``:
    ``log(1 + f) = f - z / 2 + q`` with ``z = f^2`` and ``q = f z P(f)`` (Cephes' ``logf``)."""
    tiny = x < float32(1.17549435e-38)
    y = x * float32(33554432.0) if tiny else x  # a subnormal times 2**25 is normal
    bits = _bits_of_float(y)
    e = ((bits >> int32(23)) & int32(0xFF)) - int32(126) - (int32(25) if tiny else int32(0))
    m = _float_from_bits((bits & int32(0x7FFFFF)) | int32(0x3F000000))  # the significand, in [0.5, 1)
    low = m < float32(0.707106781186547524)
    e = e - int32(1) if low else e
    f = (m + m - float32(1.0)) if low else (m - float32(1.0))
    z = f * f
    p = float32(7.0376836292e-2)
    p = p * f + float32(-1.1514610310e-1)
    p = p * f + float32(1.1676998740e-1)
    p = p * f + float32(-1.2420140846e-1)
    p = p * f + float32(1.4249322787e-1)
    p = p * f + float32(-1.6668057665e-1)
    p = p * f + float32(2.0000714765e-1)
    p = p * f + float32(-2.4999993993e-1)
    p = p * f + float32(3.3333331174e-1)
    return float32(e), f, z, p * f * z


@njit(inline="always", cache=True)
def _log32_special(x, out):
    out = float32(-float("inf")) if x == float32(0.0) else out
    out = x if x == float32(float("inf")) else out
    return float32(float("nan")) if (x < float32(0.0) or x != x) else out


@njit(inline="always", cache=True)
def log32(x):
    x = float32(x)
    fe, f, z, q = _log32_parts(x)
    return _log32_special(x, f + (q + fe * float32(-2.12194440e-4) - float32(0.5) * z) + fe * float32(0.693359375))


@njit(inline="always", cache=True)
def log2_32(x):
    x = float32(x)
    fe, f, z, q = _log32_parts(x)  # a power of two: f = 0, exactly e
    # 1 / ln 2 as float32(1 / ln 2) plus the rest, which the smaller terms take
    l = q - float32(0.5) * z
    return _log32_special(x, fe + (f * float32(1.44269502162933349609375) + (l * float32(1.44269502162933349609375)
                                                                          + f * float32(1.925963033500011079e-8))))


@njit(inline="always", cache=True)
def exp2_32(x):
    x = float32(x)
    c = min(max(x, float32(-152.0)), float32(130.0))
    n = _nearest32(c)
    r = c - float32(n)  # exact, within 1/2
    a, b = _pow2_halves32(n)
    y = _exp32_reduced(r * float32(0.693359375) + r * float32(-2.12194440e-4)) * a * b  # ln 2 in two parts
    y = float32(float("inf")) if x >= float32(128.0) else y
    y = float32(0.0) if x < float32(-150.0) else y
    return x if x != x else y


@njit(inline="always", cache=True)
def log1p32(x):
    x = float32(x)
    u = float32(1.0) + x
    out = log32(u) - ((u - float32(1.0)) - x) / u
    out = x if (u == float32(1.0) or x == float32(float("inf"))) else out
    return float32(-float("inf")) if u == float32(0.0) else out


@njit(inline="always", cache=True)
def expm1(x):
    x = float(x)
    c = min(max(x, -40.0), 710.0)  # below -40, e^x is under 2^-57: -1 (a NaN selects itself at the end)
    n, r = _reduced_by_ln2(c)
    # exp's series, a term longer, summed apart from its 1: written as 1 + this, exp took 10% longer and
    # reached 0.96 ulp against 0.84, so each keeps its own
    q = 1.0 / 87178291200.0
    q = q * r + 1.0 / 6227020800.0
    q = q * r + 1.0 / 479001600.0
    q = q * r + 1.0 / 39916800.0
    q = q * r + 1.0 / 3628800.0
    q = q * r + 1.0 / 362880.0
    q = q * r + 1.0 / 40320.0
    q = q * r + 1.0 / 5040.0
    q = q * r + 1.0 / 720.0
    q = q * r + 1.0 / 120.0
    q = q * r + 1.0 / 24.0
    q = q * r + 1.0 / 6.0
    q = q * r + 0.5
    p = r + r * r * q  # e^r - 1 to its last bits: r is the larger term, nothing cancels
    a, b = _pow2_halves(n)
    scale = a * b
    # 2^n - 1 is exact below 2^54, and 2^n e^r - 1 does not cancel for n != 0 (e^r is 0.7 to 1.4); above,
    # the 1 is lost anyway, and 2^1024 would overflow before the product by e^r
    y = p * scale + (scale - 1.0) if n < 54 else (p + 1.0) * a * b - 1.0
    y = float("inf") if x > 709.782712893384 else y
    return x if (x != x or x == 0.0) else y  # NaN, and -0 kept


@njit(inline="always", cache=True)
def expm1_32(x):
    x = float32(x)
    c = min(max(x, float32(-18.0)), float32(89.0))  # below -18, e^x is under 2^-25: -1
    n, r = _reduced_by_ln2_32(c)
    q = float32(1.0 / 40320.0)
    q = q * r + float32(1.0 / 5040.0)
    q = q * r + float32(1.0 / 720.0)
    q = q * r + float32(1.0 / 120.0)
    q = q * r + float32(1.0 / 24.0)
    q = q * r + float32(1.0 / 6.0)
    q = q * r + float32(0.5)
    p = r + r * r * q
    a, b = _pow2_halves32(n)
    scale = a * b
    y = p * scale + (scale - float32(1.0)) if n < int32(25) else (p + float32(1.0)) * a * b - float32(1.0)
    y = float32(float("inf")) if x > float32(88.72283935546875) else y
    return x if (x != x or x == float32(0.0)) else y


@njit(inline="always", cache=True)
def pow32(x, y):
    # |x|^y as exp(y log|x|) in float64: its relative error, about |y log|x|| float64 ulps, stays far below
    # a float32 ulp wherever the result is a float32 (|y log|x|| < 104); then C's special cases
    xd, yd = float(x), float(y)
    out = exp(yd * log(abs(xd)))
    whole = np.floor(yd) == yd  # an integer, or infinite
    half = yd * 0.5
    odd = whole and np.floor(half) != half and abs(yd) < 9007199254740992.0
    out = -out if (odd and _bits_of_double(xd) < 0) else out  # a negative base (-0 too) to an odd power
    # the square root of a negative number: the processor's default NaN, as the C library's pow returns
    out = np.sqrt(xd) if (xd < 0.0 and xd != -float("inf") and not whole and yd == yd) else out
    out = 1.0 if (yd == 0.0 or xd == 1.0 or (xd == -1.0 and abs(yd) == float("inf"))) else out
    return float32(out)


# fdlibm's s_erf.c: erf on |x| < 0.84375 (pp over qq), on [0.84375, 1.25) (erx + pa over qa, in |x| - 1),
# and 1 - e^(-x^2 - 0.5625 + ra over sa, or rb over sb from 1/0.35 on, in 1/x^2) / |x| up to 6
_ERX = 8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02, 0.0)
_SB = (3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01, 0.0)


@njit(inline="always", cache=True)
def erf64(x):
    """``erf`` of a float64 within about an ulp, fdlibm's approximations on each of its ranges computed
    without branches (every range's rational, then a selection), the tail's ``e^(-x^2)`` as two
    exponentials of ``z``, ``x`` with its low 32 bits cleared, whose square is exact."""
    x = float(x)
    a = abs(x)
    z = x * x
    small = x + x * ((_PP[0] + z * (_PP[1] + z * (_PP[2] + z * (_PP[3] + z * _PP[4]))))
                     / (1.0 + z * (_QQ[0] + z * (_QQ[1] + z * (_QQ[2] + z * (_QQ[3] + z * _QQ[4]))))))
    d = a - 1.0
    p = _PA[0] + d * (_PA[1] + d * (_PA[2] + d * (_PA[3] + d * (_PA[4] + d * (_PA[5] + d * _PA[6])))))
    q = 1.0 + d * (_QA[0] + d * (_QA[1] + d * (_QA[2] + d * (_QA[3] + d * (_QA[4] + d * _QA[5])))))
    middle = _ERX + p / q
    t = 1.0 / (z if a < 6.0 else 36.0)
    far = a >= 2.857142857142857
    r0, r1, r2, r3 = (_RB[0], _RB[1], _RB[2], _RB[3]) if far else (_RA[0], _RA[1], _RA[2], _RA[3])
    r4, r5, r6, r7 = (_RB[4], _RB[5], _RB[6], _RB[7]) if far else (_RA[4], _RA[5], _RA[6], _RA[7])
    s0, s1, s2, s3 = (_SB[0], _SB[1], _SB[2], _SB[3]) if far else (_SA[0], _SA[1], _SA[2], _SA[3])
    s4, s5, s6, s7 = (_SB[4], _SB[5], _SB[6], _SB[7]) if far else (_SA[4], _SA[5], _SA[6], _SA[7])
    rr = r0 + t * (r1 + t * (r2 + t * (r3 + t * (r4 + t * (r5 + t * (r6 + t * r7))))))
    ss = 1.0 + t * (s0 + t * (s1 + t * (s2 + t * (s3 + t * (s4 + t * (s5 + t * (s6 + t * s7)))))))
    b = min(a, 6.0)
    hi = _upper_half(b)  # hi * hi is exact
    tail = 1.0 - exp(-hi * hi - 0.5625) * exp((hi - b) * (hi + b) + rr / ss) / b
    big = middle if a < 1.25 else (tail if a < 6.0 else 1.0)
    big = big if x > 0 else -big
    return small if a < 0.84375 else (x if x != x else big)


#: |x| below which sin32 and cos32 are exact (to about an ulp); kernels rerun larger ones with the
#: C library's functions (sin32_exact, cos32_exact)
TRIG_LIMIT = 1048576.0
_TWO_OVER_PI = 0.6366197723675814
# pi/2 in two parts: the first 33 bits, whose product by any k below 2^20 is exact, and the rest
_PIO2_HI = 1.57079632673412561417e+00
_PIO2_LO = 6.07710050650619224932e-11
_ROUND = 6755399441055744.0  # 1.5 * 2^52: adding and taking it away rounds to the nearest integer


@njit(inline="always", cache=True)
def _by_quadrant(k, s, c):
    """sin and cos of ``x = k pi/2 + r`` from ``s = sin(r)`` and ``c = cos(r)``: the quadrant picks and signs them."""
    n = int64(k) & 3  # two's complement: -1 is 3
    sin_x = c if n & 1 else s
    cos_x = s if n & 1 else c
    return (-sin_x if n & 2 else sin_x), (-cos_x if (n + 1) & 2 else cos_x)


@njit(inline="always", cache=True)
def _sin_cos(x):
    """sin and cos of a float64 ``|x| < TRIG_LIMIT``: ``x = k pi/2 + r``, the Taylor series of both on ``r``."""
    k = (x * _TWO_OVER_PI + _ROUND) - _ROUND
    r = (x - k * _PIO2_HI) - k * _PIO2_LO
    r2 = r * r
    # r times the series' ratio to r: sin(-0) is -0
    s = r * (1.0 + r2 * (-0.16666666666666666 + r2 * (0.008333333333333333 + r2 * (-0.0001984126984126984
                                                                                 + r2 * 2.7557319223985893e-06))))
    c = 1.0 + r2 * (-0.5 + r2 * (0.041666666666666664 + r2 * (-0.001388888888888889 + r2 * (
        2.48015873015873e-05 + r2 * -2.755731922398589e-07))))
    return _by_quadrant(k, s, c)


@njit(inline="always", cache=True)
def sin32(x):
    return float32(_sin_cos(float(x))[0])


@njit(inline="always", cache=True)
def cos32(x):
    return float32(_sin_cos(float(x))[1])


@njit(inline="always", cache=True)
def sin32_exact(x):
    return float32(math.sin(float(x)))


@njit(inline="always", cache=True)
def cos32_exact(x):
    return float32(math.cos(float(x)))


# pi/2 in three parts of 33 bits (products by any k below 2^20 are exact) and the rest: fdlibm's
_PIO2_1 = 1.57079632673412561417e+00
_PIO2_2 = 6.07710050630396597660e-11
_PIO2_3 = 2.02226624871116645580e-21
_PIO2_3T = 8.47842766036889956997e-32
# fdlibm's __kernel_sin and __kernel_cos polynomials on [-pi/4, pi/4]
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11


@njit(inline="always", cache=True)
def _two_sum(a, b):
    """``a + b`` and its rounding error (Knuth's TwoSum: no condition on the operands' sizes)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@njit(inline="always", cache=True)
def _sin_cos64(x):
    """sin and cos of a float64 ``|x| < TRIG_LIMIT``, each within an ulp: ``x = k pi/2 + r`` with ``r`` as a
    sum of two doubles (``hi + lo``, ``|hi| <= pi/4``), exact to far more bits than the closest multiple of
    pi/2 can cancel, then fdlibm's kernels on ``hi + lo``."""
    k = (x * _TWO_OVER_PI + _ROUND) - _ROUND
    r1, e1 = _two_sum(x - k * _PIO2_1, -(k * _PIO2_2))  # the first difference is exact
    r2, e2 = _two_sum(r1, -(k * _PIO2_3))
    tail = (e1 + e2) - k * _PIO2_3T
    hi = r2 + tail
    lo = tail - (hi - r2)
    small = k == 0.0  # |x| <= pi/4: r is x itself (its sign on -0 kept)
    hi = x if small else hi
    lo = 0.0 if small else lo
    z = hi * hi
    v = z * hi
    p = _S2 + z * (_S3 + z * (_S4 + z * (_S5 + z * _S6)))
    s = hi - ((z * (0.5 * lo - v * p) - lo) - v * _S1)
    q = z * (_C1 + z * (_C2 + z * _C3)) + (z * z) * (z * z) * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (z * q - hi * lo))
    return _by_quadrant(k, s, c)


@njit(inline="always", cache=True)
def sin64(x):
    return _sin_cos64(x)[0]


@njit(inline="always", cache=True)
def cos64(x):
    return _sin_cos64(x)[1]


@njit(inline="always", cache=True)
def sin64_exact(x):
    return math.sin(x)


@njit(inline="always", cache=True)
def cos64_exact(x):
    return math.cos(x)


#: ``powi64(x, n)`` is exact where ``|x| ** n`` lies within 2^-POWI_SAFE and 2^POWI_SAFE: no product in
#: between can overflow, or lose bits to the subnormals (kernels do other arguments again: ``powi64_exact``)
POWI_SAFE = 900.0


@njit(inline="always", cache=True)
def _two_prod(a, b):
    """``a * b`` and its rounding error, exactly (a fused multiply-add: Dekker's product of split halves
    would need every step rounded as written, which the kernels' contraction flags do not promise)."""
    p = a * b
    return p, _fma(a, b, -p)


@njit(inline="always", cache=True)
def _mul_dd(ah, al, bh, bl):
    """The product of two double-doubles ``ah + al`` and ``bh + bl``, as one."""
    p, e = _two_prod(ah, bh)
    e += ah * bl + al * bh
    h = p + e
    return h, e - (h - p)


@njit(inline="always", cache=True)
def powi64(x, n):
    """``x ** n`` of a float64 and an int ``n != 0``, within an ulp where ``|x| ** n`` lies
    within 2^-POWI_SAFE and 2^POWI_SAFE, and for ``n > 0`` at ``x = ±0`` too (a ReLU's zeros): binary
    powering in double-double (about 2^-100 of relative error per product), then for ``n < 0`` the
    reciprocal, corrected by its residual."""
    m = abs(n)
    bh, bl = x, 0.0
    rh, rl = 1.0, 0.0
    while True:
        if m & 1:
            rh, rl = _mul_dd(rh, rl, bh, bl)
        m >>= 1
        if m == 0:
            break
        bh, bl = _mul_dd(bh, bl, bh, bl)
    if n > 0:
        return rh + rl if x != 0.0 else (x if n & 1 else 0.0)  # -0 to an odd power is -0
    q = 1.0 / rh
    p, e = _two_prod(q, rh)
    return q + (((1.0 - p) - e) - q * rl) * q


@njit(inline="always", cache=True)
def powi32(x, n):
    """``x ** n`` of a float32 and an int ``n`` with ``0 < |n| <= 16``: binary powering in float64, then for
    ``n < 0`` the reciprocal, rounded to float32 once.  At most a dozen float64 roundings (2^-49 of
    relative error) leave the float32 within 0.5 + 2^-25 ulp of the exact power; float64's range holds
    every such power of a float32 that float32 holds, and one that overflows or underflows float64 is
    inf or 0 in float32 too (NaN, infinities and signed zeros come out as NumPy's)."""
    m = abs(n)
    b = float64(x)  # float() of a float32 stays a float32 in Numba
    r = 1.0
    while True:
        if m & 1:
            r *= b
        m >>= 1
        if m == 0:
            break
        b *= b
    return float32(r if n > 0 else 1.0 / r)


@njit(inline="always", cache=True)
def powi64_exact(x, n):
    return math.pow(x, float(n))


#: 2/3 as a sum of two doubles: _log_dd's series needs its s^3 term to more bits than a double holds
_TWO_THIRDS_HI = 2.0 / 3.0
_TWO_THIRDS_LO = float(Fraction(2, 3) - Fraction(_TWO_THIRDS_HI))
#: the largest |y log x| of pow64's own path: e^708 and e^-708 are normal, so 2^n scales exactly
_POW_REACH = 708.0


@njit(inline="always", cache=True)
def _log_dd(x):
    """``log(x)`` of a positive, normal, finite float64 as a sum of two doubles, to about 2^-65 of its
    size: ``x = 2^k m`` with ``m`` in ``[sqrt(1/2), sqrt(2))``, ``log(m) = 2 atanh(s)`` with ``s = (m - 1) / (m +
    1)`` (``|s| <= 0.1716``) as a double-double, its series ``2s + 2s^3/3`` in double-double and the terms
    from ``s^5`` on (their Taylor coefficients ``2 / (2i + 1)`` up to ``s^27``: the next is below 2^-70 of
    ``2s``) in double."""
    k, m = _exponent_significand(x)
    f = m - 1.0  # exact: m is within a factor 2 of 1
    dh = 2.0 + f
    dl = f - (dh - 2.0)
    sh = f / dh
    sl = (_fma(-sh, dh, f) - sh * dl) / dh  # what the quotient misses, over the divisor
    z = sh * sh
    t = 2.0 / 27.0
    t = t * z + 2.0 / 25.0
    t = t * z + 2.0 / 23.0
    t = t * z + 2.0 / 21.0
    t = t * z + 2.0 / 19.0
    t = t * z + 2.0 / 17.0
    t = t * z + 2.0 / 15.0
    t = t * z + 2.0 / 13.0
    t = t * z + 2.0 / 11.0
    t = t * z + 2.0 / 9.0
    t = t * z + 2.0 / 7.0
    t = t * z + 2.0 / 5.0
    s2h, s2l = _two_prod(sh, sh)
    s2l += 2.0 * sh * sl
    s3h, s3l = _two_prod(s2h, sh)
    s3l += s2h * sl + s2l * sh
    ph, pl = _two_prod(s3h, _TWO_THIRDS_HI)  # s^3 (2/3 + s^2 t): the 2/3 in two parts
    pl += s3h * (_TWO_THIRDS_LO + z * t) + s3l * _TWO_THIRDS_HI
    lh, ll = _two_sum(2.0 * sh, ph)
    ll += 2.0 * sl + pl
    dk = float(k)
    h, e = _two_sum(dk * _LN2_HI, lh)  # k ln2's high part is exact: its 32 bits times k's 11
    return h, e + (ll + dk * _LN2_LO)


@njit(inline="always", cache=True)
def pow64_safe(x, y):
    """Whether :func:`pow64` is exact at ``x, y``: ``x`` positive, normal and finite, and ``|y log x|`` below
    ``_POW_REACH`` by a bound read off ``x = 2^k m`` (``|log m| <= sqrt(2) |m - 1|`` for ``m`` in
    ``[sqrt(1/2), sqrt(2))``); NaN and infinite ``y`` fail it.  The reduction of a number that is not
    positive and normal is garbage, which the range test on ``x`` refuses."""
    k, m = _exponent_significand(x)
    bound = abs(y) * (abs(float(k)) * 0.6931471805599453 + 1.4142135623730951 * abs(m - 1.0))
    return 2.2250738585072014e-308 <= x <= 1.7976931348623157e308 and bound < _POW_REACH


@njit(inline="always", cache=True)
def pow64(x, y):
    """``x ** y`` of float64s within an ulp where :func:`pow64_safe` holds (kernels do the others again
    with ``pow64_exact``, the C library's): ``e^t`` of ``t = y log x`` in double-double (``_log_dd`` times
    ``y``), ``t = n ln2 + r`` with ``r`` as a double-double (the first difference exact), ``e^r`` as ``1 + r
    + r^2 P(r)`` with ``P``'s Taylor series to ``r^13 / 15!`` (below 2^-60), times ``2^n``."""
    lh, ll = _log_dd(x)
    th, tl = _two_prod(y, lh)
    tl += y * ll
    c = min(max(th, -_POW_REACH), _POW_REACH)  # an unsafe argument's reduction stays defined
    dn = _round_even(c * _LOG2E)
    n = int(dn)
    rh, rl = _two_sum(c - dn * _LN2_HI, tl - dn * _LN2_LO)
    p = 1.0 / 1307674368000.0
    p = p * rh + 1.0 / 87178291200.0
    p = p * rh + 1.0 / 6227020800.0
    p = p * rh + 1.0 / 479001600.0
    p = p * rh + 1.0 / 39916800.0
    p = p * rh + 1.0 / 3628800.0
    p = p * rh + 1.0 / 362880.0
    p = p * rh + 1.0 / 40320.0
    p = p * rh + 1.0 / 5040.0
    p = p * rh + 1.0 / 720.0
    p = p * rh + 1.0 / 120.0
    p = p * rh + 1.0 / 24.0
    p = p * rh + 1.0 / 6.0
    p = p * rh + 0.5
    q = rh * rh * p
    eh, el = _two_sum(1.0, rh)
    el += q + rl * (1.0 + rh + q)
    return (eh + el) * _pow2(n)


@njit(inline="always", cache=True)
def pow64_exact(x, y):
    return math.pow(x, y)


def exp_of(x):
    """``exp32`` of a float32, ``exp`` of anything else: for kernels written once for both dtypes."""
    raise NotImplementedError("exp_of runs only inside Numba-compiled code")


@overload(exp_of, inline="always")
def _exp_of(x):
    if x == types.float32:
        return lambda x: exp32(x)
    return lambda x: exp(x)
