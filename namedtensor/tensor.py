"""The ``Tensor`` class: an array, a name per dim, and a place in the autograd graph.

A tensor holds a raw backend array (``t.array``), a tuple of names (``str`` or
``None``, one per dim), its backend, and autograd state.  It is kept small
(``__slots__``) because one is made per op.  Math, shape and indexing methods
are the functions of :mod:`namedtensor.ops`, attached here by
:func:`install_methods`; each is defined (forward, backward, and a call of
its name rule in :mod:`namedtensor._names`) in its op module.  ``backward`` and ``register_post_accumulate_grad_hook`` are
the engine's, installed the same way by :mod:`namedtensor.autograd`: this
module sits below the ops and the engine and imports neither.
"""

from __future__ import annotations

import math
import weakref
from typing import Any, Callable, Dict, Iterator, Optional, Tuple

from . import _dtypes, _names, backends
from ._tensor_methods import TensorMethods
from .autograd import mode


class Size(int):
    """``t.size``: the element count (an ``int``, the Array API standard's attribute) that, called, is
    PyTorch's method: ``t.size()`` is the shape, ``t.size(dim)`` one dim's size (by name or position)."""

    def __new__(cls, count: int, tensor: "Tensor") -> "Size":
        self = super().__new__(cls, count)
        self._tensor = tensor
        return self

    def __call__(self, dim=None):
        t = self._tensor
        if dim is None:
            return t.shape
        return t._data.shape[_names.axis(t._names, dim, "size")]


class Tensor(TensorMethods):
    """A tensor with a name (or ``None``) for every dim.  Create with :func:`namedtensor.tensor`."""

    #: ``_view``, set on a view only: ``(base, op, params)``, how to compute it again from its base
    __slots__ = ("_data", "_names", "_B", "_node", "_idx", "_rg", "_vc", "_view", "_grad", "_hooks",
                 "_post_hooks", "__weakref__")
    # __array_ufunc__ and __array_function__ (NumPy's functions on tensors) are in numpy_protocols.py
    #: the Array API namespace, set by namedtensor.array_api when it is imported (it sits above this module)
    _array_api: Any = None

    def __array_namespace__(self, api_version: Optional[str] = None) -> Any:
        """The Array API standard's namespace for tensors, :mod:`namedtensor.array_api` (2024.12;
        ``api_version="2023.12"`` is accepted too, the functions being a superset)."""
        if api_version not in (None, "2024.12", "2023.12"):
            raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported; "
                             "namedtensor.array_api implements '2024.12' (and accepts '2023.12').")
        return Tensor._array_api

    @staticmethod
    def _make(data, names, B) -> "Tensor":
        """A tensor around ``data`` with ``names`` (already validated): the per-op constructor."""
        t = _new(Tensor)
        t._data = data
        t._names = names
        t._B = B
        t._node = None
        t._rg = False
        return t

    # ------------------------------------------------------------------ metadata
    @property
    def names(self) -> Tuple[Optional[str], ...]:
        """One entry per dim: its name, or ``None``.  ``t.names = names`` is ``t.rename_(*names)``
        (``t.names = None`` drops them all), as in PyTorch's named tensors."""
        return self._names

    @names.setter
    def names(self, value) -> None:
        if value is None:
            self.rename_(None)
            return
        if isinstance(value, str) or not hasattr(value, "__iter__"):
            _names.validate(value, self.ndim, "names")  # raises: a str or a non-sequence is no list of names
        self.rename_(*value)

    @property
    def sizes(self) -> Dict[str, int]:
        """``{name: size}`` for the named dims, in order."""
        return {n: s for n, s in zip(self._names, self._data.shape) if n is not None}

    @property
    def shape(self) -> Tuple[int, ...]:
        """The sizes, a plain tuple of ints (``sizes`` gives them by name)."""
        return tuple(self._data.shape)

    @property
    def ndim(self) -> int:
        """The number of dims."""
        return len(self._names)

    def dim(self) -> int:
        """The number of dims (PyTorch's spelling of ``ndim``)."""
        return len(self._names)

    @property
    def size(self) -> "Size":
        """Both meanings of ``size``: PyTorch's method, ``t.size()`` (the shape) and ``t.size(dim)`` (the
        size of one dim, by name or position), and the Array API standard's attribute, ``t.size`` (the
        number of elements, an int)."""
        return Size(math.prod(self._data.shape), self)

    def numel(self) -> int:
        """The number of elements."""
        return math.prod(self._data.shape)

    @property
    def dtype(self) -> _dtypes.DType:
        """The element type (``nt.float32``...)."""
        return self._B.dtype_of(self._data)

    @property
    def device(self) -> str:
        """``"cpu"``, ``"cuda:N"`` for GPU tensors, or ``"meta"`` for shape-only tensors (``nt.spec``)."""
        return self._B.device

    @property
    def is_cuda(self) -> bool:
        """Whether the tensor is on a CUDA device."""
        return self._B.device.startswith("cuda")

    @property
    def is_named(self) -> bool:
        """True when any dim has a name."""
        return _names.is_named(self._names)

    @property
    def array(self):
        """The raw backend array, not a copy."""
        d = self._data
        if not self._B.is_array(d) or getattr(d, "ndim", 1) == 0:
            d = self._B.asarray(d)
            self._data = d
        return d

    def is_floating_point(self) -> bool:
        """Whether the dtype is a float (those and complex ones can require grad)."""
        return self.dtype.kind == "f"

    # ------------------------------------------------------------------ conversion
    def numpy(self):
        """The data as a NumPy array (no copy on the CPU).  Refused while it requires grad."""
        if self._rg and mode.is_grad_enabled():
            raise RuntimeError("numpy(): the tensor requires grad; call .detach().numpy() to leave the graph.")
        return self._B.to_numpy(self.array)

    def item(self):
        """The value of a one-element tensor, as a Python number."""
        if self.numel() != 1:
            raise ValueError(f"item(): only a tensor with one element can be converted, this one has shape {self.shape}.")
        return self._B.item(self._B.reshape(self.array, (1,)))

    def tolist(self):
        """The values as nested Python lists (a number for a 0-dim tensor)."""
        return self._B.tolist(self.array)

    def __len__(self) -> int:
        if not self._names:
            raise TypeError("len() of a 0-dim tensor.")
        return self._data.shape[0]

    def __iter__(self) -> Iterator["Tensor"]:
        if not self._names:
            raise TypeError("iteration over a 0-dim tensor.")
        return iter(self.unbind(0))

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous; use .any() or .all()."
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iub" or self.numel() != 1:
            raise TypeError("only a one-element integer tensor can be used as an index.")
        return int(self.item())

    def __array__(self, dtype=None, copy=None):
        a = self._B.to_numpy(self.array)
        if dtype is not None and a.dtype != dtype:
            if copy is False:
                raise ValueError(f"__array__: converting {self.dtype!r} to {dtype} needs a copy, but copy=False.")
            return a.astype(dtype)
        # NumPy trusts the copy flag: np.array(t) must not hand out the tensor's own buffer
        return a.copy() if copy else a

    def __format__(self, spec: str) -> str:
        # as PyTorch: a 0-dim tensor formats as its number (f"{loss:.4f}"); any other as str() when the
        # spec is empty, else Python's TypeError for an unsupported format string
        if not self._names:
            return format(self.item(), spec)
        return object.__format__(self, spec)

    def __repr__(self) -> str:
        from .backends.formatting import format_values

        # a meta tensor (nt.spec) has no values to show
        body = "..." if self.device == "meta" else format_values(self._B.to_numpy(self.array), indent=len("tensor("))
        parts = [f"tensor({body}"]
        parts.append(f"names={_names.fmt(self._names)}")
        parts.append(f"shape={self.shape}")
        parts.append(f"dtype={self.dtype!r}")
        if self.device != "cpu":
            parts.append(f"device={self.device!r}")
        if self._node is not None:
            parts.append(f"grad_fn={self._node.op.name}")
        elif self._rg:
            parts.append("requires_grad=True")
        return ", ".join(parts) + ")"

    __str__ = __repr__

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self):
        args = (self._B.to_numpy(self.array), self._names, self.dtype.name, self._rg)
        # a copy (copy.deepcopy, pickle) stays on the tensor's device
        return (_rebuild, args if self.device == "cpu" else args + (self.device,))

    # ------------------------------------------------------------------ autograd
    @property
    def requires_grad(self) -> bool:
        """Whether gradients flow to this tensor (set it on leaves; ops' outputs inherit it)."""
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, value: bool = True) -> "Tensor":
        """Make a leaf require grad (or stop); returns the tensor itself."""
        if self._node is not None:
            if not value:
                raise RuntimeError("requires_grad_(False) on a tensor computed from others; use .detach().")
            return self
        if value and self.dtype.kind not in _dtypes.DIFFERENTIABLE:
            raise TypeError(f"only floating-point and complex tensors can require grad, this one is {self.dtype!r}.")
        if bool(value) != self._rg and mode.state.current[1] is not None:
            mode.outside_ops("requires_grad_", "makes a leaf (or a parameter) start or stop requiring grad, which a "
                                               "graph would not do again at the next call (eagerly, a new leaf each "
                                               "call); do it outside the compiled function", self)
        self._rg = bool(value)
        return self

    @property
    def is_leaf(self) -> bool:
        """True unless the tensor is an op's output in the graph."""
        return self._node is None

    @property
    def grad_fn(self):
        """The graph node that computed this tensor, or None for a leaf."""
        return self._node

    @property
    def grad(self) -> Optional["Tensor"]:
        """The accumulated gradient; it has exactly this tensor's names."""
        if mode.state.current[1] is not None:
            mode.outside_ops(".grad", "reads a gradient, which every backward pass replaces with a new tensor (a "
                                      "graph would go on reading this one); pass gradients as arguments")
        try:
            return self._grad
        except AttributeError:
            return None

    @grad.setter
    def grad(self, value: Optional["Tensor"]) -> None:
        if mode.state.current[1] is not None:
            mode.outside_ops(".grad", "sets a gradient, which a graph would not set again at the next call")
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"grad must be a Tensor or None, got {type(value).__name__}.")
            if value.shape != self.shape:
                raise ValueError(f"grad has shape {value.shape}, the tensor {self.shape}.")
            if value._names != self._names:
                raise _names.grad_names_error("grad", "tensor", self._names, value._names)
            if value._B is not self._B and value.device != self.device:
                if value.device == "meta" and mode.current_tracer() is not None:
                    return  # a shape dry run reached a real leaf (a module's parameter): its .grad stays as it was
                raise ValueError(f"grad is on device {value.device!r} but the tensor on {self.device!r}; "
                                 "move it with .to(...) first.")
        self._grad = value

    def register_hook(self, hook: Callable[["Tensor"], Optional["Tensor"]]) -> Callable[[], None]:
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor replaces it.

        Returns a function that removes the hook.
        """
        if not self._rg:
            raise RuntimeError("register_hook: the tensor does not require grad, so it never gets a gradient.")
        if mode.state.current[1] is not None:
            mode.outside_ops("register_hook", "registers a gradient hook, which a graph would not register again at "
                                              "the next call; register it outside the compiled function")
        if self._node is None:
            hooks = self._hooks_list()
        else:
            node = self._node
            if node.hooks is None:
                node.hooks = {}
            hooks = node.hooks.setdefault(self._idx, [])
        hooks.append(hook)
        return lambda: hooks.remove(hook) if hook in hooks else None

    def _hooks_list(self) -> list:
        try:
            return self._hooks
        except AttributeError:
            self._hooks = []
            return self._hooks

    def retain_grad(self) -> None:
        """Keep ``.grad`` for a non-leaf tensor too."""
        if not self._rg:
            raise RuntimeError("retain_grad: the tensor does not require grad, so it never gets a gradient.")
        if self._node is None:
            return
        if mode.state.current[1] is not None:
            mode.outside_ops("retain_grad", "keeps a gradient with a hook, which a graph would not add again at the "
                                            "next call; call it on the compiled function's result, outside it")
        ref = weakref.ref(self)
        hooks = (self._node.hooks or {}).get(self._idx, ())
        if any(getattr(h, "_retains", None) is ref for h in hooks):
            return  # already retained: a second hook would count the gradient twice

        def keep(g):
            t = ref()
            if t is not None:
                t._grad = g if t.grad is None else t.grad + g

        keep._retains = ref
        self.register_hook(keep)

    def detach(self) -> "Tensor":
        """The same data and names, out of the graph (a view: in-place edits show in both)."""
        t = Tensor._make(self._data, self._names, self._B)
        t._vc = mode.version_counter(self)
        if mode.state.current[1] is not None:  # a tracer: nt.compile's is told (the call only then)
            mode.detached(self, t)
        return t

    @property
    def data(self) -> "Tensor":
        """PyTorch's ``.data``: the same data and names out of the graph, like :meth:`detach`, but with a
        version counter of its own, so in-place edits through it are hidden from autograd (a graph that
        saved this tensor still uses it, and sees the new values)."""
        t = Tensor._make(self._data, self._names, self._B)
        if mode.state.current[1] is not None:
            mode.detached(self, t)
        return t

    @data.setter
    def data(self, value: "Tensor") -> None:
        """``t.data = other``: ``t`` holds ``other``'s array from now on (no copy, no graph, no version
        bump); with as many dims as ``t``, the names unify (rule 2), else ``t`` takes ``other``'s."""
        if not isinstance(value, Tensor):
            raise TypeError(f"data: expected a Tensor, got {type(value).__name__}.")
        if value._B is not self._B:
            raise ValueError(f"data: the new data is on {value.device}, this tensor on {self.device}; move it first.")
        if self._rg and value.dtype.kind not in _dtypes.DIFFERENTIABLE:
            raise TypeError(f"data: a tensor that requires grad needs floating-point or complex data, got "
                            f"{value.dtype!r}.")
        same = len(value._names) == len(self._names)
        self._names = _names.unify(self._names, value._names, "data") if same else value._names
        self._data = value._data
        # the new array is no view of what this tensor viewed: edits must reach neither that base nor
        # its other views, so the view link goes and the version counter is this tensor's own
        try:
            del self._view
        except AttributeError:
            pass
        self._vc = [0]

    def detach_(self) -> "Tensor":
        """Take this tensor out of the graph in place (it becomes a leaf that does not require grad)."""
        self._node = None
        self._rg = False
        try:  # as detach(): edits of it no longer reach the tensor it viewed
            del self._view
        except AttributeError:
            pass
        return self

    def _check_inplace(self, op: str, *others) -> None:
        """In-place edits of tensors in a graph are refused: they would corrupt gradients."""
        if mode.state.current[0]:  # grad mode, read inline: every in-place op passes here
            if self._rg:
                raise RuntimeError(
                    f"{op}: in-place edit of a tensor that requires grad (names {_names.fmt(self._names)}). "
                    "Use the out-of-place op (x = x + y), or edit under nt.no_grad() (e.g. an optimizer step)."
                )
            for o in others:
                if isinstance(o, Tensor) and o._rg:
                    raise RuntimeError(
                        f"{op}: writing a tensor that requires grad into one that does not would lose its "
                        "gradient; use the out-of-place op instead."
                    )

    def _bump(self) -> None:
        mode.version_counter(self)[0] += 1

    @property
    def _version(self) -> int:
        return mode.version_counter(self)[0]


_new = object.__new__


def _rebuild(array, names, dtype, requires_grad, device=None):
    """The tensor that ``Tensor.__reduce__`` describes (pickle, ``copy.deepcopy``): its own copy of
    ``array``, on ``device``."""
    B = backends.get(device)
    t = Tensor._make(B.astype(B.asarray(array), B.native(_dtypes.as_dtype(dtype))), names, B)
    return t.requires_grad_(True) if requires_grad else t


def install_methods(table: Dict[str, Any]) -> None:
    """Attach op functions to ``Tensor`` as methods (``t.sum("seq")`` is ``ops.sum(t, "seq")``)."""
    for name, fn in table.items():
        setattr(Tensor, name, fn)
