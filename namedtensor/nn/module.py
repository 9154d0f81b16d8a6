"""``Module``: the base of every layer and model, with named parameters.

A module registers what is assigned to it: ``self.w = Parameter(...)`` becomes a
parameter, ``self.fc = Linear(...)`` a sub-module, ``self.register_buffer("mask",
t)`` a buffer (state that is saved but not learned).  Traversals visit them in
registration order, depth first: ``named_parameters()`` yields ``("fc.weight",
p)``, ``state_dict()`` maps such dotted keys to tensors that keep their names.

``load_state_dict`` matches tensors by key and then checks, for each, that the
names, the sizes and the dtype fit the model's tensor.  It checks everything
first and reports every problem in one :class:`StateDictError`; only when
nothing is wrong does it copy the values in place (so optimizers holding the
parameters keep working).

A compiled module (``self.block = nt.compile(Block())``, a :class:`Compiled`) registers as a
sub-module too: calls go through the compiled one, and traversals reach the module it compiled, so
its parameters, buffers, flags and ``state_dict`` keys are the parent's as if it were not compiled.
"""

from __future__ import annotations

import difflib
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Set, Tuple, Union

from .. import _dtypes, _names, backends
from .._internal import FUNCTION_TYPES, PLAIN_TYPES, backend_of, is_plain_value, parse_to_arg, replace_array, wrap
from ..autograd.engine import zero_grads
from ..autograd.graph import no_grad
from ..tensor import Tensor
from .parameter import Parameter


class StateDictError(ValueError):
    """``load_state_dict`` found problems; ``problems`` lists them, one line each (the message has all)."""

    def __init__(self, message: str, problems: List[str], missing: List[str], unexpected: List[str]) -> None:
        super().__init__(message)
        self.problems = problems
        self.missing_keys = missing
        self.unexpected_keys = unexpected


class IncompatibleKeys(NamedTuple):
    """What ``load_state_dict(strict=False)`` skipped: keys only in the model, keys only in the state dict."""

    missing_keys: List[str]
    unexpected_keys: List[str]


class Compiled:
    """The base of what ``nt.compile`` returns (``compiler.api.CompiledFunction``): ``_fn`` is what it
    compiled, a function or a :class:`Module`."""

    _fn: Any


def compiled_target(v: Any) -> Any:
    """What ``nt.compile`` compiled, for a compiled function or module (a registered compiled sub-module
    stands for its module, and a compiled one called from another is guarded as its module); anything
    else as it is."""
    return v._fn if isinstance(v, Compiled) else v


def registers_as_module(value: Any) -> bool:
    """A module, or a compiled module: what registers as a sub-module."""
    return isinstance(value, Module) or (isinstance(value, Compiled) and isinstance(value._fn, Module))


class Module:
    """Base class of layers and models: subclass it, assign parameters and sub-modules in
    ``__init__`` (after ``super().__init__()``), and write ``forward``.  Call the module to run it."""

    training: bool
    _parameters: Dict[str, Optional[Parameter]]
    _buffers: Dict[str, Optional[Tensor]]
    _non_persistent: Set[str]
    _modules: Dict[str, Optional["Module"]]

    def __init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", {})
        set_(self, "_buffers", {})
        set_(self, "_non_persistent", set())
        set_(self, "_modules", {})

    # ------------------------------------------------------------------ running
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The computation; every subclass defines it."""
        raise NotImplementedError(f"{type(self).__name__} has no forward(); define forward(self, ...) in the class.")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    # ------------------------------------------------------------------ registration
    def _check_init(self, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {what} before Module.__init__() ran: call super().__init__() first in "
                f"{type(self).__name__}.__init__."
            )

    def _check_key(self, name: str, kind: str, allow_existing: bool = False) -> None:
        if not isinstance(name, str):
            raise TypeError(f"{kind} name must be a str, got {type(name).__name__}.")
        if not name or "." in name:
            raise KeyError(f"{kind} name {name!r} must be non-empty and contain no '.' (dots join nested keys).")
        if not allow_existing and hasattr(self, name) and not self._holds(name):
            raise KeyError(f"cannot register {kind} {name!r}: {type(self).__name__} already has an attribute of "
                           "that name.")

    def _holds(self, name: str) -> bool:
        return name in self._parameters or name in self._buffers or name in self._modules

    def _forget(self, name: str, keep: Optional[dict] = None) -> None:
        """Drop ``name`` from wherever it is registered, except from ``keep`` (the store about to get it:
        replacing an entry there keeps its place in the order)."""
        self.__dict__.pop(name, None)
        for store in (self._parameters, self._buffers, self._modules):
            if store is not keep:
                store.pop(name, None)
        self._non_persistent.discard(name)

    def register_parameter(self, name: str, param: Optional[Parameter]) -> None:
        """Register ``param`` (a :class:`Parameter`, or None for an absent one) as ``name``."""
        self._check_init("parameters")
        self._check_key(name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot register a {type(param).__name__} as parameter {name!r}: wrap it in "
                            "nn.Parameter(...) (or use register_buffer for state that is not learned).")
        self._forget(name, self._parameters)
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Optional[Tensor], persistent: bool = True) -> None:
        """Register a tensor that is state but not learned (a mask, running statistics) as ``name``.

        Persistent buffers are part of ``state_dict()``; others only follow ``to()``.
        """
        self._check_init("buffers")
        self._check_key(name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot register a {type(tensor).__name__} as buffer {name!r}: a Tensor or None is "
                            "expected.")
        self._forget(name, self._buffers)
        self._buffers[name] = tensor
        if not persistent:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Optional["Module"]) -> None:
        """Register ``module`` (or None) as the sub-module ``name``."""
        self._check_init("sub-modules")
        self._check_key(name, "module")
        if module is not None and not registers_as_module(module):
            raise TypeError(f"cannot register a {type(module).__name__} as sub-module {name!r}: a Module is "
                            "expected.")
        self._forget(name, self._modules)
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params = d.get("_parameters")
        module = registers_as_module(value)
        if (module or isinstance(value, Parameter)) and params is not None:
            d.pop(name, None)  # a plain attribute of that name is replaced, as PyTorch does
        if isinstance(value, Parameter):
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to parameter {name!r} of "
                                f"{type(self).__name__}: a Parameter or None is expected.")
            params[name] = None
        elif module:
            self.add_module(name, value)
        elif params is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign a {type(value).__name__} to sub-module {name!r} of "
                                f"{type(self).__name__}: a Module or None is expected.")
            d["_modules"][name] = None
        elif params is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} to buffer {name!r} of "
                                f"{type(self).__name__}: a Tensor or None is expected.")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        # only called when normal lookup fails: the registered things live in these dicts
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            found = d.get(store)
            if found is not None and name in found:
                return found[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        if self._holds(name):
            self._forget(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    # ------------------------------------------------------------------ traversal
    def named_modules(self, memo: Optional[Set[int]] = None, prefix: str = "",
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, "Module"]]:
        """``(dotted name, module)`` for this module (name ``""``) and every sub-module, depth first.
        A module reachable twice is yielded once unless ``remove_duplicate=False``."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from compiled_target(m).named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                                            remove_duplicate)

    def modules(self) -> Iterator["Module"]:
        """This module and every sub-module, depth first."""
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[Tuple[str, "Module"]]:
        """``(name, module)`` for the direct sub-modules."""
        seen: Set[int] = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self) -> Iterator["Module"]:
        """The direct sub-modules."""
        for _, m in self.named_children():
            yield m

    def _named_members(self, store: str, prefix: str, recurse: bool,
                       remove_duplicate: bool = True) -> Iterator[Tuple[str, Tensor]]:
        seen: Set[int] = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, t in getattr(m, store).items():
                if t is None:
                    continue
                if remove_duplicate:
                    if id(t) in seen:
                        continue
                    seen.add(id(t))
                yield (f"{mod_prefix}.{name}" if mod_prefix else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True) -> Iterator[Tuple[str, Parameter]]:
        """``(dotted name, parameter)``, in registration order, depth first; a shared parameter once."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """The parameters (each once), e.g. for an optimizer: ``nt.optim.SGD(model.parameters(), lr=0.1)``."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True) -> Iterator[Tuple[str, Tensor]]:
        """``(dotted name, buffer)``, in registration order, depth first."""
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        """The buffers (each once)."""
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ------------------------------------------------------------------ modes and grads
    def train(self, mode: bool = True) -> "Module":
        """Set training mode (``mode=True``) or evaluation mode on this module and all sub-modules."""
        if not isinstance(mode, bool):
            raise TypeError(f"train: mode must be a bool, got {type(mode).__name__}.")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self) -> "Module":
        """Evaluation mode (dropout off): ``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> "Module":
        """Make every parameter require grad (or stop, to freeze the module)."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the parameters' gradients: drop them (default) or set them to zeros."""
        zero_grads(self.parameters(), set_to_none)

    def apply(self, fn: Callable[["Module"], Any]) -> "Module":
        """Call ``fn`` on every sub-module (depth first, children before parents), then on this one."""
        for m in self.children():
            compiled_target(m).apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ devices and dtypes
    def to(self, *args: Any, device: Any = None, dtype: Any = None) -> "Module":
        """Move to a device and/or cast the floating parameters and buffers: ``to("cuda")``,
        ``to(nt.float64)``, ``to("cpu", nt.float16)``.  Parameters, buffers and their grads move in place:
        they stay the same objects (optimizers keep them, and move their state along); returns self."""
        for a in args:
            dev, dt = parse_to_arg(a, "Module.to")
            if dev is not None:
                device = dev
            if dt is not None:
                dtype = dt
        B = None if device is None else backends.get(device)  # the core's error for devices not available
        if dtype is not None:
            dtype = _dtypes.as_dtype(dtype)
            if dtype.kind != "f":
                raise TypeError(f"Module.to: only floating dtypes can be given, got {dtype!r}.")
        tensors = [t for _, t in self._all_tensors()]
        if dtype is not None and B is not None:  # narrowing casts first: fewer bytes to move
            for t in tensors:
                if dtype.itemsize < t.dtype.itemsize:
                    _cast_inplace(t, dtype)
        if B is not None and any(t.device != B.device for t in tensors):
            for t in tensors:
                _move_inplace(t, B)
        if dtype is not None:
            for t in tensors:
                _cast_inplace(t, dtype)
        return self

    def _all_tensors(self) -> Iterator[Tuple[str, Tensor]]:
        yield from self.named_parameters()
        yield from self.named_buffers()

    def cpu(self) -> "Module":
        """``to("cpu")``."""
        return self.to("cpu")

    def cuda(self, device: Union[int, str, None] = None) -> "Module":
        """``to("cuda")`` (``"cuda:N"`` for ``device=N``)."""
        return self.to("cuda" if device is None else f"cuda:{device}" if isinstance(device, int) else device)

    def float(self) -> "Module":
        """Cast floating parameters and buffers to float32."""
        return self.to(dtype=_dtypes.float32)

    def double(self) -> "Module":
        """Cast floating parameters and buffers to float64."""
        return self.to(dtype=_dtypes.float64)

    def half(self) -> "Module":
        """Cast floating parameters and buffers to float16."""
        return self.to(dtype=_dtypes.float16)

    # ------------------------------------------------------------------ state
    def state_dict(self, destination: Optional[Dict[str, Tensor]] = None, prefix: str = "",
                   keep_vars: bool = False) -> "OrderedDict[str, Tensor]":
        """Every parameter and persistent buffer by dotted key (``"encoder.fc.weight"``), names kept.

        Values are detached views (``keep_vars=True``: the tensors themselves); save them with
        ``nt.save(model.state_dict(), path)``.
        """
        out = OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                compiled_target(m).state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        rename: Union[Mapping[str, str], Callable[[str], str], None] = None
                        ) -> IncompatibleKeys:
        """Copy ``state_dict``'s tensors into this module's parameters and buffers, in place.

        Keys are matched after ``rename`` (a dict ``{old_key: new_key}``, or a function of the key)
        is applied to ``state_dict``'s keys.  Each matched tensor must have the model tensor's names
        (a tensor with no names at all, as other tools write, is taken by position), its sizes,
        and a dtype that casts to the model's (bool -> int -> float).  Every problem is reported in
        one :class:`StateDictError` and nothing is copied; with ``strict=False`` missing and
        unexpected keys are allowed (not name, size or dtype mismatches).

        Returns ``(missing_keys, unexpected_keys)`` (an :class:`IncompatibleKeys`).
        """
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"load_state_dict: expected a dict of tensors, got {type(state_dict).__name__}.")
        problems: List[str] = []
        incoming = _renamed(state_dict, rename, problems, strict)
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in incoming]
        unexpected = [k for k in incoming if k not in own]
        pairs = []
        for key, target in own.items():
            if key in incoming:
                value = incoming[key]
                issues = _mismatches(key, value, target)
                problems.extend(issues)
                if not issues:
                    pairs.append((target, value))
        if strict:
            if missing:
                problems.append("missing keys (in the model, not in the state dict): "
                                + ", ".join(_with_hint(k, unexpected) for k in missing))
            if unexpected:
                problems.append("unexpected keys (in the state dict, not in the model): "
                                + ", ".join(_with_hint(k, missing) for k in unexpected))
        if problems:
            n = len(problems)
            hint = ("Nothing was loaded. Map keys with rename={old_key: new_key} (or a function), give "
                    "names with refine_names/rename, or pass strict=False to allow missing and unexpected keys.")
            message = (f"load_state_dict into {type(self).__name__}: {n} problem{'s' if n > 1 else ''}:\n  "
                       + "\n  ".join(problems) + "\n" + hint)
            raise StateDictError(message, problems, missing, unexpected)
        with no_grad():
            for target, value in pairs:
                B = backend_of(target)
                if backend_of(value) is not B:  # a state dict made under another CPU backend
                    value = wrap(B.asarray(backend_of(value).to_numpy(value.array)), value.names, B)
                target.copy_(value)
        return IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ repr
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (its dims and sizes); layers override it."""
        return ""

    def __repr__(self) -> str:
        lines = []
        extra = self.extra_repr()
        if extra:
            lines.extend(extra.split("\n"))
        for name, m in self._modules.items():
            sub = repr(m).replace("\n", "\n  ")
            lines.append(f"({name}): {sub}")
        head = type(self).__name__
        if not self._modules:
            return f"{head}({extra})"
        return head + "(\n  " + "\n  ".join(lines) + "\n)"


def state_key(root: Module) -> Tuple[Tuple[bool, ...], Tuple[int, ...], Tuple[int, ...], Tuple[tuple, ...]]:
    """The training flag of ``root`` and of every sub-module, the ids of its parameters and buffers
    (each once), and each module's class and settings (its attributes that are numbers, strings, None,
    dtypes or tuples of them: ``eps``, ``p``, dim names; ``Tanh`` put where ``Sigmoid`` was has none; and
    functions, by identity: ``model.forward = f``), in one walk, depth first: what ``nt.compile`` checks at every call
    of a compiled module, whose graph specialised them.  (``modules()``, ``parameters()`` and
    ``buffers()`` would walk the tree three times, building dotted names: 280 µs a call for 158
    modules.)"""
    flags: List[bool] = []
    params: List[int] = []
    buffers: List[int] = []
    settings: List[tuple] = []
    seen: Set[int] = set()
    stack = [root]
    while stack:
        m = stack.pop()
        if isinstance(m, Compiled):  # inline: this walk runs at every call of a compiled module
            m = m._fn
        if id(m) in seen:
            continue
        seen.add(id(m))
        flags.append(m.training)
        # the class test inline (most attributes are the module's dicts, or numbers): a call per attribute
        # doubled the walk's time
        settings.append((m.__class__, tuple([(k, v) for k, v in m.__dict__.items() if v.__class__ in PLAIN_TYPES
                                             or v.__class__ in FUNCTION_TYPES
                                             or (v.__class__ is tuple and is_plain_value(v))])))
        for store, ids in ((m._parameters, params), (m._buffers, buffers)):
            for t in store.values():
                if t is not None and id(t) not in seen:
                    seen.add(id(t))
                    ids.append(id(t))
        stack.extend(c for c in reversed(m._modules.values()) if c is not None)
    return tuple(flags), tuple(params), tuple(buffers), tuple(settings)


def _cast_inplace(t: Tensor, dtype: _dtypes.DType) -> None:
    """Give floating tensor ``t`` (and its grad) ``dtype`` in place: the object stays, its array changes."""
    if t.dtype.kind != "f" or t.dtype is dtype:
        return
    B = backend_of(t)
    replace_array(t, B.astype(t.array, B.native(dtype)))
    g = t.grad
    if g is not None:
        t.grad = g.detach().to(dtype)


def _move_inplace(t: Tensor, B) -> None:
    """Put tensor ``t`` (and its grad) on backend ``B``'s device in place: the object stays, its array moves."""
    if t.device == B.device:
        return
    replace_array(t, backends.transfer(t.array, backend_of(t), B), B)
    g = t.grad
    if g is not None:
        t.grad = wrap(backends.transfer(g.array, backend_of(g), B), g.names, B)


def _renamed(state_dict: Mapping[str, Any], rename, problems: List[str], strict: bool) -> Dict[str, Any]:
    """``state_dict`` with its keys mapped by ``rename``; unusable renames are added to ``problems``
    (with ``strict``, a rename of a key the state dict lacks is one: likely a typo)."""
    if rename is None:
        return dict(state_dict)
    if isinstance(rename, Mapping):
        unused = [k for k in rename if k not in state_dict]
        if unused and strict:
            problems.append("rename: keys not in the state dict: " + ", ".join(_with_hint(k, list(state_dict))
                                                                               for k in unused))

        def fn(k):
            return rename.get(k, k)
    elif callable(rename):
        fn = rename
    else:
        raise TypeError(f"load_state_dict: rename must be a dict or a function, got {type(rename).__name__}.")
    out: Dict[str, Any] = {}
    sources: Dict[str, str] = {}
    for k, v in state_dict.items():
        new = fn(k)
        if not isinstance(new, str):
            raise TypeError(f"load_state_dict: rename gave {new!r} for key {k!r}; keys must be str.")
        if new in out:
            problems.append(f"rename: keys {sources[new]!r} and {k!r} both become {new!r}")
            continue
        out[new] = v
        sources[new] = k
    return out


def _mismatches(key: str, value: Any, target: Tensor) -> List[str]:
    """What keeps ``value`` from being copied into ``target`` (one line per problem)."""
    if not isinstance(value, Tensor):
        return [f"{key!r}: expected a Tensor, got {type(value).__name__}"]
    out = []
    names_ok = value.names == target.names or not _names.is_named(value.names)
    if not names_ok:
        out.append(f"{key!r}: names differ: state dict {_names.fmt(value.names)} vs model "
                   f"{_names.fmt(target.names)}")
    if value.shape != target.shape:
        out.append(f"{key!r}: sizes differ: state dict {_sizes(value)} vs model {_sizes(target)}")
    src, dst = value.dtype, target.dtype
    if _KIND_ORDER[src.kind] > _KIND_ORDER[dst.kind]:
        out.append(f"{key!r}: dtype {src!r} in the state dict cannot be cast to the model's {dst!r}")
    return out


_KIND_ORDER = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def _sizes(t: Tensor) -> str:
    """Sizes with their names (``{'hidden': 4, 'embed': 8}``), or the shape of an unnamed tensor."""
    if not _names.is_named(t.names):
        return str(t.shape)
    return "{" + ", ".join(f"{n!r}: {s}" if n is not None else f"{i}: {s}"
                           for i, (n, s) in enumerate(zip(t.names, t.shape))) + "}"


def _with_hint(key: str, candidates: List[str]) -> str:
    """``'key'``, plus the closest candidate (a likely rename) when one is close."""
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=0.6)
    return f"{key!r} (did you mean {close[0]!r}?)" if close else repr(key)
