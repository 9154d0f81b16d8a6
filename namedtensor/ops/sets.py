"""Set and search ops with data-dependent results: PyTorch's ``unique unique_consecutive nonzero argwhere
searchsorted``.

Name rules (:func:`namedtensor._names.unique`, :func:`namedtensor._names.searchsorted`):

* ``unique``/``unique_consecutive`` with ``dim``: the input's names (the unique slices are a selection
  along ``dim``, as ``index_select`` makes); the inverse indices and the counts are 1-D, named as
  ``dim``.  Without ``dim`` the input is read flat: a 1-D input keeps its name, the values of a
  flattened one are unnamed, and the inverse indices have the input's shape and names.
* ``nonzero``/``argwhere``: ``(count, ndim)`` int64, unnamed (rows of coordinates); with
  ``as_tuple=True`` one unnamed 1-D tensor of coordinates per dim.
* ``searchsorted(sorted_sequence, values)``: ``values``' names; an N-dim sequence's leading dims
  match ``values``' leading dims by rule 2.

None is differentiable (indices, and values whose shape depends on the data, as in PyTorch).  The
shapes depend on the values, so a dry run (the meta device) raises ``DataDependentError``, except for
``searchsorted``.  ``unique`` sorts with the backend's stable sort and compares neighbours, so each
NaN is a value of its own (NaN != NaN), as the Array API standard says; complex values come in NumPy's
order (by real part, then imaginary part), where PyTorch has no unique of complex tensors.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import flag, operand, tensor_arg

__all__ = ["unique", "unique_consecutive", "nonzero", "argwhere", "searchsorted"]

Dim = Union[str, int]


def _ints(B, x):
    return B.astype(x, B.native(_dtypes.int64))


def _groups(B, rows, sort: bool):
    """``(order, starts, ranked)`` for the rows of the 2-D array ``rows``: the order that sorts them
    (stable, lexicographic; the identity when not ``sort``), in that order whether each row starts a new
    group (differs from the one before), and the rows so ordered.  Complex rows sort by their real parts,
    then their imaginary parts (NumPy's order)."""
    if B.dtype_of(rows).kind == "c":
        order, starts, _ = _groups(B, B.concat([B.real(rows), B.imag(rows)], axis=1), sort)
        return order, starts, B.take(rows, order, axis=0)
    n, m = rows.shape
    order = B.arange(n, dtype=B.native(_dtypes.int64))
    if sort:
        for j in range(m - 1, -1, -1):  # stable sorts from the last column: lexicographic order
            column = B.take(B.getitem(rows, (slice(None), j)), order, axis=0)
            order = B.take(order, B.sort_indices(column, 0, False, True), axis=0)
    ranked = B.take(rows, order, axis=0)
    if n == 0:
        return order, B.zeros((0,), dtype=B.native(_dtypes.bool_)), ranked
    differs = B.any(B.not_equal(ranked[1:, ...], ranked[:-1, ...]), axis=1)
    first = B.ones((1,), dtype=B.native(_dtypes.bool_))
    return order, B.concat([first, differs]), ranked


class _Unique(Op):
    """The unique rows of ``x`` moved to ``(n, -1)`` along ``axis`` (every element, flat, for None):
    ``(values, inverse, counts, first)``."""

    name = "unique"
    differentiable = False
    n_outputs = 4

    @staticmethod
    def forward(B, x, axis, sort):
        shape = tuple(x.shape)
        if axis is None:
            rows = B.reshape(x, (-1, 1))
        else:
            moved = B.moveaxis(x, axis, 0)
            rows = B.reshape(moved, (shape[axis], math.prod(s for i, s in enumerate(shape) if i != axis)))
        order, starts, ranked = _groups(B, rows, sort)
        group = B.cumulative_sum(_ints(B, starts)) - 1 if rows.shape[0] else _ints(B, starts)
        where = B.nonzero(starts)[0]
        count = int(where.shape[0])
        values = B.take(ranked, where, axis=0)
        inverse = B.zeros((rows.shape[0],), dtype=B.native(_dtypes.int64))
        B.setitem(inverse, order, group)
        ends = B.concat([where[1:], B.asarray([rows.shape[0]], dtype=_dtypes.int64)]) if count else where
        counts = ends - where
        first = B.take(order, where, axis=0)
        if axis is None:
            return B.reshape(values, (count,)), B.reshape(inverse, shape), counts, first
        out = B.reshape(values, (count,) + tuple(s for i, s in enumerate(shape) if i != axis))
        return B.moveaxis(out, 0, axis), inverse, counts, first


class UniqueResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor
    counts: Tensor
    indices: Tensor


def _unique_all(input: Tensor, dim: Optional[Dim], sort: bool, op: str) -> UniqueResult:
    """The four results of :class:`_Unique`, named by :func:`namedtensor._names.unique`."""
    tensor_arg(input, op)
    axis, names, inverse_names, count_names = _names.unique(input._names, _names.hashable_dims(dim), op)
    return UniqueResult(*apply(_Unique, (input,), (names, inverse_names, count_names, count_names), axis=axis,
                               sort=sort))


def _pick(r: UniqueResult, return_inverse: bool, return_counts: bool):
    out = (r.values,) + ((r.inverse_indices,) if return_inverse else ()) + ((r.counts,) if return_counts else ())
    return out[0] if len(out) == 1 else out


def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False,
           dim: Optional[Dim] = None):
    """PyTorch's ``torch.unique``: the sorted unique values (flat, or the unique slices along ``dim``, a
    name or an int), and with ``return_inverse``/``return_counts`` the index of each input entry's value
    and each value's count.  ``sorted=False`` sorts anyway, as PyTorch's CPU version does."""
    flag(sorted, "sorted", "unique")
    r = _unique_all(input, dim, True, "unique")
    return _pick(r, flag(return_inverse, "return_inverse", "unique"), flag(return_counts, "return_counts", "unique"))


def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: Optional[Dim] = None):
    """PyTorch's ``torch.unique_consecutive``: each run of equal consecutive values (or slices along
    ``dim``) once, in order; inverse and counts as in :func:`unique`."""
    r = _unique_all(input, dim, False, "unique_consecutive")
    return _pick(r, flag(return_inverse, "return_inverse", "unique_consecutive"),
                 flag(return_counts, "return_counts", "unique_consecutive"))


# ----------------------------------------------------------------------------- nonzero


class _Nonzero(Op):
    name = "nonzero"
    differentiable = False

    @staticmethod
    def forward(B, x):
        if not x.ndim:  # a 0-dim tensor: one empty row of coordinates if it is nonzero, none if not
            count = int(B.nonzero(B.reshape(x, (1,)))[0].shape[0])
            return B.zeros((count, 0), dtype=B.native(_dtypes.int64))
        return _ints(B, B.stack(list(B.nonzero(x)), axis=1))


def nonzero(input: Tensor, *, as_tuple: bool = False) -> Union[Tensor, Tuple[Tensor, ...]]:
    """PyTorch's ``torch.nonzero``: the coordinates of the nonzero entries, row-major, as a ``(count,
    ndim)`` int64 tensor, or (``as_tuple=True``) one 1-D tensor per dim (NumPy's order)."""
    tensor_arg(input, "nonzero")
    if not flag(as_tuple, "as_tuple", "nonzero"):
        return apply(_Nonzero, (input,), _names.unnamed(2))
    # PyTorch reads a 0-dim tensor as 1-dim here: (tensor([0]),) where it is nonzero
    coords = apply(_Nonzero, (input.reshape(1) if input.ndim == 0 else input,), _names.unnamed(2))
    return tuple(coords.unbind(1))


def argwhere(input: Tensor) -> Tensor:
    """PyTorch's ``torch.argwhere``: ``nonzero(input)``, the ``(count, ndim)`` coordinates."""
    return nonzero(input)


# ----------------------------------------------------------------------------- searchsorted


class _SearchSorted(Op):
    name = "searchsorted"
    differentiable = False

    @staticmethod
    def forward(B, seq, x, right, dtype, common):
        if common is not None:
            seq, x = B.astype(seq, B.native(common)), B.astype(x, B.native(common))
        if seq.ndim == 1:
            out = B.searchsorted(seq, x, right)
        else:
            lead = tuple(seq.shape[:-1])
            rows_seq = B.reshape(seq, (-1, seq.shape[-1]))
            rows_x = B.reshape(x, (-1, x.shape[-1]))
            found = [B.searchsorted(rows_seq[i, ...], rows_x[i, ...], right) for i in range(rows_seq.shape[0])]
            out = B.reshape(B.stack(found, axis=0), lead + (x.shape[-1],))
        return B.astype(out, B.native(dtype))


def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: Optional[str] = None, sorter: Optional[Tensor] = None) -> Tensor:
    """PyTorch's ``torch.searchsorted``: for each value of ``input``, the index in the innermost dim of
    ``sorted_sequence`` where it would be inserted to keep the order (before equal entries, or after
    them with ``right=True``/``side="right"``).  A 1-D sequence serves every value; an N-dim one is a
    batch whose leading dims match ``input``'s.  ``sorter``: the indices that sort an unsorted sequence.
    int64 (int32 with ``out_int32``), with ``input``'s names."""
    op = "searchsorted"
    tensor_arg(sorted_sequence, op, "sorted_sequence")
    values = operand(input, sorted_sequence, op)
    if not isinstance(values, Tensor):
        # a number is weak (NumPy 2's rule): it takes the sequence's dtype, but a float among integers is not
        # truncated to one (2.5 goes between 2 and 3)
        exact = isinstance(values, float) and sorted_sequence.dtype.kind in "iub"
        dtype = _dtypes.float64 if exact else sorted_sequence.dtype
        values = Tensor._make(sorted_sequence._B.asarray(values, dtype=dtype), (), sorted_sequence._B)
    right = flag(right, "right", op)
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"{op}: side must be 'left' or 'right', got {side!r}.")
        if right and side == "left":
            raise ValueError(f"{op}: side='left' and right=True contradict each other; give one of them.")
        right = side == "right"
    if sorter is not None:
        tensor_arg(sorter, op, "sorter")
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    if sorted_sequence.ndim == 0:
        raise ValueError(f"{op}: sorted_sequence must have at least 1 dim, got a 0-dim tensor.")
    if sorted_sequence.dtype.kind == "c" or values.dtype.kind == "c":
        raise TypeError(f"{op}: complex tensors have no order; search the real parts.")
    names = _names.searchsorted(sorted_sequence._names, values._names, op)
    if sorted_sequence.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise ValueError(f"{op}: an N-dim sorted_sequence's leading dims must equal input's: got shapes "
                         f"{sorted_sequence.shape} and {values.shape} (all but the last dim must match).")
    common = None
    if sorted_sequence.dtype is not values.dtype:
        common = _dtypes.float64 if "f" in (sorted_sequence.dtype.kind, values.dtype.kind) else _dtypes.int64
    dtype = _dtypes.int32 if flag(out_int32, "out_int32", op) else _dtypes.int64
    return apply(_SearchSorted, (sorted_sequence, values), names, right=right, dtype=dtype, common=common)


METHODS = {"unique": unique, "unique_consecutive": unique_consecutive, "nonzero": nonzero, "argwhere": argwhere}
