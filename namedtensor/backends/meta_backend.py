"""The meta backend: arrays that have a shape and a dtype but no data (device ``"meta"``).

``nt.trace_shapes`` runs user code on tensors whose arrays are :class:`MetaArray`
objects, so the real op code paths (name rules, shape checks, dtype promotion)
run while no element is ever allocated.  Each array function here computes its
result's shape the way the NumPy backend's would; result dtypes come from the
NumPy function itself, applied to 0-d stand-ins (so promotion rules, Python
scalars included, are NumPy's own).  Anything that needs values (``item``,
``nonzero``, boolean masks) raises :class:`DataDependentError`.

Arrays of another backend (a module's parameters, a tensor made inside the
traced function) meet meta arrays in one op: the meta backend takes them,
reading only their shape and dtype.
"""

from __future__ import annotations

import math
import operator
import threading
import warnings
from typing import Tuple

import numpy as np

from .base import STANDARD, Backend, conv_out_shape
from .. import _dtypes


class DataDependentError(RuntimeError):
    """A step of a dry run needs the values of a tensor, which meta tensors do not have."""


def _needs_values(what: str) -> DataDependentError:
    return DataDependentError(
        f"{what} needs the tensor's values, which a shape dry run (tensors made by nt.spec, device "
        "'meta') does not have. Keep value-dependent steps out of the traced code, or run it on real data."
    )


class MetaArray:
    """A shape and a dtype standing for an array."""

    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype) -> None:
        self.shape = tuple(operator.index(s) for s in shape)
        self.dtype = np.dtype(dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __getitem__(self, key):
        return META.getitem(self, key)

    def __setitem__(self, key, value) -> None:
        META.setitem(self, key, value)

    def astype(self, dtype, copy=True):
        return MetaArray(self.shape, dtype)

    def __bool__(self):
        raise _needs_values("bool()")

    def __float__(self):
        raise _needs_values("float()")

    def __int__(self):
        raise _needs_values("int()")

    def __index__(self):
        raise _needs_values("using a tensor as an index")

    def __array__(self, dtype=None, copy=None):
        raise _needs_values("converting to a NumPy array")

    def __neg__(self):
        return META.negative(self)

    def __abs__(self):
        return META.abs(self)

    def __invert__(self):
        return META.logical_not(self)


def _operator(fn_name: str, reflected: bool):
    if reflected:
        return lambda self, other: getattr(META, fn_name)(other, self)
    return lambda self, other: getattr(META, fn_name)(self, other)


for _dunder, _fn in (("add", "add"), ("sub", "subtract"), ("mul", "multiply"), ("truediv", "divide"),
                     ("floordiv", "floor_divide"), ("mod", "remainder"), ("pow", "pow"),
                     ("matmul", "matmul"), ("and", "logical_and"), ("or", "logical_or"),
                     ("xor", "logical_xor")):
    setattr(MetaArray, f"__{_dunder}__", _operator(_fn, False))
    setattr(MetaArray, f"__r{_dunder}__", _operator(_fn, True))
for _dunder, _fn in (("eq", "equal"), ("ne", "not_equal"), ("lt", "less"), ("le", "less_equal"),
                     ("gt", "greater"), ("ge", "greater_equal")):
    setattr(MetaArray, f"__{_dunder}__", _operator(_fn, False))
MetaArray.__hash__ = None


def _is_array(x) -> bool:
    return isinstance(x, (MetaArray, np.ndarray, np.generic))


def _stand_in(x):
    """What a dtype probe passes to NumPy for ``x``: a 0-d array of its dtype, or the scalar itself
    (so NumPy's rules for Python scalars apply)."""
    if _is_array(x):
        return np.zeros((), x.dtype)
    if hasattr(x, "shape") and hasattr(x, "dtype"):  # an array of another backend
        return np.zeros((), np.dtype(str(x.dtype)))
    return x


def _real(dtype) -> np.dtype:
    """The real dtype of a complex one's parts (a real dtype itself): singular values, eigenvalues, log|det|."""
    return np.zeros((), dtype).real.dtype


def _probe(fn, *args, **kwargs) -> np.dtype:
    """The dtype NumPy's ``fn`` gives for these arguments' dtypes."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        return np.asarray(fn(*(_stand_in(a) for a in args), **kwargs)).dtype


def _shape(x) -> Tuple[int, ...]:
    return tuple(getattr(x, "shape", ()))


def _axis(axis: int, ndim: int, what: str) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(f"{what}: axis {axis} is out of bounds for an array of dimension {ndim}")
    return axis % ndim if ndim else 0


def _axes(axis, ndim: int, what: str) -> Tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, (tuple, list)):
        return tuple(_axis(a, ndim, what) for a in axis)
    return (_axis(axis, ndim, what),)


def _reduced(shape, axis, keepdims: bool, what: str) -> Tuple[int, ...]:
    axes = _axes(axis, len(shape), what)
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _no_out(out) -> None:
    if out is not None:
        raise TypeError("the meta backend writes no output buffers (supports_out is False).")


def _unary(name: str):
    np_fn = getattr(np, name)

    def fn(x, out=None):
        _no_out(out)
        return MetaArray(_shape(x), _probe(np_fn, x))

    fn.__name__ = name
    return fn


def _binary(name: str):
    np_fn = getattr(np, name)

    def fn(a, b, out=None):
        _no_out(out)
        return MetaArray(np.broadcast_shapes(_shape(a), _shape(b)), _probe(np_fn, a, b))

    fn.__name__ = name
    return fn


def _reduction(name: str):
    np_fn = getattr(np, name)

    def fn(x, axis=None, keepdims=False, dtype=None, out=None, **kwargs):
        _no_out(out)
        shape = _shape(x)
        if name in ("max", "min") and 0 in [shape[a] for a in _axes(axis, len(shape), name)]:
            raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
        probe = {"dtype": dtype} if dtype is not None else {}
        return MetaArray(_reduced(shape, axis, keepdims, name), _probe(np_fn, x, **probe))

    fn.__name__ = name
    return fn


UNARY = ("abs", "exp", "log", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh", "sign", "floor", "ceil",
         "round", "negative", "square", "isnan", "isinf", "isfinite", "logical_not", "acos", "asin", "atan", "cosh",
         "sinh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "trunc", "real", "imag", "conj", "angle",
         "bitwise_invert")
BINARY = ("add", "subtract", "multiply", "divide", "floor_divide", "remainder", "pow", "maximum", "minimum",
          "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
          "logical_xor", "logaddexp", "atan2", "hypot", "copysign", "fmod", "bitwise_and", "bitwise_or", "bitwise_xor",
          "bitwise_left_shift", "bitwise_right_shift", "nextafter")
REDUCTIONS = ("sum", "prod", "max", "min", "mean", "std", "var", "any", "all")
_NP_NAMES = {"pow": "power", "concat": "concatenate", "permute_dims": "transpose"}


def _index_shape(shape: Tuple[int, ...], key) -> Tuple[int, ...]:
    """The shape of ``x[key]`` under NumPy's indexing rules, for ``x`` of ``shape``."""
    key = key if isinstance(key, tuple) else (key,)
    kinds = []
    for k in key:
        if k is None:
            kinds.append(("new", None))
        elif k is Ellipsis:
            kinds.append(("ellipsis", None))
        elif isinstance(k, slice):
            kinds.append(("slice", k))
        elif isinstance(k, (bool, np.bool_)):
            raise _needs_values("indexing with a Python bool")
        elif isinstance(k, (int, np.integer)):
            kinds.append(("int", int(k)))
        else:
            arr = k if hasattr(k, "shape") else np.asarray(k)
            if np.dtype(str(arr.dtype)).kind == "b":
                raise _needs_values("indexing with a boolean mask (its result's size depends on the values)")
            kinds.append(("array", _shape(arr)))
    consumed = sum(kind in ("int", "slice", "array") for kind, _ in kinds)
    if consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {consumed} were indexed")
    if sum(kind == "ellipsis" for kind, _ in kinds) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    fill = [("slice", slice(None))] * (len(shape) - consumed)
    if any(kind == "ellipsis" for kind, _ in kinds):
        at = next(i for i, (kind, _) in enumerate(kinds) if kind == "ellipsis")
        kinds = kinds[:at] + fill + kinds[at + 1:]
    else:
        kinds = kinds + fill
    advanced = any(kind == "array" for kind, _ in kinds)
    out, adv_shapes, adv_at, dim = [], [], [], 0
    for i, (kind, k) in enumerate(kinds):
        if kind == "new":
            out.append(1)
            continue
        n = shape[dim]
        dim += 1
        if kind == "slice":
            out.append(len(range(*k.indices(n))))
        elif kind == "int" and not -n <= k < n:
            raise IndexError(f"index {k} is out of bounds for axis {dim - 1} with size {n}")
        elif advanced:  # with arrays present, NumPy treats integers as 0-d index arrays
            adv_shapes.append(k if kind == "array" else ())
            if not adv_at or adv_at[-1] != i - 1:
                out.append(None)
            adv_at.append(i)
    if not advanced:
        return tuple(out)
    broadcast = np.broadcast_shapes(*adv_shapes)
    spans = adv_at[-1] - adv_at[0] + 1 == len(adv_at)
    rest = [s for s in out if s is not None]
    if spans:
        at = out.index(None)
        return tuple(rest[:at]) + broadcast + tuple(rest[at:])
    return broadcast + tuple(rest)


def _einsum_shape(subscripts: str, shapes) -> Tuple[int, ...]:
    inputs, _, output = subscripts.replace(" ", "").partition("->")
    terms = inputs.split(",")
    if len(terms) != len(shapes):
        raise ValueError(f"einsum: {len(terms)} operands in the subscripts, {len(shapes)} given")
    sizes: dict = {}
    for term, shape in zip(terms, shapes):
        if "." in term:
            raise NotImplementedError("the meta backend's einsum takes no '...'")
        if len(term) != len(shape):
            raise ValueError(f"einsum: subscripts {term!r} for an operand of {len(shape)} dims")
        for letter, n in zip(term, shape):
            if sizes.setdefault(letter, n) != n:
                if sizes[letter] == 1:
                    sizes[letter] = n
                elif n != 1:
                    raise ValueError(f"einsum: size of label {letter!r} is {sizes[letter]} in one operand, {n} in another")
    if not _:
        output = "".join(sorted(c for c in set(inputs) - {","} if inputs.count(c) == 1))
    return tuple(sizes[c] for c in output)


def _matmul_shape(a, b) -> Tuple[int, ...]:
    if not a or not b:
        raise ValueError("matmul: an operand is 0-d")
    a1, b1 = len(a) == 1, len(b) == 1
    a = (1,) + a if a1 else a
    b = b + (1,) if b1 else b
    if a[-1] != b[-2]:
        raise ValueError(f"matmul: contracted sizes differ: {a[-1]} (first operand's last axis) and {b[-2]}")
    shape = np.broadcast_shapes(a[:-2], b[:-2]) + (a[-2], b[-1])
    if a1:
        shape = shape[:-2] + shape[-1:]
    if b1:
        shape = shape[:-1]
    return shape


def _reshape_shape(old: Tuple[int, ...], new) -> Tuple[int, ...]:
    new = (new,) if isinstance(new, int) else tuple(new)
    total = math.prod(old)
    if new.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in new:
        known = math.prod(s for s in new if s != -1)
        if known == 0 or total % known:
            raise ValueError(f"cannot reshape array of size {total} into shape {new}")
        new = tuple(total // known if s == -1 else s for s in new)
    if math.prod(new) != total:
        raise ValueError(f"cannot reshape array of size {total} into shape {new}")
    return new


class MetaBackend(Backend):
    """Shapes and dtypes only; see the module docstring."""

    name = "meta"
    xp = np  # for the dtype objects; every array function is replaced below
    device = "meta"
    # the CPU and CUDA backends both run attention as one fused op: a trace records the op they run
    fused_attention = True

    def __init__(self) -> None:
        super().__init__()
        own = set(UNARY + BINARY + REDUCTIONS) | set(MetaBackend.__dict__)
        missing = [n for n in STANDARD if n not in own]
        assert not missing, f"the meta backend lacks {missing}"
        for name in STANDARD:  # the base bound NumPy's functions; the class's own must show through
            self.__dict__.pop(name, None)
        self._to_native = {d: np.dtype(d.name) for d in _dtypes.ALL}
        self._from_native = {v: k for k, v in self._to_native.items()}
        for name in UNARY:
            setattr(self, name, _unary(name))
        for name in BINARY:
            setattr(self, name, _binary(_NP_NAMES.get(name, name)))
        for name in REDUCTIONS:
            setattr(self, name, _reduction(name))

    # conversion ----------------------------------------------------------------------
    def is_array(self, x) -> bool:
        return isinstance(x, MetaArray)

    def dtype_of(self, x) -> _dtypes.DType:
        return super().dtype_of(_as_meta(x))

    def asarray(self, data, dtype=None, copy=None):
        native = None if dtype is None else self._to_native[dtype]
        if isinstance(data, MetaArray):
            return data if native is None else MetaArray(data.shape, native)
        if hasattr(data, "shape") and hasattr(data, "dtype"):
            return MetaArray(data.shape, native if native is not None else np.dtype(str(data.dtype)))
        a = np.asarray(data, dtype=native)  # Python data: small, and its shape is what matters
        return MetaArray(a.shape, a.dtype)

    def to_numpy(self, x):
        raise _needs_values("reading a tensor's values")

    def upload(self, x, non_blocking: bool = False):
        """``x`` of another device as a meta array (``t.to("meta")``): its shape and dtype."""
        return _as_meta(x)

    def download(self, x):
        raise _needs_values("moving a meta tensor to a device with data")

    def item(self, x):
        raise _needs_values("item()")

    def tolist(self, x):
        raise _needs_values("tolist()")

    # elementwise ---------------------------------------------------------------------
    def erf(self, x):
        return MetaArray(_shape(x), x.dtype if x.dtype.kind == "f" else np.float64)

    erfc = erfinv = lgamma = digamma = i0 = i1 = erf

    def polygamma(self, n, x):
        return self.erf(x)

    def igamma(self, a, x):
        return MetaArray(np.broadcast_shapes(_shape(a), _shape(x)), _probe(np.add, a, x))

    igammac = igamma

    def where(self, c, a, b):
        return MetaArray(np.broadcast_shapes(_shape(c), _shape(a), _shape(b)), _probe(np.where, True, a, b))

    def clip(self, x, min=None, max=None):
        bounds = [s for s in (min, max) if _is_array(s) or hasattr(s, "shape")]
        shape = np.broadcast_shapes(_shape(x), *(_shape(s) for s in bounds))
        return MetaArray(shape, _probe(np.clip, x, min, max))

    def astype(self, x, dtype, copy=True):
        return MetaArray(_shape(x), dtype)

    # reductions and scans --------------------------------------------------------------
    def argmax(self, x, axis=None, keepdims=False):
        return MetaArray(_reduced(_shape(x), axis, keepdims, "argmax"), np.intp)

    def argmin(self, x, axis=None, keepdims=False):
        return MetaArray(_reduced(_shape(x), axis, keepdims, "argmin"), np.intp)

    def _scan(self, x, axis, dtype, include_initial, np_fn):
        shape = list(_shape(x))
        if axis is None:
            if len(shape) > 1:
                raise ValueError("a scan over a multi-dimensional array needs an axis")
            axis = 0
        if include_initial:
            shape[_axis(axis, len(shape), "scan")] += 1
        return MetaArray(shape, _probe(np_fn, x, dtype=dtype))

    def cumulative_sum(self, x, axis=None, dtype=None, include_initial=False):
        return self._scan(x, axis, dtype, include_initial, np.sum)

    def cumulative_prod(self, x, axis=None, dtype=None, include_initial=False):
        return self._scan(x, axis, dtype, include_initial, np.prod)

    def sort(self, x, axis=-1, descending=False, stable=True):
        return MetaArray(_shape(x), x.dtype)

    def argsort(self, x, axis=-1, descending=False, stable=True):
        return MetaArray(_shape(x), np.intp)

    # products --------------------------------------------------------------------------
    def matmul(self, a, b):
        return MetaArray(_matmul_shape(_shape(a), _shape(b)), _probe(np.multiply, a, b))

    def einsum(self, subscripts, *arrays):
        shape = _einsum_shape(subscripts, [_shape(a) for a in arrays])
        return MetaArray(shape, np.result_type(*(_stand_in(a) for a in arrays)))

    # linear algebra: shapes of the factors (the ops check squareness before calling) ---------
    def inv(self, x):
        return MetaArray(_shape(x), x.dtype)

    cholesky = inv

    def det(self, x):
        return MetaArray(_shape(x)[:-2], x.dtype)

    def slogdet(self, x):
        return self.det(x), MetaArray(_shape(x)[:-2], _real(x.dtype))

    def solve(self, a, b):
        return MetaArray(_shape(b), _probe(np.multiply, a, b))

    def eigh(self, x):
        return MetaArray(_shape(x)[:-1], _real(x.dtype)), MetaArray(_shape(x), x.dtype)

    def qr(self, x, mode):
        *batch, m, n = _shape(x)
        k = m if mode == "complete" else min(m, n)
        return MetaArray((*batch, m, k), x.dtype), MetaArray((*batch, k, n), x.dtype)

    def svd(self, x, full_matrices):
        *batch, m, n = _shape(x)
        k = min(m, n)
        u, v = (m, n) if full_matrices else (k, k)
        return (MetaArray((*batch, m, u), x.dtype), MetaArray((*batch, k), _real(x.dtype)),
                MetaArray((*batch, v, n), x.dtype))

    def pinv(self, x, atol, rtol):
        *batch, m, n = _shape(x)
        return MetaArray((*batch, n, m), x.dtype)

    # shape and layout ------------------------------------------------------------------
    def reshape(self, x, shape, copy=None):
        return MetaArray(_reshape_shape(_shape(x), shape), x.dtype)

    def permute_dims(self, x, axes):
        shape = _shape(x)
        if sorted(a % len(shape) for a in axes) != list(range(len(shape))):
            raise ValueError(f"axes {tuple(axes)} don't match an array of {len(shape)} dims")
        return MetaArray(tuple(shape[a] for a in axes), x.dtype)

    def moveaxis(self, x, source, destination):
        shape = _shape(x)
        src = _axes(source, len(shape), "moveaxis")
        dst = _axes(destination, len(shape), "moveaxis")
        order = [a for a in range(len(shape)) if a not in src]
        for d, s in sorted(zip(dst, src)):
            order.insert(d, s)
        return MetaArray(tuple(shape[a] for a in order), x.dtype)

    def expand_dims(self, x, axis=0):
        shape = list(_shape(x))
        n = len(shape) + (len(axis) if isinstance(axis, (tuple, list)) else 1)
        for a in sorted(_axes(axis, n, "expand_dims")):
            shape.insert(a, 1)
        return MetaArray(shape, x.dtype)

    def squeeze(self, x, axis=None):
        shape = _shape(x)
        axes = [i for i, s in enumerate(shape) if s == 1] if axis is None else _axes(axis, len(shape), "squeeze")
        if any(shape[a] != 1 for a in axes):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
        return MetaArray(tuple(s for i, s in enumerate(shape) if i not in axes), x.dtype)

    def broadcast_to(self, x, shape):
        shape = tuple(shape)
        if np.broadcast_shapes(_shape(x), shape) != shape:
            raise ValueError(f"cannot broadcast an array of shape {_shape(x)} to {shape}")
        return MetaArray(shape, x.dtype)

    def flip(self, x, axis=None):
        _axes(axis, len(_shape(x)), "flip")
        return MetaArray(_shape(x), x.dtype)

    def roll(self, x, shift, axis=None):
        return MetaArray(_shape(x), x.dtype)

    def tril(self, x, k=0):
        return MetaArray(_shape(x), x.dtype)

    def triu(self, x, k=0):
        return MetaArray(_shape(x), x.dtype)

    def tri_indices(self, row, col, offset, lower, dtype):
        # the count is known without values: row i holds the columns j with j - i <= offset (>= for upper)
        if lower:
            n = sum(min(col, max(0, i + offset + 1)) for i in range(row))
        else:
            n = sum(min(col, max(0, col - i - offset)) for i in range(row))
        return MetaArray((2, n), dtype)

    def tile(self, x, reps):
        reps = (reps,) if isinstance(reps, int) else tuple(reps)
        shape = _shape(x)
        n = max(len(shape), len(reps))
        shape = (1,) * (n - len(shape)) + shape
        reps = (1,) * (n - len(reps)) + reps
        return MetaArray(tuple(s * r for s, r in zip(shape, reps)), x.dtype)

    def repeat(self, x, repeats, axis=None):
        if isinstance(repeats, MetaArray):
            raise _needs_values("repeat with a tensor of counts")
        shape = list(_shape(x)) if axis is not None else [math.prod(_shape(x))]
        a = 0 if axis is None else _axis(axis, len(shape), "repeat")
        counts = np.asarray(repeats)
        shape[a] = shape[a] * int(counts) if counts.ndim == 0 else int(counts.sum())
        return MetaArray(shape, x.dtype)

    def pad(self, x, widths, value):
        return MetaArray(tuple(s + lo + hi for s, (lo, hi) in zip(_shape(x), widths)), x.dtype)

    def concat(self, arrays, axis=0):
        shapes = [_shape(a) for a in arrays]
        if axis is None:
            return MetaArray((sum(math.prod(s) for s in shapes),), np.result_type(*map(_stand_in, arrays)))
        a = _axis(axis, len(shapes[0]), "concat")
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or any(p != q for i, (p, q) in enumerate(zip(s, shapes[0])) if i != a):
                raise ValueError(f"concat: shapes {shapes[0]} and {s} differ outside axis {a}")
        shape = list(shapes[0])
        shape[a] = sum(s[a] for s in shapes)
        return MetaArray(shape, np.result_type(*map(_stand_in, arrays)))

    def stack(self, arrays, axis=0):
        shapes = {_shape(a) for a in arrays}
        if len(shapes) != 1:
            raise ValueError(f"stack: all input arrays must have the same shape, got {sorted(shapes)}")
        shape = list(shapes.pop())
        shape.insert(_axis(axis, len(shape) + 1, "stack"), len(arrays))
        return MetaArray(shape, np.result_type(*map(_stand_in, arrays)))

    # sliding windows -------------------------------------------------------------------
    def conv(self, x, w, stride, padding, dilation, groups):
        out = conv_out_shape(_shape(x)[2:], _shape(w)[2:], stride, padding, dilation)
        return MetaArray((_shape(x)[0], _shape(w)[0]) + out, x.dtype)

    def conv_input_grad(self, g, w, shape, stride, padding, dilation, groups):
        return MetaArray(shape, g.dtype)

    def conv_weight_grad(self, x, g, wshape, stride, padding, dilation, groups):
        return MetaArray(wshape, x.dtype)

    def pool(self, x, kernel, stride, padding, dilation, mode, at=None):
        shape = _shape(x)[:2] + conv_out_shape(_shape(x)[2:], kernel, stride, padding, dilation)
        return MetaArray(shape, x.dtype), (None if mode == "avg" else MetaArray(shape, np.int64))

    def pool_backward(self, g, k, shape, kernel, stride, padding, dilation, mode):
        return MetaArray(shape, g.dtype)

    # indexing --------------------------------------------------------------------------
    def getitem(self, x, key):
        return MetaArray(_index_shape(_shape(x), key), x.dtype)

    def setitem(self, x, key, value) -> None:
        target = _index_shape(_shape(x), key)
        if np.broadcast_shapes(_shape(value), target) != target:
            raise ValueError(f"could not broadcast input array from shape {_shape(value)} into shape {target}")

    def take(self, x, indices, axis=None):
        shape = _shape(x)
        if axis is None:
            return MetaArray(_shape(indices), x.dtype)
        a = _axis(axis, len(shape), "take")
        return MetaArray(shape[:a] + _shape(indices) + shape[a + 1:], x.dtype)

    def take_along_axis(self, x, indices, axis=-1):
        shape, ishape = _shape(x), _shape(indices)
        a = _axis(axis, len(shape), "take_along_axis")
        if len(ishape) != len(shape):
            raise ValueError("take_along_axis: indices and array must have the same number of dimensions")
        out = np.broadcast_shapes(shape[:a] + (1,) + shape[a + 1:], ishape[:a] + (1,) + ishape[a + 1:])
        return MetaArray(out[:a] + (ishape[a],) + out[a + 1:], x.dtype)

    def scatter_add(self, shape, dtype, key, values):
        return MetaArray(shape, values.dtype if dtype is None else self._to_native[dtype])

    def searchsorted(self, edges, x, right: bool):
        return MetaArray(_shape(x), np.int64)

    def scatter_reduce(self, x, key, values, reduce, include_self):
        return MetaArray(_shape(x), x.dtype)

    def nonzero(self, x):
        raise _needs_values("nonzero()")

    # creation --------------------------------------------------------------------------
    def zeros(self, shape, dtype=None, device=None):
        return MetaArray((shape,) if isinstance(shape, int) else shape, dtype or np.float64)

    ones = empty = zeros

    def full(self, shape, fill_value, dtype=None, device=None):
        return MetaArray((shape,) if isinstance(shape, int) else shape,
                         dtype or np.asarray(fill_value).dtype)

    def zeros_like(self, x, dtype=None, device=None):
        return MetaArray(_shape(x), dtype or x.dtype)

    ones_like = zeros_like

    def full_like(self, x, fill_value, dtype=None, device=None):
        return MetaArray(_shape(x), dtype or x.dtype)

    def arange(self, start, stop=None, step=1, dtype=None, device=None):
        if stop is None:
            start, stop = 0, start
        n = max(0, math.ceil((stop - start) / step))
        return MetaArray((n,), np.arange(start, start, step, dtype=dtype).dtype)  # an empty range: no data

    def linspace(self, start, stop, num, dtype=None, device=None, endpoint=True):
        return MetaArray((num,), dtype or np.float64)

    def eye(self, n_rows, n_cols=None, k=0, dtype=None, device=None):
        return MetaArray((n_rows, n_rows if n_cols is None else n_cols), dtype or np.float64)

    # the FFTs: the transformed axis becomes n long (n // 2 + 1 bins for rfft) ----------
    def fft(self, x, n, axis, norm, inverse):
        return MetaArray(_with_size(_shape(x), axis, n), x.dtype)

    def rfft(self, x, n, axis, norm):
        return MetaArray(_with_size(_shape(x), axis, n // 2 + 1), np.result_type(x.dtype, np.complex64))

    def irfft(self, x, n, axis, norm):
        return MetaArray(_with_size(_shape(x), axis, n), np.finfo(x.dtype).dtype)

    # random numbers: shapes only -------------------------------------------------------
    def seed(self, n: int) -> None:
        pass

    def rand(self, shape, dtype):
        return MetaArray(shape, self._to_native[dtype])

    randn = rand

    def randint(self, low, high, shape, dtype):
        return MetaArray(shape, self._to_native[dtype])

    def randperm(self, n: int, dtype):
        return MetaArray((n,), self._to_native[dtype])


def _with_size(shape, axis: int, n: int) -> tuple:
    return shape[:axis] + (n,) + shape[axis + 1:]


def _as_meta(x) -> MetaArray:
    if isinstance(x, MetaArray):
        return x
    return MetaArray(_shape(x), np.dtype(str(x.dtype)))


class _Observer(threading.local):
    """This thread's observer of the arrays the meta backend makes, called as ``fn(out, name, args,
    kwargs)``: ``nt.compile`` learns how an op's public function computed its params from traced arrays
    (an index reshaped and cast), to compute them again at run time.  None outside such a trace."""

    fn = None


OBSERVER = _Observer()


def _observed(name: str, fn):
    def call(*args, **kwargs):
        out = fn(*args, **kwargs)
        observer = OBSERVER.fn
        if observer is not None:
            observer(out, name, args, kwargs)
        return out

    call.__name__ = call.__qualname__ = name
    return call


META = MetaBackend()
for _name in dir(META):
    _fn = getattr(META, _name)
    if not _name.startswith("_") and callable(_fn) and not isinstance(_fn, type):
        setattr(META, _name, _observed(_name, _fn))
