"""NumPy's dispatch protocols for tensors, and ``lift`` for functions written for unnamed arrays.

What lives here:

* ``__array_ufunc__``: a NumPy ufunc called on tensors (``np.exp(t)``, ``ndarray + t``,
  ``t < ndarray``) runs the namedtensor op of the same meaning, found in ``UFUNCS`` by the
  ufunc's name, so the result is a named tensor and gradients flow where the op has one.
  Names follow the op's rule: unary ufuncs keep the input's names; binary ufuncs unify their
  operands' names (an ndarray operand is an unnamed constant, rule 2).  The bitwise ufuncs
  (what ``ndarray & t`` calls) are taken on booleans only, as the logical ops.  ``out=`` is taken
  when it is a single tensor: the result is copied into it with ``copy_`` (its in-place name
  rule applies); an ndarray ``out=`` is refused, since it would drop the names.  Of the ufunc
  methods, ``reduce`` maps for ``add multiply maximum minimum logical_and logical_or`` (to
  ``sum prod amax amin all any``, ``axis`` defaulting to 0 as in NumPy) and ``accumulate``
  for ``add multiply`` (``cumsum cumprod``).
* ``__array_function__``: a NumPy function called on tensors (``np.sum(t, axis=1)``,
  ``np.concatenate([a, b])``) runs the op listed in ``FUNCTIONS``: ``axis=`` becomes ``dim=``
  (ints, tuples of ints, and names too), ``keepdims=`` becomes ``keepdim=``, and the op's
  name rule applies, e.g. ``np.reshape`` of a tensor with named dims raises the
  ``NamesError`` of ``reshape`` (give names with ``t.reshape(..., names=...)``).  NumPy
  semantics are kept where they differ from PyTorch's spelling: ``np.max`` is ``amax``,
  ``np.std``/``np.var`` use ``ddof=0``, ``np.sort`` returns values only, and NumPy's letter
  specs for ``np.einsum`` label positions (each letter takes the name of the dims it labels).
  A full reduction gives a 0-dim tensor, not a NumPy scalar.  ``np.real``, ``np.imag`` and
  ``np.angle`` (``deg=`` too) are the complex ops, ``np.conj`` the ufunc ``conjugate``.
  ``NO_DIMS`` lists functions whose result has no dims (``allclose``, ``array_equal``, ``shape``,
  ``ndim``, ``size``, ``iscomplexobj``, ``isrealobj``): they run on the values, as nothing named
  is lost.
* What raises: any other ufunc, ufunc method or function, and options the op cannot honour
  (``dtype=``, ``where=``, an ndarray ``out=``, ...) raise a ``TypeError`` naming the function
  and the two ways out: ``t.numpy()`` (names are dropped, explicitly) or ``nt.lift``.  Names
  are never lost silently.  ``np.asarray(t)`` and ``np.array(t)`` use ``Tensor.__array__`` and
  give a plain ndarray: that is the explicit conversion.
* ``lift(fn, in_dims, out_dims)``: call a function written for positional arrays on named
  tensors.  Each input is aligned (``align_to``) to the names the function expects (it must
  have exactly those names, in any order), ``fn`` is called on the NumPy arrays, and each
  output is named with ``out_dims``.  The function sees plain arrays, so no gradient passes
  through it: an input that requires grad (with grad mode on) is refused rather than having
  its gradient silently cut; detach it first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from . import _names
from ._internal import backend_of, operand, wrap
from .autograd.mode import is_grad_enabled
from .ops import complex as C
from .ops import elementwise as E
from .ops import joining, linalg, naming, sorting
from .ops import reductions as R
from .ops import shape as S
from .tensor import Tensor

_WAYS_OUT = ("convert with t.numpy() (names are dropped) or wrap the NumPy code with nt.lift(fn, in_dims=..., "
             "out_dims=...)")


def _unsupported(what: str) -> TypeError:
    return TypeError(f"{what} is not supported on namedtensor tensors; {_WAYS_OUT}.")


def _refuse_options(fname: str, **options) -> None:
    """Options NumPy accepts that the op cannot honour: refused when given a non-default value."""
    for key, value in options.items():
        if value is not None and value is not False:
            raise TypeError(f"np.{fname}: the option {key}= is not supported on namedtensor tensors; {_WAYS_OUT}.")


# ----------------------------------------------------------------------------- ufuncs

#: ufunc name -> namedtensor op (NumPy's names where they differ from ours)
UFUNCS: dict[str, Callable] = {
    "add": E.add, "subtract": E.sub, "multiply": E.mul, "divide": E.div, "true_divide": E.div,
    "power": E.pow, "float_power": E.pow, "maximum": E.maximum, "minimum": E.minimum, "remainder": E.remainder,
    "floor_divide": E.floor_divide, "negative": E.neg, "absolute": E.abs, "fabs": E.abs, "exp": E.exp,
    "log": E.log, "log1p": E.log1p, "expm1": E.expm1, "sqrt": E.sqrt, "sin": E.sin, "cos": E.cos,
    "tan": E.tan, "tanh": E.tanh, "sign": E.sign, "floor": E.floor, "ceil": E.ceil, "square": E.square,
    "reciprocal": E.reciprocal, "equal": E.eq, "not_equal": E.ne, "less": E.lt, "less_equal": E.le,
    "greater": E.gt, "greater_equal": E.ge, "logical_and": E.logical_and, "logical_or": E.logical_or,
    "logical_xor": E.logical_xor, "logical_not": E.logical_not, "isnan": E.isnan, "isinf": E.isinf,
    "isfinite": E.isfinite, "matmul": linalg.matmul, "conjugate": C.conj,
}


def _boolean(name: str, op: Callable) -> Callable:
    """``&``, ``|``, ``^``, ``~`` on boolean arrays reach NumPy as bitwise ufuncs; on booleans they are the logical ops."""
    def run(*inputs):
        if any(getattr(getattr(x, "dtype", None), "kind", "b") != "b" for x in inputs):
            raise _unsupported(f"np.{name} on non-boolean values")
        return op(*inputs)

    return run


UFUNCS.update({"bitwise_and": _boolean("bitwise_and", E.logical_and),
               "bitwise_or": _boolean("bitwise_or", E.logical_or),
               "bitwise_xor": _boolean("bitwise_xor", E.logical_xor),
               "invert": _boolean("invert", E.logical_not)})

#: (ufunc name, method) -> reduction or scan over one axis
UFUNC_METHODS: dict[tuple[str, str], Callable] = {
    ("add", "reduce"): R.sum, ("multiply", "reduce"): R.prod, ("maximum", "reduce"): R.amax,
    ("minimum", "reduce"): R.amin, ("logical_and", "reduce"): R.all, ("logical_or", "reduce"): R.any,
    ("add", "accumulate"): R.cumsum, ("multiply", "accumulate"): R.cumprod,
}


def _single_out(name: str, out) -> Tensor | None:
    if out is None:
        return None
    outs = out if isinstance(out, tuple) else (out,)
    if len(outs) != 1 or not isinstance(outs[0], Tensor):
        raise TypeError(f"np.{name}: out= must be one namedtensor tensor (an ndarray out= would drop the names); "
                        f"{_WAYS_OUT}.")
    return outs[0]


def __array_ufunc__(self: Tensor, ufunc, method: str, *inputs, **kwargs) -> Any:
    """Run a NumPy ufunc as the namedtensor op of the same meaning (see the module docstring)."""
    name = ufunc.__name__
    out = _single_out(name, kwargs.pop("out", None))
    if method == "__call__":
        op = UFUNCS.get(name)
        if op is None:
            raise _unsupported(f"np.{name}")
        _refuse_options(name, **kwargs)
        if len(inputs) == 1 and not isinstance(inputs[0], Tensor):
            raise _unsupported(f"np.{name} on a {type(inputs[0]).__name__} with a tensor out=")
        result = op(*inputs)
    else:
        op = UFUNC_METHODS.get((name, method))
        if op is None:
            raise _unsupported(f"np.{name}.{method}")
        axis = kwargs.pop("axis", 0)
        keepdims = kwargs.pop("keepdims", False)
        _refuse_options(f"{name}.{method}", **kwargs)
        (x,) = inputs
        if not isinstance(x, Tensor):
            raise _unsupported(f"np.{name}.{method} on a {type(x).__name__} with a tensor out=")
        if method == "accumulate":
            result = op(x, axis)
        else:
            result = op(x, dim=axis, keepdim=keepdims)
    if out is not None:
        return out.copy_(result)
    return result


# ----------------------------------------------------------------------------- functions


def _as_tensors(values, fname: str) -> list:
    """The tensors of a sequence argument; ndarrays among them join as unnamed constants."""
    values = list(values)
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None:
        raise TypeError(f"np.{fname}: expected a sequence of tensors.")
    return [operand(v, like, f"np.{fname}") for v in values]


def _reduction(fname: str, op: Callable) -> Callable:
    def run(a, axis=None, dtype=None, out=None, keepdims=False, **rest):
        _refuse_options(fname, dtype=dtype, out=out, **rest)
        return op(a, dim=axis, keepdim=keepdims)

    return run


def _moments(fname: str, op: Callable) -> Callable:
    def run(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, **rest):
        _refuse_options(fname, dtype=dtype, out=out, **rest)
        return op(a, dim=axis, correction=ddof, keepdim=keepdims)

    return run


def _arg(fname: str, op: Callable) -> Callable:
    def run(a, axis=None, out=None, *, keepdims=False):
        _refuse_options(fname, out=out)
        return op(a, dim=axis, keepdim=keepdims)

    return run


def _along(fname: str, axis, t: Tensor) -> Any:
    """NumPy flattens when ``axis=None``; namedtensor needs a dim, except for a 1-D tensor."""
    if axis is not None:
        return axis
    if t.ndim == 1:
        return 0
    raise TypeError(f"np.{fname}: axis=None flattens the tensor, which has no name rule here; give axis=, or "
                    f"flatten first with t.flatten(...).")


def _scan(fname: str, op: Callable) -> Callable:
    def run(a, axis=None, dtype=None, out=None):
        _refuse_options(fname, dtype=dtype, out=out)
        return op(a, _along(fname, axis, a))

    return run


def _concatenate(arrays, axis=0, out=None, **rest):
    _refuse_options("concatenate", out=out, **rest)
    tensors = _as_tensors(arrays, "concatenate")
    return joining.cat(tensors, dim=_along("concatenate", axis, tensors[0]))


def _stack(arrays, axis=0, out=None, **rest):
    _refuse_options("stack", out=out, **rest)
    return joining.stack(_as_tensors(arrays, "stack"), dim=axis)


def _where(condition, *xy):
    if len(xy) != 2:
        raise _unsupported("np.where with one argument (the indices of nonzero values)")
    return E.where(condition, *xy)


def _einsum(subscripts, *operands, optimize=False, out=None, **rest):
    """NumPy's letters label positions, so each letter takes the name of the dims it labels (the
    same name wherever it appears); the contraction runs on the values and the output is named."""
    # optimize= only chooses the contraction order, which the backend decides anyway
    _refuse_options("einsum", out=out, **rest)
    if not isinstance(subscripts, str) or "." in subscripts or " " in subscripts:
        raise _unsupported("np.einsum with this spec (only letter specs without '...')")
    ins, _, out_spec = subscripts.partition("->")
    words = ins.split(",")
    if any(len(set(w)) != len(w) for w in words):
        raise _unsupported("np.einsum with a letter repeated in one operand (a diagonal)")
    if "->" not in subscripts:  # NumPy's implicit output: the letters used once, sorted
        out_spec = "".join(sorted(c for c in set(ins) if c != "," and ins.count(c) == 1))
    tensors = _as_tensors(operands, "einsum")
    if len(words) != len(tensors) or any(len(w) != t.ndim for w, t in zip(words, tensors)):
        raise ValueError(f"np.einsum: the spec {subscripts!r} does not match the operands' ranks "
                         f"{[t.ndim for t in tensors]}.")
    named: dict[str, str] = {}
    for i, (word, t) in enumerate(zip(words, tensors)):
        for letter, name in zip(word, t.names):
            if name is not None and named.setdefault(letter, name) != name:
                raise _names.NamesError(
                    f"einsum: the letter {letter!r} labels dims named {named[letter]!r} and {name!r} (operand {i} "
                    f"has names {_names.fmt(t.names)}); rename so that the dims a letter joins share a name.")
    spec = f"{ins}->{out_spec}"
    result = linalg.einsum(spec, *(naming.rename(t, None) for t in tensors))
    return naming.rename(result, *(named.get(c) for c in out_spec)) if out_spec else result


def _transpose(a, axes=None):
    return naming.permute(a, *(range(a.ndim - 1, -1, -1) if axes is None else axes))


def _reshape(a, *args, **kwargs):
    shape = kwargs.pop("shape", kwargs.pop("newshape", args[0] if args else None))
    order = kwargs.pop("order", args[1] if len(args) > 1 else "C")
    kwargs.pop("copy", None)
    if shape is None or kwargs or order != "C":
        raise TypeError(f"np.reshape: only reshape(a, shape) in C order is supported on namedtensor tensors; "
                        f"{_WAYS_OUT}.")
    return S.reshape(a, *(shape if isinstance(shape, (tuple, list)) else (shape,)))


def _clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None, **rest):
    _refuse_options("clip", out=out, **rest)
    return E.clip(a, a_min if min is None else min, a_max if max is None else max)


def _squeeze(a, axis=None):
    return S.squeeze(a, axis)


def _expand_dims(a, axis):
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    ndim = a.ndim + len(axes)
    out = a
    for ax in sorted(ax % ndim for ax in axes):
        out = S.unsqueeze(out, ax)
    return out


def _moveaxis(a, source, destination):
    src = source if isinstance(source, (tuple, list)) else (source,)
    dst = destination if isinstance(destination, (tuple, list)) else (destination,)
    if len(src) != len(dst):
        raise ValueError("np.moveaxis: source and destination must have the same number of elements.")
    src = [_names.axis(a.names, s, "moveaxis") for s in src]
    dst = [d % a.ndim for d in dst]
    order = [i for i in range(a.ndim) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return naming.permute(a, *order)


def _swapaxes(a, axis1, axis2):
    return naming.transpose(a, axis1, axis2)


def _sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse_options("sort", order=order)
    return sorting.sort(a, dim=_along("sort", axis, a), stable=bool(stable) or kind == "stable").values


def _argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse_options("argsort", order=order)
    return sorting.argsort(a, dim=_along("argsort", axis, a), stable=bool(stable) or kind == "stable")


def _angle(z, deg=False):
    out = C.angle(z)
    return out * (180 / math.pi) if deg else out


def _round(a, decimals=0, out=None):
    _refuse_options("round", out=out)
    if decimals != 0:
        raise _unsupported("np.round with decimals other than 0")
    return E.round(a)


#: NumPy function name -> a handler with NumPy's signature that calls the namedtensor op
FUNCTIONS: dict[str, Callable] = {
    "sum": _reduction("sum", R.sum), "mean": _reduction("mean", R.mean), "prod": _reduction("prod", R.prod),
    "max": _reduction("max", R.amax), "amax": _reduction("amax", R.amax), "min": _reduction("min", R.amin),
    "amin": _reduction("amin", R.amin), "any": _reduction("any", R.any), "all": _reduction("all", R.all),
    "std": _moments("std", R.std), "var": _moments("var", R.var),
    "argmax": _arg("argmax", R.argmax), "argmin": _arg("argmin", R.argmin),
    "cumsum": _scan("cumsum", R.cumsum), "cumprod": _scan("cumprod", R.cumprod),
    "concatenate": _concatenate, "concat": _concatenate, "stack": _stack, "where": _where,
    "matmul": linalg.matmul, "einsum": _einsum, "transpose": _transpose, "permute_dims": _transpose,
    "reshape": _reshape, "clip": _clip, "squeeze": _squeeze, "expand_dims": _expand_dims,
    "moveaxis": _moveaxis, "swapaxes": _swapaxes, "sort": _sort, "argsort": _argsort, "round": _round,
    "around": _round, "real": C.real, "imag": C.imag, "angle": _angle,
}

#: functions whose result has no dims, so running them on the values loses no names
NO_DIMS = frozenset({"allclose", "array_equal", "array_equiv", "shape", "ndim", "size", "iscomplexobj", "isrealobj"})


def _to_arrays(value):
    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (list, tuple)):
        return type(value)(_to_arrays(v) for v in value)
    return value


def __array_function__(self: Tensor, func, types, args, kwargs) -> Any:
    """Run a NumPy function as the namedtensor op listed in ``FUNCTIONS`` (see the module docstring)."""
    name = func.__name__
    if not func.__module__.startswith("numpy"):
        raise _unsupported(f"{func.__module__}.{name}")
    if name in NO_DIMS:
        return func(*_to_arrays(args), **{k: _to_arrays(v) for k, v in kwargs.items()})
    handler = FUNCTIONS.get(name)
    if handler is None or func.__module__ != "numpy":
        raise _unsupported(f"np.{name}" if func.__module__ == "numpy" else f"{func.__module__}.{name}")
    return handler(*args, **kwargs)


# ----------------------------------------------------------------------------- lift

DimsSpec = Sequence[str] | list[Sequence[str]]


def _specs(dims, what: str) -> tuple[bool, tuple[tuple[str, ...], ...]]:
    """``(several, specs)``: a tuple of names is one spec, a list of them is several."""
    if isinstance(dims, tuple) and all(isinstance(d, str) for d in dims):
        return False, (dims,)
    if isinstance(dims, list) and all(isinstance(d, tuple) and all(isinstance(n, str) for n in d) for d in dims):
        return True, tuple(dims)
    raise TypeError(f"lift: {what} must be a tuple of dim names (one array) or a list of such tuples, got {dims!r}.")


def lift(fn: Callable, in_dims: DimsSpec, out_dims: DimsSpec) -> Callable:
    """Apply ``fn``, written for positional (unnamed) arrays, to named tensors.

    ``in_dims`` gives, per input, the dims ``fn`` expects in order (a tuple of names for one
    input, a list of tuples for several); each input must have exactly those names, in any
    order, and is aligned to them before ``fn`` sees it as a NumPy array.  ``out_dims`` names
    the output's dims (a list of tuples when ``fn`` returns several arrays).  Other arguments
    pass through unchanged.  No gradient flows through ``fn``: inputs that require grad are
    refused while grad mode is on (``detach()`` them, or use ``nt.no_grad()``).

        softmax_rows = nt.lift(lambda x: np.exp(x) / np.exp(x).sum(-1, keepdims=True),
                               in_dims=("batch", "class"), out_dims=("batch", "class"))
    """
    _, ins = _specs(in_dims, "in_dims")
    several_out, outs = _specs(out_dims, "out_dims")
    fname = getattr(fn, "__name__", type(fn).__name__)

    def lifted(*tensors, **kwargs):
        if len(tensors) != len(ins):
            raise TypeError(f"lift({fname}): expected {len(ins)} tensor(s) for in_dims {list(ins)}, got {len(tensors)}.")
        arrays = []
        for i, (t, want) in enumerate(zip(tensors, ins)):
            if not isinstance(t, Tensor):
                raise TypeError(f"lift({fname}): input {i} must be a Tensor, got {type(t).__name__}.")
            if sorted(map(str, t.names)) != sorted(want) or None in t.names:
                raise _names.NamesError(
                    f"lift({fname}): input {i} has names {_names.fmt(t.names)}, but the function expects exactly "
                    f"{_names.fmt(want)} (in any order); rename or refine_names the input to those names first.")
            if t.requires_grad and is_grad_enabled():
                raise RuntimeError(
                    f"lift({fname}): input {i} requires grad, but no gradient passes through a lifted function "
                    f"(it sees plain arrays); detach() the input or run under nt.no_grad().")
            arrays.append(naming.align_to(t, *want).numpy())
        B = backend_of(tensors[0])
        result = fn(*arrays, **kwargs)
        results = tuple(result) if several_out else (result,)
        if len(results) != len(outs):
            raise ValueError(f"lift({fname}): the function returned {len(results)} output(s), out_dims names "
                             f"{len(outs)}.")
        named = []
        for i, (r, names) in enumerate(zip(results, outs)):
            data = B.asarray(r)
            if len(data.shape) != len(names):
                raise ValueError(f"lift({fname}): output {i} has {len(data.shape)} dim(s) (shape "
                                 f"{tuple(data.shape)}), but out_dims gives {len(names)} names {_names.fmt(names)}.")
            named.append(naming.refine_names(wrap(data, _names.unnamed(len(names)), B), *names))
        return tuple(named) if several_out else named[0]

    lifted.__name__ = f"lifted_{fname}"
    lifted.__doc__ = f"``{fname}`` lifted to named tensors: in_dims {list(ins)}, out_dims {list(outs)}."
    return lifted


METHODS = {"__array_ufunc__": __array_ufunc__, "__array_function__": __array_function__}
