"""Making tensors: ``nt.tensor``, ``nt.as_tensor``, the factories and the random ones, PyTorch's
``t.new_*`` methods, and sampling from tensors (``bernoulli``, ``multinomial``, ``normal``).

Name rule: ``names=`` gives the names (one per dim, ``None`` for unnamed); a
shape given as a dict (``nt.zeros({"batch": 2, "seq": 5})``) names the dims too;
``*_like`` copy the names of their argument unless ``names=`` says otherwise;
``t.new_*`` take only ``t``'s dtype and device, not its names.  ``bernoulli`` keeps
its input's names and ``normal`` unifies those of a tensor mean and std (rule 2);
``multinomial`` replaces the category dim in place by an unnamed dim of samples
(``names=`` refines the result).  Python floats become ``float32`` (the default),
Python ints ``int64``.  Random draws come from the backend's stream (``manual_seed``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Callable, Optional, Sequence, Union

from .. import _dtypes, _names, backends
from ..autograd.graph import Op, _state, apply
from ..tensor import Tensor
from ._common import flag, has_values, int_sizes, is_bool, operand, sum_to, tensor_arg


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
    else:
        tracer = _state.current[1]
        if tracer is not None and hasattr(tracer, "made"):
            tracer.made(t)  # nt.compile's trace: the function's own tensor, which it may write into
    return t


def tensor(data, names: Optional[Sequence] = None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (nested lists, numbers, arrays or a Tensor).

    Python floats give ``float32``; NumPy arrays keep their dtype.  A Tensor keeps its names
    unless ``names=`` is given.
    """
    return _tensor(data, names, dtype, device, requires_grad, "tensor")


def _tensor(data, names, dtype, device, requires_grad: bool, op: str) -> Tensor:
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
        arr = _from_python(B, data, op, copy=copy, dtype=dtype)
    if dtype is not None:
        dt = _dtypes.as_dtype(dtype)
        try:
            arr = B.astype(arr, B.native(dt))
        except (TypeError, ValueError) as e:  # an array of objects (or strs) that are not numbers
            raise TypeError(f"{op}: cannot make a tensor of {dt.name} from {type(data).__name__}: {e}") from None
    return _finish(arr, names, B, requires_grad, op)


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
    python_floats = _has_python(data, float)
    python_complex = _has_python(data, complex)
    try:
        arr = B.asarray(data, copy=True if copy else None)
    except (TypeError, ValueError, OverflowError) as e:
        raise TypeError(f"{op}: cannot make a tensor from {type(data).__name__}: {e}") from None
    if dtype is not None:
        return arr  # no float32 detour: nt.tensor([0.1], dtype=nt.float64) keeps full precision
    if python_floats and B.dtype_of(arr) is _dtypes.float64:
        arr = B.astype(arr, B.native(_dtypes.default_float))
    elif python_complex and B.dtype_of(arr) is _dtypes.complex128:
        arr = B.astype(arr, B.native(_dtypes.default_complex))
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


def _has_python(data, kind: type) -> bool:
    """Whether ``data`` is made of Python numbers with at least one of class ``kind``: a float means float32,
    a complex complex64 (PyTorch's defaults)."""
    if data.__class__ is kind:  # not a NumPy float64 scalar (a float subclass): that one keeps its dtype
        return True
    if isinstance(data, (list, tuple)):
        return any(_has_python(x, kind) for x in data)
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
rand = _factory("rand", lambda B, shape, dt: _sample(B, "rand", shape, dt, "rand"))
randn = _factory("randn", lambda B, shape, dt: _sample(B, "randn", shape, dt, "randn"))
zeros.__doc__ = "A tensor of zeros: ``nt.zeros(2, 3, names=('batch', 'feat'))`` or ``nt.zeros({'batch': 2})``."
ones.__doc__ = "A tensor of ones (same arguments as :func:`zeros`)."
empty.__doc__ = "An uninitialised tensor (same arguments as :func:`zeros`)."
rand.__doc__ = "Uniform samples in [0, 1), of both parts for a complex dtype (see :func:`manual_seed`)."
randn.__doc__ = ("Standard normal samples; complex ones have independent parts of variance 1/2, as in PyTorch "
                 "(see :func:`manual_seed`).")


def _float_only(dt, op):
    if dt.kind != "f":
        raise TypeError(f"{op}: needs a floating dtype, got {dt!r}.")
    return dt


def _sample(B, draw: str, shape, dt, op: str):
    """``B.rand``/``B.randn`` samples of a float dtype or, for a complex one, of both parts (PyTorch's complex
    normal has parts of variance 1/2, so that ``E|z|^2 = 1``)."""
    if dt.kind != "c":
        return getattr(B, draw)(shape, _float_only(dt, op))
    part = _dtypes.real_of(dt)
    re, im = getattr(B, draw)(shape, part), getattr(B, draw)(shape, part)
    if draw == "randn":
        re, im = re * math.sqrt(0.5), im * math.sqrt(0.5)
    return B.complex(re, im)


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
    """A fill value as a Python bool, int, float or complex (``None`` would fill with NaN, a str fail inside
    NumPy, and a backend other than NumPy takes only Python scalars)."""
    if is_bool(v):
        return bool(v)
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    if isinstance(v, numbers.Complex):
        return complex(v)
    raise TypeError(f"{op}: fill_value must be a number or a bool, got {type(v).__name__} {v!r}.")


def _scalar_dtype(v):
    if isinstance(v, bool):
        return _dtypes.bool_
    if isinstance(v, int):
        return _dtypes.default_int
    if isinstance(v, complex):
        return _dtypes.default_complex
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
    return _randint(low, high, size, names, dtype, device, "randint")


def _randint(low, high, size, names, dtype, device, op: str) -> Tensor:
    shape, names = _shape_and_names((size,), names, op)
    low, high = _int_arg(low, "low", op), _int_arg(high, "high", op)
    if high <= low:
        raise ValueError(f"{op}: high ({high}) must be greater than low ({low}).")
    B = _backend(device)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_int
    drawn = dt if dt.kind == "i" else _dtypes.int64
    lowest, highest = -(2 ** (8 * drawn.itemsize - 1)), 2 ** (8 * drawn.itemsize - 1) - 1
    if low < lowest or high - 1 > highest:
        raise ValueError(f"{op}: [low, high) = [{low}, {high}) is out of the range of {drawn.name} "
                         f"([{lowest}, {highest}]).")
    data = _allocated(op, shape, drawn, lambda: B.randint(low, high, shape, drawn))
    if drawn is not dt:
        data = B.astype(data, B.native(dt))
    return _finish(data, names, B, False, op)


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
rand_like = _like("rand_like", lambda B, s, dt: _sample(B, "rand", s, dt, "rand_like"))
randn_like = _like("randn_like", lambda B, s, dt: _sample(B, "randn", s, dt, "randn_like"))


def randint_like(t: Tensor, low: int, high: Optional[int] = None, *, names=None, dtype=None, device=None) -> Tensor:
    """Random integers in ``[low, high)`` (``randint_like(t, high)`` starts at 0) with the shape, names,
    dtype and device of ``t`` (``torch.randint_like``)."""
    tensor_arg(t, "randint_like")
    if high is None:
        low, high = 0, low
    return _randint(low, high, t.shape, t._names if names is None else names, t.dtype if dtype is None else dtype,
                    t.device if device is None else device, "randint_like")


def randperm(n: int, *, names: Optional[Sequence] = None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype=``), as ``torch.randperm``; unnamed
    unless ``names=`` (one name)."""
    n = _int_arg(n, "n", "randperm")
    if n < 0:
        raise ValueError(f"randperm: n must be >= 0, got {n}.")
    B = _backend(device)
    dt = _dtypes.as_dtype(dtype) if dtype is not None else _dtypes.int64
    return _finish(_allocated("randperm", (n,), dt, lambda: B.randperm(n, dt)), names, B, requires_grad, "randperm")


# ----------------------------------------------------------------------------- sampling from tensors


def _probabilities(B, p, op: str) -> None:
    """Refuse probabilities outside [0, 1] (nan included), where the tensor has values (not in a dry run)."""
    if has_values(B) and B.item(B.any(B.logical_not(B.logical_and(B.greater_equal(p, 0), B.less_equal(p, 1))))):
        raise ValueError(f"{op}: probabilities must be in [0, 1]; the tensor holds values outside (or nan).")


class _Bernoulli(Op):
    """0 or 1 drawn with the probabilities ``x`` (or ``p``); the gradient is 0, as in PyTorch."""

    name = "bernoulli"

    @staticmethod
    def forward(B, x, p):
        dt = B.dtype_of(x)
        draws = B.rand(x.shape, dt if dt.kind == "f" else _dtypes.float64)
        return B.astype(B.less(draws, x if p is None else p), x.dtype)

    @staticmethod
    def backward(node, g):
        return (g.zeros_like(),)


def bernoulli(input: Tensor, p: Optional[float] = None) -> Tensor:
    """Draws of 0 or 1 with probability ``input`` elementwise (``torch.bernoulli(input)``), or with one
    probability ``p`` in the shape of ``input`` (``torch.bernoulli(input, p)``); the result has
    ``input``'s dtype, shape and names."""
    tensor_arg(input, "bernoulli")
    if p is None:
        if input.dtype.kind != "f":
            raise TypeError(f"bernoulli: the probabilities must be floating point, got {input.dtype!r}; give p= "
                            "to draw into an integer tensor's shape.")
        _probabilities(input._B, input._data, "bernoulli")
    else:
        if is_bool(p) or not isinstance(p, numbers.Real):
            raise TypeError(f"bernoulli: p must be a number, got {type(p).__name__} {p!r}.")
        if not 0 <= p <= 1:
            raise ValueError(f"bernoulli: p must be in [0, 1], got {p}.")
        p = float(p)
    return apply(_Bernoulli, (input,), input._names, p=p)


class _Multinomial(Op):
    """Category indices drawn along ``axis`` (moved last, then back): with replacement the argmax of
    ``log p - log E`` over the categories for each sample, without the ``num_samples`` largest of one such
    key per category (E exponential: the Gumbel-max trick and its top-k form)."""

    name = "multinomial"
    differentiable = False

    @staticmethod
    def forward(B, p, num_samples, replacement, axis):
        p = B.moveaxis(p, axis, -1)
        f64 = B.native(_dtypes.float64)
        positive = B.greater(p, 0)
        log_p = B.where(positive, B.log(B.where(positive, B.astype(p, f64), 1.0)), -math.inf)
        if replacement:
            log_p = B.expand_dims(log_p, axis=-2)
            shape = tuple(p.shape[:-1]) + (num_samples, p.shape[-1])
            out = B.argmax(log_p - B.log(-B.log1p(-B.rand(shape, _dtypes.float64))), axis=-1)
        else:
            keys = log_p - B.log(-B.log1p(-B.rand(tuple(p.shape), _dtypes.float64)))
            out = B.sort_indices(keys, -1, True, True)[..., :num_samples]
        return B.moveaxis(B.astype(out, B.native(_dtypes.int64)), -1, axis)


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, dim: Union[str, int] = -1,
                names: Optional[Sequence] = None) -> Tensor:
    """``num_samples`` category indices (int64) drawn from each row of probabilities (weights: they need not
    sum to 1) along ``dim`` (PyTorch's last dim by default), as ``torch.multinomial``; without replacement
    no category is drawn twice in a row.

    Names: ``input``'s, with ``dim`` replaced in place by the samples' dim, which is unnamed; ``names=``
    refines the result's names (``names=(..., "sample")``).
    """
    tensor_arg(input, "multinomial")
    if input.dtype.kind != "f":
        raise TypeError(f"multinomial: the probabilities must be floating point, got {input.dtype!r}.")
    if input.ndim == 0:
        raise ValueError("multinomial: input needs at least 1 dim (the categories), got a 0-dim tensor.")
    num_samples = _int_arg(num_samples, "num_samples", "multinomial")
    replacement = flag(replacement, "replacement", "multinomial")
    ax = _names.axis(input._names, dim, "multinomial")
    out_names = _names.replace(input._names, ax, (None,), "multinomial")
    if names is not None:
        out_names = _names.refine(out_names, tuple(names), "multinomial")
    categories = input.shape[ax]
    if num_samples <= 0:
        raise ValueError(f"multinomial: num_samples must be > 0, got {num_samples}.")
    if not replacement and num_samples > categories:
        raise ValueError(f"multinomial: cannot draw {num_samples} samples without replacement from "
                         f"{categories} categories.")
    B, p = input._B, input._data
    if has_values(B):
        if B.item(B.any(B.logical_not(B.logical_and(B.isfinite(p), B.greater_equal(p, 0))))):
            raise ValueError("multinomial: the probabilities must be finite and >= 0; the tensor holds inf, nan or "
                             "a negative value.")
        nonzero = B.sum(B.astype(B.greater(p, 0), B.native(_dtypes.int64)), axis=ax)
        fewest = B.item(B.min(nonzero)) if math.prod(nonzero.shape) else num_samples
        if fewest == 0:
            raise ValueError("multinomial: a row of probabilities sums to 0.")
        if not replacement and fewest < num_samples:
            raise ValueError(f"multinomial: a row has only {fewest} categories of nonzero probability, fewer than "
                             f"the {num_samples} samples to draw without replacement.")
    return apply(_Multinomial, (input,), out_names, num_samples=num_samples, replacement=replacement, axis=ax)


class _Normal(Op):
    """``mean + std * z``, z standard normal in the broadcast shape; the gradients are 0 (PyTorch's
    ``normal`` is not reparameterised)."""

    name = "normal"

    @staticmethod
    def forward(B, mean, std, shape, dtype):
        return mean + std * B.randn(shape, dtype)

    @staticmethod
    def backward(node, g):
        return tuple(None if s is None else sum_to(g.zeros_like(), s, n) for s, n in zip(node.in_shapes, node.in_names))


def normal(mean: Any = 0.0, std: Any = 1.0, size: Optional[Sequence[int]] = None, *, names: Optional[Sequence] = None,
           dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Normal samples, as ``torch.normal``: ``normal(mean, std)`` with a tensor mean and/or std draws one
    sample per element of their broadcast (whose names unify, rule 2; the dtype is theirs), and
    ``normal(mean, std, size)`` with numbers draws a new tensor of ``size`` (float32 unless ``dtype=``,
    unnamed unless ``names=``, or named by a dict size)."""
    tensors = [t for t in (mean, std) if isinstance(t, Tensor)]
    if not tensors:
        if size is None:
            raise TypeError("normal: give size= when mean and std are numbers (or give a tensor mean or std).")
        mean, std = _fill_value(mean, "normal"), _fill_value(std, "normal")
        if std < 0:
            raise ValueError(f"normal: std must be >= 0, got {std}.")
        shape, names = _shape_and_names((size,), names, "normal")
        B = _backend(device)
        dt = _float_only(_dtypes.as_dtype(dtype) if dtype is not None else _dtypes.default_float, "normal")
        data = _allocated("normal", shape, dt, lambda: B.randn(shape, dt) * std + mean)
        return _finish(B.astype(data, B.native(dt)), names, B, requires_grad, "normal")
    if size is not None or names is not None or dtype is not None or device is not None or requires_grad:
        raise TypeError("normal: size=, names=, dtype=, device= and requires_grad= go with number mean and std; "
                        "with a tensor mean or std the result takes their shape, names, dtype and device.")
    like = tensors[0]
    mean, std = operand(mean, like, "normal"), operand(std, like, "normal")
    for what, v in (("mean", mean), ("std", std)):
        if not isinstance(v, Tensor):
            _fill_value(v, "normal")
        elif v.dtype.kind != "f":
            raise TypeError(f"normal: {what} must be floating point, got {v.dtype!r}.")
    if isinstance(std, Tensor):
        B = std._B
        if has_values(B) and B.item(B.any(B.less(std._data, 0))):
            raise ValueError("normal: std must be >= 0; the tensor holds a negative value.")
    elif std < 0:
        raise ValueError(f"normal: std must be >= 0, got {std}.")
    sa, sb = (tuple(v.shape) if isinstance(v, Tensor) else () for v in (mean, std))
    out_names = _names.unify(*(v._names if isinstance(v, Tensor) else () for v in (mean, std)), "normal")
    n = max(len(sa), len(sb))
    pa, pb = (1,) * (n - len(sa)) + sa, (1,) * (n - len(sb)) + sb
    if any(x != y and x != 1 and y != 1 for x, y in zip(pa, pb)):
        raise ValueError(f"normal: the shapes of mean {sa} and std {sb} do not broadcast.")
    shape = tuple(y if x == 1 else x for x, y in zip(pa, pb))
    dt = max((t.dtype for t in tensors), key=lambda d: d.itemsize)
    return apply(_Normal, (mean, std), out_names, shape=shape, dtype=dt)


def _new(name: str, make) -> Callable[..., Tensor]:
    def fn(t: Tensor, *size, names: Optional[Sequence] = None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
        tensor_arg(t, name)
        shape, names = _shape_and_names(size, names, name)
        B = t._B if device is None else _backend(device)
        dt = t.dtype if dtype is None else _dtypes.as_dtype(dtype)
        return _finish(_allocated(name, shape, dt, lambda: make(B, shape, dt)), names, B, requires_grad, name)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (f"Like :func:`{name[4:]}` (sizes as ``t.{name}(2, 3)`` or ``t.{name}((2, 3))``), with the dtype "
                  "and device of ``t``; unnamed unless ``names=`` (or a dict size).")
    return fn


new_zeros = _new("new_zeros", lambda B, shape, dt: B.zeros(shape, dtype=B.native(dt)))
new_ones = _new("new_ones", lambda B, shape, dt: B.ones(shape, dtype=B.native(dt)))
new_empty = _new("new_empty", lambda B, shape, dt: B.empty(shape, dtype=B.native(dt)))


def new_full(t: Tensor, size, fill_value, *, names: Optional[Sequence] = None, dtype=None, device=None,
             requires_grad: bool = False) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``, with the dtype and device of ``t`` (``Tensor.new_full``);
    unnamed unless ``names=``."""
    tensor_arg(t, "new_full")
    shape, names = _shape_and_names((size,), names, "new_full")
    B = t._B if device is None else _backend(device)
    dt = t.dtype if dtype is None else _dtypes.as_dtype(dtype)
    fill_value = _fill_value(fill_value, "new_full")
    data = _allocated("new_full", shape, dt, lambda: B.full(shape, fill_value, dtype=B.native(dt)))
    return _finish(data, names, B, requires_grad, "new_full")


def new_tensor(t: Tensor, data, *, names: Optional[Sequence] = None, dtype=None, device=None,
               requires_grad: bool = False) -> Tensor:
    """A copy of ``data`` in the dtype and on the device of ``t`` (``Tensor.new_tensor``); unnamed unless
    ``names=``, except that a Tensor ``data`` keeps its names."""
    tensor_arg(t, "new_tensor")
    return _tensor(data, names, t.dtype if dtype is None else dtype, t.device if device is None else device,
                   requires_grad, "new_tensor")


def manual_seed(n: int) -> None:
    """Seed the random factories of every backend in use, for reproducible results."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"manual_seed: the seed must be an int, got {type(n).__name__}.")
    backends.cpu()  # made first, so that it is among the backends seeded
    for b in backends.made():
        b.seed(n)


METHODS = {
    "zeros_like": zeros_like, "ones_like": ones_like, "full_like": full_like,
    "new_zeros": new_zeros, "new_ones": new_ones, "new_empty": new_empty, "new_full": new_full,
    "new_tensor": new_tensor, "bernoulli": bernoulli, "multinomial": multinomial,
}
