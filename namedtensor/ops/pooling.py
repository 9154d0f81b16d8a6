"""Pooling: ``max_pool1d/2d/3d``, ``avg_pool1d/2d/3d`` (one N-d op) and ``adaptive_avg_pool1d/2d/3d``.

Name rule (:func:`~namedtensor._names.pool`): the output keeps the input's names and layout; the
spatial dims (``spatial=``, names or ints in the window's order; default: the last N, as PyTorch)
change size, every other dim is a batch dim.  Max pooling's indices (``return_indices=True``) are
PyTorch's: flat positions in each input plane of the spatial dims, an int64 tensor with the same names.

The forward is the backend's ``pool`` hook (the sliding windows of ``conv``), the gradient its adjoint
``pool_backward``; each is the other's gradient (max pooling's with the maxima's offsets fixed).
``adaptive_avg_pool`` is separable: one ``linear`` per spatial dim with PyTorch's averaging bins.
"""

from __future__ import annotations

import math
from typing import Hashable, Optional, Sequence, Tuple, Union

from .. import _dtypes, _names
from ..autograd.graph import Op, apply
from ..backends.base import conv_out_shape
from ..tensor import Tensor
from ._common import tensor_arg
from ._fused import require_floating
from .conv import Ints, ints
from .dense import linear

_GEOMETRY = ("perm", "kernel", "stride", "padding", "dilation", "mode")


def _planes(B, a, perm, n):
    """``a`` as ``(planes, 1, *spatial)`` (its dims in ``perm``'s order, the others merged); its batch shape."""
    a = B.permute_dims(a, perm)
    batch = tuple(a.shape[:a.ndim - n])
    return B.reshape(a, (math.prod(batch), 1) + tuple(a.shape[a.ndim - n:])), batch


def _unplanes(B, y, perm, batch):
    y = B.reshape(y, batch + tuple(y.shape[2:]))
    return B.permute_dims(y, tuple(sorted(range(len(perm)), key=perm.__getitem__)))


class _Pool(Op):
    """Max or average pooling over the last ``len(kernel)`` dims of ``perm``'s order; max pooling with
    ``at`` takes the values at those window offsets."""

    name = "pool"
    stashes = True

    @staticmethod
    def forward(B, x, *, perm, kernel, stride, padding, dilation, mode, at):
        xc, batch = _planes(B, x, perm, len(kernel))
        y, k = B.pool(xc, kernel, stride, padding, dilation, mode, at)
        return _unplanes(B, y, perm, batch), k

    @staticmethod
    def backward(node, g):
        geo = {key: node.params[key] for key in _GEOMETRY}
        return (apply(_PoolBackward, (g,), node.in_names[0], shape=tuple(node.in_shapes[0]), at=node.stash, **geo),)


class _PoolBackward(Op):
    """The adjoint of :class:`_Pool`: each window's gradient added back into an input of ``shape``."""

    name = "pool_backward"

    @staticmethod
    def forward(B, g, *, shape, perm, kernel, stride, padding, dilation, mode, at):
        gc, batch = _planes(B, g, perm, len(kernel))
        cshape = (gc.shape[0], 1) + tuple(shape[a] for a in perm[len(perm) - len(kernel):])
        return _unplanes(B, B.pool_backward(gc, at, cshape, kernel, stride, padding, dilation, mode), perm, batch)

    @staticmethod
    def backward(node, h):
        geo = {key: node.params[key] for key in _GEOMETRY}
        return (apply(_Pool, (h,), node.in_names[0], at=node.params["at"], **geo),)


class _PoolIndices(Op):
    """Max pooling's indices: each maximum's flat position in its input plane (PyTorch's)."""

    name = "max_pool_indices"
    differentiable = False

    @staticmethod
    def forward(B, x, *, perm, kernel, stride, padding, dilation, mode, at):
        n = len(kernel)
        xc, batch = _planes(B, x, perm, n)
        size = tuple(xc.shape[2:])
        _, k = B.pool(xc, kernel, stride, padding, dilation, mode)
        k = B.astype(k, B.native(_dtypes.int64))
        out = tuple(k.shape[2:])
        flat, rest = None, k
        for i in range(n):
            inner = math.prod(kernel[i + 1:])
            offset, rest = rest // inner, rest % inner
            place = (1,) * (i + 2) + (out[i],) + (1,) * (n - i - 1)
            o = B.reshape(B.arange(out[i], dtype=k.dtype), place)
            pos = o * stride[i] - padding[i][0] + offset * dilation[i]
            flat = pos if flat is None else flat * size[i] + pos
        return _unplanes(B, flat, perm, batch)


def _pool(op: str, n: int, x: Tensor, kernel_size: Ints, stride: Optional[Ints], padding: Ints, dilation: Ints,
          ceil_mode: bool, spatial: Optional[Sequence[Hashable]], mode: str) -> Tuple[dict, Tensor]:
    """The checked geometry of a pooling call, as the ops' parameters."""
    tensor_arg(x, op, "the input")
    for flag, value in (("ceil_mode", ceil_mode),):
        if value:
            raise NotImplementedError(f"{op}: {flag}=True is not supported; leave it False.")
    if x.ndim < n + 1 and spatial is None:
        raise ValueError(f"{op}: the input must have a channel or batch dim and {n} spatial dim(s), got shape "
                         f"{x.shape}.")
    if isinstance(spatial, (str, int)):
        spatial = (spatial,)
    perm = _names.pool(x._names, n, None if spatial is None else tuple(spatial), op)
    require_floating(x, op, "the input")
    kernel = ints(kernel_size, n, op, "kernel_size", 1)
    stride = kernel if stride is None or stride == [] else ints(stride, n, op, "stride", 1)
    dilation = ints(dilation, n, op, "dilation", 1)
    pads = ints(padding, n, op, "padding", 0)
    if any(2 * p > k for p, k in zip(pads, kernel)):
        raise ValueError(f"{op}: padding {pads} must be at most half the kernel size {kernel}.")
    pads = tuple((p, p) for p in pads)
    size = tuple(x.shape[a] for a in perm[len(perm) - n:])
    if any(o < 1 for o in conv_out_shape(size, kernel, stride, pads, dilation)):
        raise ValueError(f"{op}: the window {kernel} (dilation {dilation}) is larger than the padded input {size}.")
    return {"perm": perm, "kernel": kernel, "stride": stride, "padding": pads, "dilation": dilation, "mode": mode}


def max_pool(input: Tensor, n: int, kernel_size: Ints, stride: Optional[Ints] = None, padding: Ints = 0,
             dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False, *,
             spatial: Optional[Sequence[Hashable]] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """N-d max pooling (PyTorch's ``max_poolNd``), padding with -inf; ``stride`` defaults to the kernel.

    ``spatial`` names the N spatial dims (default: the last N); the output keeps the input's names.
    With ``return_indices`` also the int64 flat positions of the maxima in each input plane.
    """
    op = f"max_pool{n}d"
    geo = _pool(op, n, input, kernel_size, stride, padding, dilation, ceil_mode, spatial, "max")
    out = apply(_Pool, (input,), input._names, at=None, **geo)
    if not return_indices:
        return out
    return out, apply(_PoolIndices, (input.detach(),), input._names, at=None, **geo)


def avg_pool(input: Tensor, n: int, kernel_size: Ints, stride: Optional[Ints] = None, padding: Ints = 0,
             ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Optional[int] = None, *,
             spatial: Optional[Sequence[Hashable]] = None) -> Tensor:
    """N-d average pooling (PyTorch's ``avg_poolNd``), padding with zeros counted in the average;
    ``stride`` defaults to the kernel.  ``spatial`` names the N spatial dims (default: the last N);
    the output keeps the input's names.  ``count_include_pad=False`` and ``divisor_override`` raise."""
    op = f"avg_pool{n}d"
    if not count_include_pad or divisor_override is not None:
        raise NotImplementedError(f"{op}: count_include_pad=False and divisor_override are not supported.")
    geo = _pool(op, n, input, kernel_size, stride, padding, 1, ceil_mode, spatial, "avg")
    return apply(_Pool, (input,), input._names, at=None, **geo)


def _bins(B, size: int, out: int, dtype):
    """PyTorch's adaptive averaging as an ``(out, size)`` matrix: row i averages
    ``[floor(i * size / out), ceil((i + 1) * size / out))``."""
    i = B.arange(out)
    start = B.reshape((i * size) // out, (out, 1))
    end = B.reshape(((i + 1) * size + out - 1) // out, (out, 1))
    j = B.reshape(B.arange(size), (1, size))
    inside = B.astype(B.logical_and(B.greater_equal(j, start), B.less(j, end)), dtype)
    return inside / B.astype(end - start, dtype)


def adaptive_avg_pool(input: Tensor, n: int, output_size: Ints, *,
                      spatial: Optional[Sequence[Hashable]] = None) -> Tensor:
    """N-d adaptive average pooling (PyTorch's ``adaptive_avg_poolNd``): each spatial dim becomes
    ``output_size`` (an int or one per dim; None keeps the size) with PyTorch's bins.  ``spatial``
    names the N spatial dims (default: the last N); the output keeps the input's names."""
    op = f"adaptive_avg_pool{n}d"
    tensor_arg(input, op, "the input")
    if isinstance(spatial, (str, int)):
        spatial = (spatial,)
    perm = _names.pool(input._names, n, None if spatial is None else tuple(spatial), op)
    require_floating(input, op, "the input")
    sizes = tuple(output_size) if isinstance(output_size, (tuple, list)) else (output_size,) * n
    axes = perm[len(perm) - n:]
    sizes = tuple(input.shape[a] if s is None else s for s, a in zip(sizes, axes))
    sizes = ints(sizes, n, op, "output_size", 1)
    B = input._B
    out = input
    for ax, size in zip(axes, sizes):
        if size != input.shape[ax]:
            bins = Tensor._make(_bins(B, input.shape[ax], size, B.native(input.dtype)), _names.unnamed(2), B)
            out = linear(out, bins, dim=ax, out_dim=input._names[ax])
    return out


def _table(n: int):
    """The ``n``-d functions, PyTorch's ``max_poolNd``, ``avg_poolNd``, ``adaptive_avg_poolNd``."""

    def max_pool_nd(input: Tensor, kernel_size: Ints, stride: Optional[Ints] = None, padding: Ints = 0,
                    dilation: Ints = 1, ceil_mode: bool = False, return_indices: bool = False, *,
                    spatial: Optional[Sequence[Hashable]] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        return max_pool(input, n, kernel_size, stride, padding, dilation, ceil_mode, return_indices, spatial=spatial)

    def avg_pool_nd(input: Tensor, kernel_size: Ints, stride: Optional[Ints] = None, padding: Ints = 0,
                    ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Optional[int] = None,
                    *, spatial: Optional[Sequence[Hashable]] = None) -> Tensor:
        return avg_pool(input, n, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override,
                        spatial=spatial)

    def adaptive_avg_pool_nd(input: Tensor, output_size: Ints, *,
                             spatial: Optional[Sequence[Hashable]] = None) -> Tensor:
        return adaptive_avg_pool(input, n, output_size, spatial=spatial)

    for fn, base in ((max_pool_nd, max_pool), (avg_pool_nd, avg_pool), (adaptive_avg_pool_nd, adaptive_avg_pool)):
        fn.__name__ = fn.__qualname__ = base.__name__ + f"{n}d"
        fn.__doc__ = f"PyTorch's ``F.{fn.__name__}``: :func:`{base.__name__}` over {n} spatial dim(s)."
    return max_pool_nd, avg_pool_nd, adaptive_avg_pool_nd


(max_pool1d, avg_pool1d, adaptive_avg_pool1d), (max_pool2d, avg_pool2d, adaptive_avg_pool2d), \
    (max_pool3d, avg_pool3d, adaptive_avg_pool3d) = (_table(n) for n in (1, 2, 3))
