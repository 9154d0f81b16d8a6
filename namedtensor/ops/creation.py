"""Making tensors: ``nt.tensor``, ``nt.as_tensor``, the factories and the random ones.

Name rule: ``names=`` gives the names (one per dim, ``None`` for unnamed); a
shape given as a dict (``nt.zeros({"batch": 2, "seq": 5})``) names the dims too;
``*_like`` copy the names of their argument unless ``names=`` says otherwise.
Python floats become ``float32`` (the default), Python ints ``int64``.
"""

from __future__ import annotations

import math
import numbers
from typing import Callable, Optional, Sequence

from .. import _dtypes, _names, backends
from ..tensor import Tensor
from ._common import int_sizes, is_bool, tensor_arg


def _backend(device, data=None):
    """The backend of ``device``; with no device, a tensor or a GPU array ``data`` stays on its device
    (anything else: the CPU)."""
    if device is None:
        if isinstance(data, Tensor):
            device = data.device
        elif hasattr(data, "__cuda_array_interface__"):
            dev = getattr(data, "device", None)  # CuPy's has .id, PyTorch's .index
            index = getattr(dev, "id", getattr(dev, "index", None))
            device = "cuda" if index is None else f"cuda:{index}"
    return backends.get(device)


def _finish(data, names, B, requires_grad: bool, op: str) -> Tensor:
    ndim = len(data.shape)
    t = Tensor._make(data, _names.validate(names, ndim, op), B)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, names: Optional[Sequence] = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays or a Tensor).

    Python floats give ``float32``; NumPy arrays keep their dtype.  A Tensor keeps its names
    unless ``names=`` is given.
    """
    B = _backend(device, data)
    copy = dtype is None  # with a dtype, the cast below makes the copy
    if isinstance(data, Tensor):
        if names is None:
            names = data._names
        if data._B is not B:
            arr = backends.transfer(data.array, data._B, B)
        else:
            arr = B.asarray(data._data, copy=True if copy else None)
    else:
        arr = _from_python(B, data, "tensor", copy=copy, dtype=dtype)
    if dtype is not None:
        arr = B.astype(arr, B.native(_dtypes.as_dtype(dtype)))
    return _finish(arr, names, B, requires_grad, "tensor")


def as_tensor(data, names: Optional[Sequence] = None, dtype=None, device=None) -> Tensor:
    """Wrap ``data`` without copying when it already is an array of the right backend and dtype."""
    B = _backend(device, data)
    if isinstance(data, Tensor):
        out = data.to(dtype, device=device)
        return out if names is None else out.rename(*names)
    if B.is_array(data):
        arr = data
    else:
        arr = _from_python(B, data, "as_tensor", copy=False, dtype=dtype)
    if dtype is not None:
        native = B.native(_dtypes.as_dtype(dtype))
        if arr.dtype != native:
            arr = B.astype(arr, native)
    else:
        _check_dtype(B, arr, "as_tensor")
    return _finish(arr, names, B, False, "as_tensor")


def _from_python(B, data, op: str, copy: bool = True, dtype=None):
    """An array of ``data``; with ``dtype`` given the caller casts it (from any dtype the backend reads)."""
    python_floats = _is_python_float(data)
    try:
        arr = B.asarray(data, copy=True if copy else None)
    except (TypeError, ValueError, OverflowError) as e:
        raise TypeError(f"{op}: cannot make a tensor from {type(data).__name__}: {e}") from None
    if dtype is not None:
        return arr  # no float32 detour: nt.tensor([0.1], dtype=nt.float64) keeps full precision
    if python_floats and B.dtype_of(arr) is _dtypes.float64:
        arr = B.astype(arr, B.native(_dtypes.default_float))
    _check_dtype(B, arr, op)
    return arr


def _check_dtype(B, arr, op: str) -> None:
    try:
        B.dtype_of(arr)
    except TypeError:
        raise TypeError(
            f"{op}: unsupported dtype {arr.dtype}; namedtensor supports "
            f"{', '.join(d.name for d in _dtypes.ALL)}. Pass dtype= or convert the data first."
        ) from None


def _is_python_float(data) -> bool:
    """Whether ``data`` is made of Python numbers with at least one float (so float32 is meant)."""
    if data.__class__ is float:  # not a NumPy float64 scalar (a float subclass): that one keeps its dtype
        return True
    if isinstance(data, (list, tuple)):
        return any(_is_python_float(x) for x in data)
    return False


def _shape_and_names(shape, names, op: str):
    if len(shape) == 1 and isinstance(shape[0], dict):
        if names is not None:
            raise ValueError(f"{op}: give names either as the keys of the shape dict or as names=, not both.")
        d = shape[0]
        shape, names = tuple(d.values()), tuple(d.keys())  # sizes checked below like positional ones
    return int_sizes(shape, op, nonnegative=True), names


def _allocated(op: str, shape: tuple, dt, make: Callable[[], object]):
    """``make()``, the array of ``shape`` and ``dt``, with a failure to allocate said in the op's terms (NumPy's
    own message names neither the function nor the argument)."""
    try:
        return make()
    except MemoryError:
        size = math.prod(shape) * dt.itemsize
        raise MemoryError(f"{op}: not enough memory for a tensor of shape {shape} and dtype {dt.name} "
                          f"({size / 2**30:,.1f} GiB).") from None
    except ValueError as e:
        if "too big" not in str(e) and "maximum" not in str(e):
            raise
        raise ValueError(f"{op}: a tensor of shape {shape} is too large to exist ({e}).") from None


def _factory(name: str, make) -> Callable[..., Tensor]:
    def fn(*shape, names: Optional[Sequence] = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
        shape, names = _shape_and_names(shape, names, name)
        B = _backend(device)
        dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float
        return _finish(_allocated(name, shape, dt, lambda: make(B, shape, dt)), names, B, requires_grad, name)

    fn.__name__ = name
    return fn


zeros = _factory("zeros", lambda B, shape, dt: B.zeros(shape, dtype=B.native(dt)))
ones = _factory("ones", lambda B, shape, dt: B.ones(shape, dtype=B.native(dt)))
empty = _factory("empty", lambda B, shape, dt: B.empty(shape, dtype=B.native(dt)))
rand = _factory("rand", lambda B, shape, dt: B.rand(shape, _float_only(dt, "rand")))
randn = _factory("randn", lambda B, shape, dt: B.randn(shape, _float_only(dt, "randn")))
zeros.__doc__ = "A tensor of zeros: ``nt.zeros(2, 3, names=('batch', 'feat'))`` or ``nt.zeros({'batch': 2})``."
ones.__doc__ = "A tensor of ones (same arguments as :func:`zeros`)."
empty.__doc__ = "An uninitialised tensor (same arguments as :func:`zeros`)."
rand.__doc__ = "Uniform samples in [0, 1) (see :func:`manual_seed`)."
randn.__doc__ = "Standard normal samples (see :func:`manual_seed`)."


def _float_only(dt, op):
    if dt.kind != "f":
        raise TypeError(f"{op}: needs a floating dtype, got {dt!r}.")
    return dt


def full(shape, fill_value, names=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor filled with ``fill_value`` (its dtype follows the value unless ``dtype=``)."""
    shape, names = _shape_and_names((shape,), names, "full")
    B = _backend(device)
    fill_value = _fill_value(fill_value, "full")
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _scalar_dtype(fill_value)
    data = _allocated("full", shape, dt, lambda: B.full(shape, fill_value, dtype=B.native(dt)))
    return _finish(data, names, B, requires_grad, "full")


def _int_arg(v, what: str, op: str) -> int:
    if is_bool(v) or not hasattr(v, "__index__"):
        raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__} {v!r}.")
    return int(v.__index__())


def _fill_value(v, op: str):
    """A fill value as a Python bool, int or float (``None`` would fill with NaN, a str fail inside NumPy,
    and a backend other than NumPy takes only Python scalars)."""
    if is_bool(v):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    raise TypeError(f"{op}: fill_value must be a number or a bool, got {type(v).__name__} {v!r}.")


def _scalar_dtype(v):
    if isinstance(v, bool):
        return _dtypes.bool_
    if isinstance(v, int):
        return _dtypes.default_int
    return _dtypes.default_float


def arange(start, end=None, step=1, names=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``[start, end)`` by ``step``: int64 for ints, float32 when any bound is a float."""
    if end is None:
        start, end = 0, start
    for what, v in (("start", start), ("end", end), ("step", step)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"arange: {what} must be a number, got {type(v).__name__} {v!r}.")
    if step == 0:
        raise ValueError("arange: step must not be 0.")
    B = _backend(device)
    if dtype is None:
        dt = _dtypes.default_float if any(isinstance(v, float) for v in (start, end, step)) else _dtypes.default_int
    else:
        dt = _dtypes.as_dtype(dtype)
    shape = (max(0, math.ceil((end - start) / step)),)
    data = _allocated("arange", shape, dt, lambda: B.arange(start, end, step, dtype=B.native(dt)))
    return _finish(data, names, B, requires_grad, "arange")


def linspace(start, end, steps: int, names=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    for what, v in (("start", start), ("end", end)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"linspace: {what} must be a number, got {type(v).__name__} {v!r}.")
    steps = _int_arg(steps, "steps", "linspace")
    if steps < 0:
        raise ValueError(f"linspace: steps must be >= 0, got {steps}.")
    B = _backend(device)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float
    data = _allocated("linspace", (steps,), dt, lambda: B.linspace(start, end, steps, dtype=B.native(dt)))
    return _finish(data, names, B, requires_grad, "linspace")


def eye(n: int, m: Optional[int] = None, names=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """The ``n x m`` identity matrix."""
    n, m = int_sizes((n, n if m is None else m), "eye", nonnegative=True)
    B = _backend(device)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float
    data = _allocated("eye", (n, m), dt, lambda: B.eye(n, m, dtype=B.native(dt)))
    return _finish(data, names, B, requires_grad, "eye")


def randint(low, high=None, size=(), names=None, dtype=None, device=None) -> Tensor:
    """Random integers in ``[low, high)``; ``randint(high, size)`` starts at 0.  A float or bool ``dtype``
    gives those integers in that dtype."""
    if high is None or (isinstance(high, (tuple, list, dict))):
        if high is not None:
            size = high
        low, high = 0, low
    shape, names = _shape_and_names((size,), names, "randint")
    low, high = _int_arg(low, "low", "randint"), _int_arg(high, "high", "randint")
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low}).")
    B = _backend(device)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_int
    drawn = dt if dt.kind == "i" else _dtypes.int64
    lowest, highest = -(2 ** (8 * drawn.itemsize - 1)), 2 ** (8 * drawn.itemsize - 1) - 1
    if low < lowest or high - 1 > highest:
        raise ValueError(f"randint: [low, high) = [{low}, {high}) is out of the range of {drawn.name} "
                         f"([{lowest}, {highest}]).")
    data = _allocated("randint", shape, drawn, lambda: B.randint(low, high, shape, drawn))
    if drawn is not dt:
        data = B.astype(data, B.native(dt))
    return _finish(data, names, B, False, "randint")


def _like(name: str, make) -> Callable[..., Tensor]:
    def fn(t: Tensor, *args, names=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
        tensor_arg(t, name)
        B = t._B if device is None else _backend(device)
        dt = _dtypes.as_dtype(dtype) if dtype is not None else t.dtype
        if make is _full:
            args = (_fill_value(args[0], name),) + args[1:] if args else args
        data = _allocated(name, t.shape, dt, lambda: make(B, t.shape, dt, *args))
        return _finish(data, t._names if names is None else names, B, requires_grad, name)

    fn.__name__ = name
    fn.__doc__ = f"Like :func:`{name[:-5]}`, with the shape, names, dtype and device of ``t``."
    return fn


zeros_like = _like("zeros_like", lambda B, s, dt: B.zeros(s, dtype=B.native(dt)))
ones_like = _like("ones_like", lambda B, s, dt: B.ones(s, dtype=B.native(dt)))
empty_like = _like("empty_like", lambda B, s, dt: B.empty(s, dtype=B.native(dt)))
def _full(B, shape, dt, v):
    return B.full(shape, v, dtype=B.native(dt))


full_like = _like("full_like", _full)
rand_like = _like("rand_like", lambda B, s, dt: B.rand(s, _float_only(dt, "rand_like")))
randn_like = _like("randn_like", lambda B, s, dt: B.randn(s, _float_only(dt, "randn_like")))


def manual_seed(n: int) -> None:
    """Seed the random factories of every backend in use, for reproducible results."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"manual_seed: the seed must be an int, got {type(n).__name__}.")
    backends.cpu()  # made first, so that it is among the backends seeded
    for b in backends.made():
        b.seed(n)


METHODS = {
    "zeros_like": zeros_like, "ones_like": ones_like, "full_like": full_like,
}
