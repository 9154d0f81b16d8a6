"""Hypothesis strategies for named tensors: names, named shapes, tensors, broadcastable pairs.

Requires the ``hypothesis`` package (the ``test`` extra).
"""

from __future__ import annotations

from typing import Optional, Tuple

import hypothesis.strategies as st
import numpy as np

NAME_POOL = ("batch", "seq", "key", "head", "embed", "feat", "chan", "x", "y", "z")


@st.composite
def names(draw, ndim: int, named_fraction: Optional[float] = None, pool=NAME_POOL) -> Tuple[Optional[str], ...]:
    """A valid names tuple for ``ndim`` dims: distinct names from ``pool`` mixed with ``None``.

    ``named_fraction`` is the chance that a dim is named (1.0: every dim, 0.0: none);
    by default each dim is named or not as Hypothesis chooses.
    """
    if ndim > len(pool):
        raise ValueError(f"names: {ndim} dims need at least {ndim} distinct names, the pool has {len(pool)}.")
    chosen = draw(st.permutations(pool))[:ndim]
    if named_fraction is None:
        return tuple(n if draw(st.booleans()) else None for n in chosen)
    percent = round(named_fraction * 100)
    return tuple(n if draw(st.integers(0, 99)) < percent else None for n in chosen)


@st.composite
def named_shapes(draw, min_dims: int = 0, max_dims: int = 4, min_side: int = 1, max_side: int = 4) -> tuple:
    """``(shape, names)`` with random sizes and a random mix of names and ``None``."""
    ndim = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.integers(min_side, max_side)) for _ in range(ndim))
    return shape, draw(names(ndim))


@st.composite
def arrays(draw, shape, dtype: str = "float64", low: float = -3.0, high: float = 3.0) -> np.ndarray:
    """A NumPy array of ``shape`` (values drawn from a seed, so shrinking stays cheap)."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if dtype.startswith("float"):
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype.startswith("complex"):
        return (rng.uniform(low, high, size=shape) + 1j * rng.uniform(low, high, size=shape)).astype(dtype)
    if dtype == "bool":
        return rng.random(size=shape) < 0.5
    return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)


@st.composite
def tensors(draw, min_dims: int = 0, max_dims: int = 4, dtype: str = "float64", requires_grad: bool = False) -> tuple:
    """A named tensor with random shape, names and values, with its NumPy array: ``(t, a)``."""
    from ..ops.creation import tensor

    shape, nms = draw(named_shapes(min_dims, max_dims))
    a = draw(arrays(shape, dtype))
    return tensor(a, names=nms, requires_grad=requires_grad), a


@st.composite
def broadcastable_names(draw, max_dims: int = 4) -> tuple:
    """Two ``(shape, names)`` pairs that broadcast and whose names unify (rule 2).

    Both take their names from one distinct-names tuple at the same positions from the
    right (some dropped to ``None``), so no name can be misaligned.
    """
    n = draw(st.integers(0, max_dims))
    shape = [draw(st.integers(1, 4)) for _ in range(n)]
    full = draw(names(n))
    k = draw(st.integers(0, n))
    a_shape = tuple(s if draw(st.booleans()) else 1 for s in shape)
    b_shape = tuple(s if draw(st.booleans()) else 1 for s in shape[n - k:])
    a_names = tuple(nm if draw(st.booleans()) else None for nm in full)
    b_names = tuple(nm if draw(st.booleans()) else None for nm in full[n - k:])
    return (a_shape, a_names), (b_shape, b_names)
