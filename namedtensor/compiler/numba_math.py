"""exp, tanh and erf for the CPU kernels, written so that LLVM vectorizes the loops that call them.

Numba compiles ``math.exp`` to a call of the C library once per element, which no loop vectorizer can
widen; these are arithmetic, a comparison or two and a bit cast, all of which it can.  Each computes
in float64 and is exact to a few units in the last place of float64 (``exp``, ``tanh``) or of float32
(``erf32``, for float32 chains only; formulas.py says which formula may use which).

``exp``: ``x = n ln2 + r`` with ``|r| <= ln2 / 2`` (Cody and Waite's two-part ln2), ``e^r`` by its
Taylor series to degree 13, ``2^n`` built from the exponent bits in two halves so that results down
to the subnormals come out.  ``tanh``: ``1 - 2 / (e^{2|x|} + 1)`` with the sign, its Taylor series for
``|x| < 0.02`` (where the difference would cancel).  ``erf32``: the rational approximation of Eigen's
``generic_fast_erf_float`` on ``(-4, 4)``, ±1 beyond (float32 holds nothing else there).
"""

from __future__ import annotations

from numba import njit, types
from numba.extending import intrinsic

__all__ = ["exp", "tanh", "erf32"]

_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10


@intrinsic
def _double_from_bits(typingctx, bits):
    """The float64 whose bits are the int64 ``bits``."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], context.get_value_type(types.float64))

    return sig, codegen


@njit(inline="always", cache=True)
def _pow2(n):
    return _double_from_bits((n + 1023) << 52)


@njit(inline="always", cache=True)
def exp(x):
    x = float(x)
    # the range reduction of a NaN or a far-out x is undefined: clamp it, and select the answer at the end
    c = min(max(x, -746.0), 710.0)
    n = int(c * _LOG2E + (0.5 if c >= 0 else -0.5))
    r = (c - n * _LN2_HI) - n * _LN2_LO
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
    p = p * r + 1.0
    half = n // 2
    y = p * _pow2(half) * _pow2(n - half)
    y = float("inf") if x > 709.782712893384 else y
    y = 0.0 if x < -745.1332191019412 else y
    return x if x != x else y


@njit(inline="always", cache=True)
def tanh(x):
    x = float(x)
    a = abs(x)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))))
    t = 1.0 - 2.0 / (exp(2.0 * min(a, 20.0)) + 1.0)  # tanh(20) is 1 in float64
    big = t if x > 0 else -t
    return small if a < 0.02 else (x if x != x else big)


@njit(inline="always", cache=True)
def erf32(x):
    x = float(x)
    outside = abs(x) >= 4.0  # float32's erf is exactly 1 there (so gelu(-inf) is -inf * 0, NaN, as eagerly)
    edge = 1.0 if x > 0 else -1.0
    x = min(max(x, -4.0), 4.0) if x == x else x
    x2 = x * x
    p = x2 * -2.72614225801306e-10 + 2.77068142495902e-08
    p = p * x2 + -2.10102402082508e-06
    p = p * x2 + -5.69250639462346e-05
    p = p * x2 + -7.34990630326855e-04
    p = p * x2 + -2.95459980854025e-03
    p = p * x2 + -1.60960333262415e-02
    q = x2 * -1.45660718464996e-05 + -2.13374055278905e-04
    q = q * x2 + -1.68282697438203e-03
    q = q * x2 + -7.37332916720468e-03
    q = q * x2 + -1.42647390514189e-02
    return edge if outside else x * p / q
