"""Joining and splitting: ``cat``, ``stack``, ``split``, ``chunk``, ``unbind`` and ``pad``.

Name rules (in :mod:`namedtensor._names`):

* ``cat(tensors, dim)``: the tensors' names unify dim by dim (``None`` matches any name) and the
  result has the unified names (``_names.cat``);
* ``stack(tensors, dim)``: as ``cat``, plus a new dim: a str ``dim`` is the new dim's name and it
  goes first; an int ``dim`` is the position of a new unnamed dim (``_names.stack``);
* ``split``/``chunk`` keep the names; ``unbind`` removes the dim (``_names.remove``);
* ``pad`` keeps the names; widths are given per dim, by name: ``pad(t, {"seq": (0, 3)})``.

Splits are one node with one output per piece (views of the input); each op's
gradient is its partner: cat <-> split, stack <-> unbind, pad <-> pad with negated widths.
"""

from __future__ import annotations

from typing import Mapping, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply, share_view
from ..tensor import Tensor
from ._common import int_sizes
from .indexing import _GetItem

__all__ = ["cat", "concat", "stack", "split", "chunk", "unbind", "pad"]

Dim = Union[str, int]


def _tensor_list(tensors, op: str) -> tuple:
    if isinstance(tensors, Tensor):
        raise TypeError(f"{op}: expected a sequence of tensors, got a single Tensor; wrap it in a list.")
    tensors = tuple(tensors)
    if not tensors:
        raise ValueError(f"{op}: expected a non-empty sequence of tensors.")
    for i, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"{op}: element {i} is a {type(x).__name__}, not a Tensor.")
    return tensors


def _same_dtype(tensors, op: str) -> None:
    """Refuse tensors of different dtypes, for the ops that PyTorch gives no promotion (``meshgrid``)."""
    first = tensors[0].dtype
    if any(x.dtype is not first for x in tensors[1:]):
        raise TypeError(
            f"{op}: all tensors must have the same dtype, got {', '.join(repr(x.dtype) for x in tensors)}; "
            "convert them first (e.g. .to(nt.float32))."
        )


def _promoted(tensors: tuple) -> tuple:
    """The tensors in the dtype they promote to (NumPy 2's rules, PyTorch's for the common cases), each
    converted by ``to`` so that a gradient goes back in its own dtype."""
    first = tensors[0].dtype
    if all(x.dtype is first for x in tensors[1:]):
        return tensors
    common = first
    for x in tensors[1:]:
        common = _dtypes.promote(common, x.dtype)
    return tuple(x if x.dtype is common else x.to(common) for x in tensors)


def _shapes_text(tensors) -> str:
    return ", ".join(f"{x.shape} {_names.fmt(x._names)}" for x in tensors)


# ----------------------------------------------------------------------------- cat / split


class _Cat(Op):
    name = "cat"
    complex_grad = True

    @staticmethod
    def forward(B, *xs, axis):
        return B.concat(xs, axis=axis)

    @staticmethod
    def backward(node, g):
        ax = node.params["axis"]
        return _split_at(g, ax, tuple(s[ax] for s in node.in_shapes), node.in_names)


class _Split(Op):
    """Cut ``x`` along ``axis`` at ``bounds``: one output (a view) per piece."""

    name = "split"
    complex_grad = True
    n_outputs = None  # as many outputs as pieces
    #: its outputs are views of its input (_views_of shares the version counter after the op has run,
    #: which a trace does not see): nt.compile refuses in-place edits of either, as for a reshape
    may_view = True

    @staticmethod
    def forward(B, x, axis, bounds):
        lead = (slice(None),) * axis
        return tuple(x[lead + (slice(a, b), ...)] for a, b in bounds)

    @staticmethod
    def backward(node, *grads):
        return (apply(_Cat, grads, node.in_names[0], axis=node.params["axis"]),)


def _split_at(t: Tensor, ax: int, sizes: Sequence[int], names) -> tuple:
    """Pieces of ``sizes`` along axis ``ax``, the k-th named ``names[k]``; one node, views of ``t``."""
    bounds = []
    start = 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    lead = (slice(None),) * ax
    return _views_of(apply(_Split, (t,), tuple(names), axis=ax, bounds=tuple(bounds)), t,
                     [lead + (slice(a, b), ...) for a, b in bounds])


def _views_of(pieces: tuple, t: Tensor, keys) -> tuple:
    """Pieces ``t[key]`` for each of ``keys`` (basic slicing, which gives views on every backend): they
    share its version counter, and an in-place edit of one is an edit of ``t`` (``share_view``)."""
    for p, key in zip(pieces, keys):
        share_view(p, t, _GetItem, {"key": key})
    return pieces


def cat(tensors: Sequence[Tensor], dim: Dim = 0) -> Tensor:
    """Concatenate along ``dim`` (a name or an int).  Names unify dim by dim (``None`` matches any name);
    sizes must be equal except along ``dim``; dtypes promote as in arithmetic (NumPy 2's rules: ``a + b``
    has the dtype of ``cat([a, b])``)."""
    tensors = _tensor_list(tensors, "cat")
    ax, names = _names.cat(tuple(x._names for x in tensors), dim, "cat")
    first = tensors[0].shape
    for x in tensors[1:]:
        s = x.shape
        if s[:ax] != first[:ax] or s[ax + 1 :] != first[ax + 1 :]:
            raise ValueError(
                f"cat: sizes must match except along {_names._dim_label(names, ax)}, got shapes and names "
                f"{_shapes_text(tensors)}."
            )
    return apply(_Cat, _promoted(tensors), names, axis=ax)


concat = cat


def split(t: Tensor, split_size_or_sections: Union[int, Sequence[int]], dim: Dim = 0) -> Tuple[Tensor, ...]:
    """Split along ``dim`` into pieces of ``split_size`` (the last may be smaller) or of the listed sizes
    (which must add up to the dim's size).  The pieces are views and keep ``t``'s names."""
    ax = _names.axis(t._names, dim, "split")
    n = t.shape[ax]
    where = f"{_names._dim_label(t._names, ax)} of size {n} (names {_names.fmt(t._names)})"
    s = split_size_or_sections
    if isinstance(s, (tuple, list)):
        sizes = int_sizes((s,), "split")
        if any(v < 0 for v in sizes) or sum(sizes) != n:
            raise ValueError(f"split: the sections {sizes} must be non-negative and add up to the size of {where}.")
    else:
        if isinstance(s, bool) or not hasattr(s, "__index__"):
            raise TypeError(f"split: split_size_or_sections must be an int or a sequence of ints, got {s!r}.")
        s = int(s.__index__())
        if s < 0 or (s == 0 and n != 0):
            raise ValueError(f"split: split_size must be positive (0 only for an empty dim), got {s} for {where}.")
        sizes = (n,) if s == 0 or n == 0 else tuple(min(s, n - a) for a in range(0, n, s))
    return _split_at(t, ax, sizes, (t._names,) * len(sizes))


def chunk(t: Tensor, chunks: int, dim: Dim = 0) -> Tuple[Tensor, ...]:
    """Split along ``dim`` into ``chunks`` pieces of equal size (the last may be smaller, and there may
    be fewer pieces, as in PyTorch).  Views that keep ``t``'s names."""
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise ValueError(f"chunk: chunks must be a positive int, got {chunks!r}.")
    ax = _names.axis(t._names, dim, "chunk")
    n = t.shape[ax]
    if n == 0:
        return _split_at(t, ax, (0,) * chunks, (t._names,) * chunks)
    return split(t, -(-n // chunks), ax)


# ----------------------------------------------------------------------------- stack / unbind


class _Stack(Op):
    name = "stack"
    complex_grad = True

    @staticmethod
    def forward(B, *xs, axis):
        return B.stack(xs, axis=axis)

    @staticmethod
    def backward(node, g):
        return apply(_Unbind, (g,), node.in_names, axis=node.params["axis"])


class _Unbind(Op):
    name = "unbind"
    complex_grad = True
    n_outputs = None  # as many outputs as slices
    may_view = True  # as _Split's

    @staticmethod
    def forward(B, x, axis):
        lead = (slice(None),) * axis
        return tuple(x[lead + (i, ...)] for i in range(x.shape[axis]))

    @staticmethod
    def backward(node, *grads):
        return (apply(_Stack, grads, node.in_names[0], axis=node.params["axis"]),)


def stack(tensors: Sequence[Tensor], dim: Dim = 0) -> Tensor:
    """Stack along a new dim.  A str ``dim`` names the new dim, which goes first (move it with
    ``align_to``/``permute``); an int ``dim`` is the position of a new unnamed dim.  The tensors'
    names unify dim by dim; shapes must be equal, dtypes promote as in :func:`cat`."""
    tensors = _tensor_list(tensors, "stack")
    ax, names = _names.stack(tuple(x._names for x in tensors), dim, "stack")
    first = tensors[0].shape
    if any(x.shape != first for x in tensors[1:]):
        raise ValueError(f"stack: all tensors must have the same shape, got {_shapes_text(tensors)}.")
    return apply(_Stack, _promoted(tensors), names, axis=ax)


def unbind(t: Tensor, dim: Dim = 0) -> Tuple[Tensor, ...]:
    """The slices along ``dim`` (a name or an int), as views without that dim."""
    ax = _names.axis(t._names, dim, "unbind")
    names = _names.remove(t._names, ax)
    lead = (slice(None),) * ax
    n = t._data.shape[ax]
    return _views_of(apply(_Unbind, (t,), (names,) * n, axis=ax), t, [lead + (i, ...) for i in range(n)])


# ----------------------------------------------------------------------------- pad


class _Pad(Op):
    """Constant padding; a negative width crops.  Its adjoint is itself with negated widths."""

    name = "pad"
    complex_grad = True

    @staticmethod
    def forward(B, x, widths, value):
        if any(a < 0 or b < 0 for a, b in widths):
            x = x[tuple(slice(max(-a, 0), s - max(-b, 0)) for (a, b), s in zip(widths, x.shape))]
        grow = tuple((max(a, 0), max(b, 0)) for a, b in widths)
        if any(a or b for a, b in grow):
            return B.pad(x, grow, value)
        # a crop (or nothing): an array of its own, as PyTorch's pad gives, not a slice of the input that
        # a write into the result would change behind the graph's back
        return B.asarray(x, copy=True)

    @staticmethod
    def backward(node, g):
        widths = tuple((-a, -b) for a, b in node.params["widths"])
        return (apply(_Pad, (g,), node.in_names[0], widths=widths, value=0),)


def _pad_widths(t: Tensor, pad, op: str) -> tuple:
    """Per-dim ``(before, after)`` from a ``{dim: (before, after) or n}`` dict or PyTorch's flat tuple."""
    ndim = t.ndim
    if isinstance(pad, Mapping):
        keys = tuple(pad.keys())
        axes = _names.axes(t._names, keys, op)
        widths = [(0, 0)] * ndim
        for k, a in zip(keys, axes):
            w = pad[k]
            if isinstance(w, (tuple, list)) and len(w) == 2:
                widths[a] = (_int(w[0], op), _int(w[1], op))
            elif not isinstance(w, (tuple, list)):
                n = _int(w, op)
                widths[a] = (n, n)
            else:
                raise ValueError(f"{op}: the width of dim {k!r} must be (before, after) or one int, got {w!r}.")
        return tuple(widths)
    if isinstance(pad, (tuple, list)):
        flat = [_int(v, op) for v in pad]
        if len(flat) % 2 or len(flat) // 2 > ndim:
            raise ValueError(
                f"{op}: the flat (PyTorch) form needs an even number of widths, two per dim from the last dim, "
                f"at most {2 * ndim} for {ndim} dims, got {tuple(flat)}. By name: pad(t, {{'dim': (before, after)}})."
            )
        widths = [(0, 0)] * ndim
        for i in range(len(flat) // 2):
            widths[ndim - 1 - i] = (flat[2 * i], flat[2 * i + 1])
        return tuple(widths)
    raise TypeError(f"{op}: pad must be a dict {{dim: (before, after)}} or a flat tuple of ints, got {pad!r}.")


def _int(v, op: str) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: pad widths must be ints, got {type(v).__name__} {v!r}.")
    return int(v.__index__())


def pad(t: Tensor, pad: Union[Mapping[Dim, Union[int, Tuple[int, int]]], Sequence[int]],
        value: Union[int, float] = 0) -> Tensor:
    """Pad with a constant: ``pad(t, {"seq": (0, 3), "feat": 1})`` adds 0 before and 3 after along
    ``"seq"`` and 1 on both sides of ``"feat"``.  Keys are names or ints.  PyTorch's flat form
    (``(left, right, top, bottom, ...)``, from the last dim backwards) also works.  A negative width
    crops.  Keeps the names.  The result is a new tensor (a write into it leaves ``t`` alone), also where
    nothing is padded, as PyTorch's."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"pad: value must be a number, got {type(value).__name__} {value!r}.")
    if isinstance(value, float) and t.dtype.kind != "f":
        raise TypeError(
            f"pad: cannot pad a tensor of dtype {t.dtype!r} with the float value {value!r} (it would be "
            "truncated); give an int value or convert the tensor first (e.g. .float())."
        )
    widths = _pad_widths(t, pad, "pad")
    for (a, b), s, i in zip(widths, t.shape, range(t.ndim)):
        if s + min(a, 0) + min(b, 0) < 0:
            raise ValueError(
                f"pad: the widths ({a}, {b}) crop more than the {s} entries of "
                f"{_names._dim_label(t._names, i)} (names {_names.fmt(t._names)})."
            )
    return apply(_Pad, (t,), t._names, widths=widths, value=value)  # a new tensor, as PyTorch's, even by nothing


METHODS = {"split": split, "chunk": chunk, "unbind": unbind, "pad": pad}
