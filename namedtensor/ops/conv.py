"""Convolutions: ``conv1d``, ``conv2d``, ``conv3d`` (one N-d op, :func:`conv`), each one fused op; and
the transposed ones, ``conv_transpose1d/2d/3d`` (:func:`conv_transpose`), one fused op too.

Name rule (:func:`~namedtensor._names.conv`): ``conv(x, weight, bias, dim=, spatial=, out_dim=)``.
Without ``dim``/``spatial`` it is PyTorch's call by position, ``(N, C, *S)`` or ``(C, *S)``.  With them
the channel dim (``dim``) and the spatial dims (``spatial``, in the kernel's order) are found by name
wherever they are and every other dim is a batch dim.  The weight is ``(out, in, *kernel)``, its names
(where given) equal to the channel and spatial dims'.  The output has the input's names and layout:
the channel dim keeps its name (or takes ``out_dim=``) and its size becomes ``out``, the spatial dims
keep theirs with their new sizes.  The bias is ``(out,)``.

The forward is the backend's ``conv`` hook (im2col by strided slices, one batched matrix product);
the gradients are its two adjoints (``conv_input_grad``: col2im, ``conv_weight_grad``), each an op here.
The three ops are bilinear and each other's gradients, so gradients of any order run on them.

``conv_transpose(x, weight, bias, dim=, spatial=, out_dim=)`` has the same name rule with the weight
``(in, out, *kernel)``.  Its forward is the ``conv_input_grad`` hook (plus the bias), so its gradients
are the convolution (in x) and ``conv_weight_grad`` with the roles swapped (in the weight), as ops.
"""

from __future__ import annotations

import math
from typing import Hashable, Optional, Sequence, Tuple, Union

from .. import _names
from ..autograd.graph import Op, apply
from ..backends.base import conv_out_shape
from ..tensor import Tensor
from ._common import int_sizes, tensor_arg, with_names
from ._fused import require_floating, same_dtype
from .joining import pad

Ints = Union[int, Sequence[int]]

_GEOMETRY = ("perm", "nb", "stride", "padding", "dilation", "groups")


def _canonical(B, a, perm, nb):
    """``a`` with its dims in ``perm``'s order and its ``nb`` batch dims merged: ``(N, C, *S)``; and the
    batch shape."""
    a = B.permute_dims(a, perm)
    batch = tuple(a.shape[:nb])
    return B.reshape(a, (math.prod(batch),) + tuple(a.shape[nb:])), batch


def _restore(B, y, perm, batch):
    """The inverse of :func:`_canonical` for a result ``(N, C', *S')``."""
    y = B.reshape(y, batch + tuple(y.shape[1:]))
    return B.permute_dims(y, tuple(sorted(range(len(perm)), key=perm.__getitem__)))


def _geometry(params: dict) -> dict:
    return {k: params[k] for k in _GEOMETRY}


def _bias_grad(g: Tensor, params: dict, names: _names.Names) -> Tensor:
    """The bias's gradient: ``g`` summed over every dim but the channel dim (at ``perm[nb]``)."""
    ch = params["perm"][params["nb"]]
    return with_names(g.sum(tuple(i for i in range(g.ndim) if i != ch)), names)


class _Conv(Op):
    """The convolution of x (dims in ``perm``'s order: ``nb`` batch dims, channels, spatial) with the weight."""

    name = "conv"
    saves = (0, 1)

    @staticmethod
    def forward(B, x, w, b=None, *, perm, nb, stride, padding, dilation, groups):
        xc, batch = _canonical(B, x, perm, nb)
        y = B.conv(xc, w, stride, padding, dilation, groups)
        if b is not None:
            y = y + B.reshape(b, (1, -1) + (1,) * len(stride))
        return _restore(B, y, perm, batch)

    @staticmethod
    def backward(node, g):
        x, w = node.saved_tensors()
        geo = _geometry(node.params)
        gx = gw = None
        if node.edges[0] is not None:
            gx = apply(_ConvInputGrad, (g, w), node.in_names[0], shape=tuple(node.in_shapes[0]), **geo)
        if node.edges[1] is not None:
            gw = _weight_grad(node, x, g, geo)
        if len(node.edges) == 2:
            return gx, gw
        return gx, gw, (_bias_grad(g, geo, node.in_names[2]) if node.edges[2] is not None else None)


class _ConvInputGrad(Op):
    """The convolution's gradient in x (of ``shape``) for the output gradient g: col2im."""

    name = "conv_input_grad"
    saves = (0, 1)

    @staticmethod
    def forward(B, g, w, *, shape, perm, nb, stride, padding, dilation, groups):
        gc, batch = _canonical(B, g, perm, nb)
        xshape = (gc.shape[0],) + tuple(shape[a] for a in perm[nb:])
        return _restore(B, B.conv_input_grad(gc, w, xshape, stride, padding, dilation, groups), perm, batch)

    @staticmethod
    def backward(node, h):
        g, w = node.saved_tensors()
        geo = _geometry(node.params)
        gg = apply(_Conv, (h, w), node.in_names[0], **geo) if node.edges[0] is not None else None
        gw = None
        if node.edges[1] is not None:
            gw = _weight_grad(node, h, g, geo)
        return gg, gw


def _weight_grad(node, x: Tensor, g: Tensor, geo: dict) -> Tensor:
    """The gradient in the weight (input 1 of ``node``) of a convolution of ``x`` whose output gradient is ``g``."""
    return apply(_ConvWeightGrad, (x, g), node.in_names[1], wshape=tuple(node.in_shapes[1]), **geo)


class _ConvWeightGrad(Op):
    """The convolution's gradient in the weight (of ``wshape``) from x and the output gradient g."""

    name = "conv_weight_grad"
    saves = (0, 1)

    @staticmethod
    def forward(B, x, g, *, wshape, perm, nb, stride, padding, dilation, groups):
        xc, _ = _canonical(B, x, perm, nb)
        gc, _ = _canonical(B, g, perm, nb)
        return B.conv_weight_grad(xc, gc, wshape, stride, padding, dilation, groups)

    @staticmethod
    def backward(node, h):
        x, g = node.saved_tensors()
        geo = _geometry(node.params)
        gx = None
        if node.edges[0] is not None:
            gx = apply(_ConvInputGrad, (g, h), node.in_names[0], shape=tuple(node.in_shapes[0]), **geo)
        gg = apply(_Conv, (x, h), node.in_names[1], **geo) if node.edges[1] is not None else None
        return gx, gg


def ints(value: Ints, n: int, op: str, what: str, low: int) -> Tuple[int, ...]:
    """``value`` (an int, or ``n`` of them) as ``n`` ints, each at least ``low``."""
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * n
    if len(values) != n or any(isinstance(v, bool) or not isinstance(v, int) or v < low for v in values):
        raise ValueError(f"{op}: {what} must be an int >= {low} or {n} of them, got {value!r}.")
    return values


def padding_pairs(padding: Union[str, Ints], n: int, kernel: Tuple[int, ...], stride: Tuple[int, ...],
                  dilation: Tuple[int, ...], op: str) -> Tuple[Tuple[int, int], ...]:
    """``(before, after)`` per spatial dim: ``"valid"`` none, ``"same"`` what keeps the size (the odd
    one after, as PyTorch), ints on both sides."""
    if padding == "valid":
        return ((0, 0),) * n
    if padding == "same":
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions (stride {stride}).")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be 'valid', 'same', an int or {n} ints, got {padding!r}.")
    return tuple((p, p) for p in ints(padding, n, op, "padding", 0))


def _plan(input: Tensor, weight: Tensor, bias: Optional[Tensor], groups: int, dim: Hashable,
          spatial: Optional[Sequence[Hashable]], out_dim: Optional[str], op: str,
          transposed: bool) -> Tuple[int, Tuple[int, ...], int, _names.Names]:
    """The checks a convolution and a ``transposed`` one share: ``(n, perm, nb, names)``, the number of
    spatial dims and :func:`namedtensor._names.conv`'s plan."""
    layout = "(in, out // groups, *kernel)" if transposed else "(out, in // groups, *kernel)"
    tensor_arg(input, op, "the input")
    tensor_arg(weight, op, "the weight")
    if bias is not None:
        tensor_arg(bias, op, "the bias")
    n = weight.ndim - 2
    if n < 1:
        raise ValueError(f"{op}: the weight must be {layout}, got shape {weight.shape}.")
    if input.ndim < n + 1:
        raise ValueError(f"{op}: the input must have a channel dim and {n} spatial dim(s), got names "
                         f"{_names.fmt(input.names)} and shape {input.shape}.")
    if isinstance(spatial, (str, int)):
        spatial = (spatial,)
    perm, nb, names = _names.conv(input._names, weight._names, None if bias is None else bias._names, n, dim,
                                  None if spatial is None else tuple(spatial), out_dim, op, transposed)
    require_floating(input, op, "the input")
    same_dtype(input, weight, op, "the weight")
    same_dtype(input, bias, op, "the bias")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}.")
    return n, perm, nb, names


def conv(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Ints = 1,
         padding: Union[str, Ints] = 0, dilation: Ints = 1, groups: int = 1, *, dim: Hashable = None,
         spatial: Optional[Sequence[Hashable]] = None, out_dim: Optional[str] = None, _op: str = "conv") -> Tensor:
    """The N-d convolution (cross-correlation, as PyTorch) of ``input`` with ``weight``; N is
    ``weight.ndim - 2``.

    ``weight`` is ``(out, in // groups, *kernel)``, ``bias`` ``(out,)``.  PyTorch's call acts on
    ``(batch, in, *spatial)`` or ``(in, *spatial)``.  Named: ``dim`` is the channel dim and ``spatial``
    the N spatial dims in the kernel's order (names or ints; default: the last N other than ``dim``),
    wherever they are; every other dim is a batch dim.  The output keeps the input's names and layout,
    the channel dim renamed to ``out_dim`` if given::

        conv(x, w, padding="same", dim="chan", spatial=("h", "w"))   # x (h, w, batch, chan)

    ``stride``, ``dilation``: an int or one per spatial dim; ``padding``: an int, one per spatial dim,
    ``"valid"`` (none) or ``"same"`` (stride 1 only); zeros.
    """
    op = _op
    n, perm, nb, names = _plan(input, weight, bias, groups, dim, spatial, out_dim, op, False)
    stride = ints(stride, n, op, "stride", 1)
    dilation = ints(dilation, n, op, "dilation", 1)
    kernel = tuple(weight.shape[2:])
    pads = padding_pairs(padding, n, kernel, stride, dilation, op)
    ch, out_ch = input.shape[perm[nb]], weight.shape[0]
    if ch != weight.shape[1] * groups or out_ch % groups:
        raise ValueError(
            f"{op}: the input's {_names._dim_label(input._names, perm[nb])} has {ch} channels, but the weight of "
            f"shape {weight.shape} with groups={groups} expects {weight.shape[1] * groups} (and out channels "
            f"divisible by groups); input names {_names.fmt(input.names)}, shape {input.shape}."
        )
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_ch):
        raise ValueError(f"{op}: the bias must be 1-D of size {out_ch} (out channels), got shape {bias.shape}.")
    size = tuple(input.shape[a] for a in perm[nb + 1:])
    if any(o < 1 for o in conv_out_shape(size, kernel, stride, pads, dilation)):
        raise ValueError(f"{op}: the kernel {kernel} (dilation {dilation}) is larger than the padded input "
                         f"{tuple(s + lo + hi for s, (lo, hi) in zip(size, pads))} of the spatial dims.")
    inputs = (input, weight) if bias is None else (input, weight, bias)
    return apply(_Conv, inputs, names, perm=perm, nb=nb, stride=stride, padding=pads, dilation=dilation,
                 groups=groups)


def _fixed(n: int):
    """``conv`` for weights of ``n`` spatial dims (PyTorch's ``convNd``)."""
    op = f"conv{n}d"

    def conv_nd(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Ints = 1,
                padding: Union[str, Ints] = 0, dilation: Ints = 1, groups: int = 1, *, dim: Hashable = None,
                spatial: Optional[Sequence[Hashable]] = None, out_dim: Optional[str] = None) -> Tensor:
        tensor_arg(weight, op, "the weight")
        if weight.ndim != n + 2:
            raise ValueError(f"{op}: the weight must be {n + 2}-D (out, in // groups, *kernel), got shape "
                             f"{weight.shape}.")
        return conv(input, weight, bias, stride, padding, dilation, groups, dim=dim, spatial=spatial,
                    out_dim=out_dim, _op=op)

    conv_nd.__name__ = conv_nd.__qualname__ = op
    conv_nd.__doc__ = f"PyTorch's ``F.{op}``: :func:`conv` with a kernel of {n} spatial dim(s), by position or by name."
    return conv_nd


conv1d, conv2d, conv3d = (_fixed(n) for n in (1, 2, 3))


class _ConvTranspose(Op):
    """The transposed convolution of x (dims in ``perm``'s order) with the weight ``(in, out // groups,
    *kernel)`` to an output of ``shape`` (x's layout): the input gradient of the convolution that maps
    that output's shape to x's, plus the bias."""

    name = "conv_transpose"
    saves = (0, 1)

    @staticmethod
    def forward(B, x, w, b=None, *, shape, perm, nb, stride, padding, dilation, groups):
        xc, batch = _canonical(B, x, perm, nb)
        yshape = (xc.shape[0],) + tuple(shape[a] for a in perm[nb:])
        y = B.conv_input_grad(xc, w, yshape, stride, padding, dilation, groups)
        if b is not None:
            y = y + B.reshape(b, (1, -1) + (1,) * len(stride))
        return _restore(B, y, perm, batch)

    @staticmethod
    def backward(node, g):
        # without the bias the forward is _ConvInputGrad's on the same inputs and parameters, so its
        # gradients are too: the convolution in x, conv_weight_grad with the roles swapped in w
        gx, gw = _ConvInputGrad.backward(node, g)
        if len(node.edges) == 2:
            return gx, gw
        return gx, gw, (_bias_grad(g, node.params, node.in_names[2]) if node.edges[2] is not None else None)


def conv_transpose(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Ints = 1,
                   padding: Ints = 0, output_padding: Ints = 0, groups: int = 1, dilation: Ints = 1, *,
                   dim: Hashable = None, spatial: Optional[Sequence[Hashable]] = None,
                   out_dim: Optional[str] = None, output_size: Optional[Sequence[int]] = None,
                   _op: str = "conv_transpose") -> Tensor:
    """The N-d transposed convolution of ``input`` with ``weight`` (PyTorch's ``conv_transposeNd``, the
    adjoint of :func:`conv` in its input); N is ``weight.ndim - 2``.

    ``weight`` is ``(in, out // groups, *kernel)``, ``bias`` ``(out,)``.  Each spatial size ``L``
    becomes ``(L - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1``.  The
    dims are found as :func:`conv`'s: PyTorch's ``(batch, in, *spatial)`` or ``(in, *spatial)`` by
    position, or ``dim`` and ``spatial`` by name wherever they are; the output keeps the input's names
    and layout, the channel dim renamed to ``out_dim`` if given::

        conv_transpose(x, w, stride=2, dim="chan", spatial=("h", "w"))   # x (h, w, batch, chan)

    ``stride``, ``padding``, ``output_padding``, ``dilation``: an int or one per spatial dim;
    ``output_padding`` (added after, on one side) must be smaller than ``stride`` or ``dilation``.
    ``output_size`` (PyTorch's ``ConvTransposeNd.forward(input, output_size)``), the spatial sizes wanted
    (or the whole output shape, in the input's layout), picks ``output_padding`` instead: a stride above
    1 maps several sizes to one, and this says which.
    """
    op = _op
    n, perm, nb, names = _plan(input, weight, bias, groups, dim, spatial, out_dim, op, True)
    stride = ints(stride, n, op, "stride", 1)
    dilation = ints(dilation, n, op, "dilation", 1)
    padding = ints(padding, n, op, "padding", 0)
    output_padding = ints(output_padding, n, op, "output_padding", 0)
    if any(o >= max(s, d) for o, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"{op}: output_padding must be smaller than stride or dilation, got output_padding "
                         f"{output_padding}, stride {stride}, dilation {dilation}.")
    ch, in_ch = input.shape[perm[nb]], weight.shape[0]
    if ch != in_ch or in_ch % groups:
        raise ValueError(
            f"{op}: the input's {_names._dim_label(input._names, perm[nb])} has {ch} channels, but the weight of "
            f"shape {weight.shape} (in, out // groups, *kernel) with groups={groups} expects {in_ch} (and in "
            f"channels divisible by groups); input names {_names.fmt(input.names)}, shape {input.shape}."
        )
    out_ch = weight.shape[1] * groups
    if bias is not None and (bias.ndim != 1 or bias.shape[0] != out_ch):
        raise ValueError(f"{op}: the bias must be 1-D of size {out_ch} (out channels), got shape {bias.shape}.")
    kernel, axes = tuple(weight.shape[2:]), perm[nb + 1:]
    size = tuple(input.shape[a] for a in axes)
    if output_size is not None:
        output_padding = _output_padding(op, output_size, input.ndim, axes, size, kernel, stride, padding, dilation)
    out = tuple((m - 1) * s - 2 * p + d * (k - 1) + o + 1
                for m, s, p, d, k, o in zip(size, stride, padding, dilation, kernel, output_padding))
    if any(o < 1 for o in out):
        raise ValueError(f"{op}: the output's spatial size {out} is not positive: (size - 1) * stride - 2 * padding "
                         f"+ dilation * (kernel - 1) + output_padding + 1 for size {size}, kernel {kernel}, stride "
                         f"{stride}, padding {padding}, dilation {dilation}, output_padding {output_padding}.")
    pads = tuple((p, p) for p in padding)
    # The convolution transposed here maps ``out`` to ``reach`` positions: ``size`` of them, or more where
    # output_padding >= stride (allowed below dilation); the input fills the first ones and zeros the rest.
    reach = conv_out_shape(out, kernel, stride, pads, dilation)
    extra = {a: (0, r - m) for a, r, m in zip(axes, reach, size) if r != m}
    if extra:
        input = pad(input, extra)
    shape = list(input.shape)
    shape[perm[nb]] = out_ch
    for a, o in zip(axes, out):
        shape[a] = o
    inputs = (input, weight) if bias is None else (input, weight, bias)
    return apply(_ConvTranspose, inputs, names, shape=tuple(shape), perm=perm, nb=nb, stride=stride, padding=pads,
                 dilation=dilation, groups=groups)


def _output_padding(op: str, output_size, ndim: int, axes, size, kernel, stride, padding, dilation) -> Tuple[int, ...]:
    """The ``output_padding`` that gives ``output_size``, checked against the sizes a stride allows."""
    if not isinstance(output_size, (tuple, list)):
        raise TypeError(f"{op}: output_size must be a tuple or list of ints, got {type(output_size).__name__} "
                        f"{output_size!r}.")
    wanted = int_sizes(tuple(output_size), op, nonnegative=True)
    if len(wanted) == ndim:
        wanted = tuple(wanted[a] for a in axes)
    if len(wanted) != len(axes):
        raise ValueError(f"{op}: output_size must give the {len(axes)} spatial size(s) or the whole output shape "
                         f"({ndim} sizes), got {tuple(output_size)}.")
    low = tuple((m - 1) * s - 2 * p + d * (k - 1) + 1
                for m, s, p, d, k in zip(size, stride, padding, dilation, kernel))
    high = tuple(lo + s - 1 for lo, s in zip(low, stride))
    if any(not lo <= w <= hi for w, lo, hi in zip(wanted, low, high)):
        raise ValueError(f"{op}: requested an output size of {wanted}, but valid sizes range from {low} to {high} "
                         f"(for spatial input sizes {size}).")
    return tuple(w - lo for w, lo in zip(wanted, low))


def _fixed_transpose(n: int):
    """``conv_transpose`` for weights of ``n`` spatial dims (PyTorch's ``conv_transposeNd``)."""
    op = f"conv_transpose{n}d"

    def conv_transpose_nd(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None, stride: Ints = 1,
                          padding: Ints = 0, output_padding: Ints = 0, groups: int = 1, dilation: Ints = 1, *,
                          dim: Hashable = None, spatial: Optional[Sequence[Hashable]] = None,
                          out_dim: Optional[str] = None) -> Tensor:
        tensor_arg(weight, op, "the weight")
        if weight.ndim != n + 2:
            raise ValueError(f"{op}: the weight must be {n + 2}-D (in, out // groups, *kernel), got shape "
                             f"{weight.shape}.")
        return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, dim=dim,
                              spatial=spatial, out_dim=out_dim, _op=op)

    conv_transpose_nd.__name__ = conv_transpose_nd.__qualname__ = op
    conv_transpose_nd.__doc__ = (f"PyTorch's ``F.{op}``: :func:`conv_transpose` with a kernel of {n} spatial dim(s), "
                                 "by position or by name.")
    return conv_transpose_nd


conv_transpose1d, conv_transpose2d, conv_transpose3d = (_fixed_transpose(n) for n in (1, 2, 3))
