"""The CPU kernels' math functions (backends/numba_math.py) against NumPy's, on one thread.

Each function runs over a million float64 elements (float32 for the ``32`` ones) in a Numba loop
compiled as nt.compile's kernels are (``error_model='numpy'``, contraction into fused multiply-adds),
beside the NumPy call that computes the same (SciPy's ``erf``, where SciPy is installed); the columns take turns in shuffled rounds
(bench/side_by_side.py).  Figures are medians in ms and the median of the per-round ratios; the
accuracy column is the largest error in ulps against the same function in long double (x86's 64-bit
significand; the C library's own result where long double is a double, and for ``erf``).

    pip install numba
    python bench/kernel_math.py [--rounds 15]

OpenBLAS tuning variables that this workplace sets for old CPUs are removed here, in this script's own
environment only.
"""

from __future__ import annotations

import argparse
import math
import statistics

from own_env import run_in_own_environment
from side_by_side import interleaved

_parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
_parser.add_argument("--rounds", type=int, default=15)
ARGS = _parser.parse_args()
run_in_own_environment(1)

import numba  # noqa: E402
import numpy as np  # noqa: E402

from namedtensor.backends import numba_math as nm  # noqa: E402

try:
    from scipy.special import erf
except ImportError:  # NumPy has no erf: that row needs SciPy's
    erf = None

N = 1_000_000


def _loop(fn, binary: bool):
    """A kernel-like loop of ``fn`` over its operands."""
    if binary:
        @numba.njit(error_model="numpy", fastmath={"contract"})
        def run(x, y, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i], y[i])
    else:
        @numba.njit(error_model="numpy", fastmath={"contract"})
        def run(x, y, out):
            for i in range(x.shape[0]):
                out[i] = fn(x[i])
    return run


@numba.njit(inline="always")
def _powi4(x):
    return nm.powi64(x, 4)


@numba.njit(inline="always")
def _powi16(x):
    return nm.powi64(x, 16)


@numba.njit(inline="always")
def _powi5_32(x):
    return nm.powi32(x, 5)


rng = np.random.default_rng(0)
wide = rng.uniform(-20, 20, N)
positive = rng.uniform(0.01, 100, N)
exponents = rng.uniform(-5, 5, N)
#: name: (numba_math function, NumPy's, operands, whether the function takes two)
CASES = {
    "exp": (nm.exp, np.exp, (wide, None), False),
    "log": (nm.log, np.log, (positive, None), False),
    "tanh": (nm.tanh, np.tanh, (wide, None), False),
    "expm1": (nm.expm1, np.expm1, (wide, None), False),
    "log2": (nm.log2, np.log2, (positive, None), False),
    "exp2": (nm.exp2, np.exp2, (wide, None), False),
    "sin64": (nm.sin64, np.sin, (wide * 1e3, None), False),
    "x ** 4 (powi64)": (_powi4, lambda x: np.power(x, 4.0), (wide, None), False),
    "x ** 16 (powi64)": (_powi16, lambda x: np.power(x, 16.0), (positive ** 0.1, None), False),
    "x ** y (pow64)": (nm.pow64, np.power, (positive, exponents), True),
    "exp32": (nm.exp32, np.exp, (wide.astype(np.float32), None), False),
    "tanh32": (nm.tanh32, np.tanh, (wide.astype(np.float32), None), False),
    "log1p32": (nm.log1p32, np.log1p, (positive.astype(np.float32), None), False),
    "expm1_32": (nm.expm1_32, np.expm1, (wide.astype(np.float32), None), False),
    "log2_32": (nm.log2_32, np.log2, (positive.astype(np.float32), None), False),
    "exp2_32": (nm.exp2_32, np.exp2, (wide.astype(np.float32), None), False),
    "erf64": (nm.erf64, erf, (wide * 0.3, None), False),
    "x ** y (pow32)": (nm.pow32, np.power, (positive.astype(np.float32), exponents.astype(np.float32)), True),
    "x ** 5 (powi32)": (_powi5_32, lambda x: np.power(x, x.dtype.type(5.0)), (wide.astype(np.float32), None), False),
}


def _ulps(out: np.ndarray, want: np.ndarray) -> float:
    ulp = np.spacing(np.abs(want.astype(out.dtype))).astype(np.longdouble)
    return float(np.max(np.abs(out.astype(np.longdouble) - want) / ulp))


def main() -> None:
    print(f"numba_math against NumPy, {N:,} elements, 1 thread ({ARGS.rounds} rounds; medians, ms)\n")
    print("| function | numba_math | NumPy | numba_math / NumPy | max ulps (numba_math / NumPy) |")
    print("|---|---|---|---|---|")
    for name, (fn, reference, (x, y), binary) in CASES.items():
        if reference is None:
            continue
        run = _loop(fn, binary)
        out = np.empty_like(x)
        ys = x if y is None else y
        fns = {"ours": lambda: run(x, ys, out), "numpy": (lambda: reference(x)) if y is None else (lambda: reference(x, y))}
        times = interleaved(fns, ARGS.rounds)
        ratio = statistics.median(a / b for a, b in zip(times["ours"], times["numpy"]))
        wide_x = x.astype(np.longdouble)
        if reference is erf:  # SciPy's erf has no long double loop: the C library's, itself within an ulp
            want = np.array([math.erf(v) for v in x], np.longdouble)
        else:
            want = reference(wide_x) if y is None else reference(wide_x, y.astype(np.longdouble))
        mine, theirs = _ulps(out, want), _ulps(fns["numpy"](), want)
        print(f"| {name} | {statistics.median(times['ours']):.2f} | {statistics.median(times['numpy']):.2f} | "
              f"{ratio:.2f}x | {mine:.2f} / {theirs:.2f} |")


if __name__ == "__main__":
    main()
