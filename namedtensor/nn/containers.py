"""Containers of modules: ``Sequential`` (runs its modules in order), ``ModuleList`` and ``ModuleDict``.

They register what they hold as sub-modules, so parameters, ``state_dict`` keys
(``"layers.0.weight"``), ``train``/``eval`` and ``repr`` reach inside them.
Names flow through a ``Sequential`` as through the layers it chains: each
layer's docstring says which dims it reads and writes.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable, Iterator, Mapping, Optional, Tuple, Union

from .module import Module, registers_as_module


def _index(i: Any, n: int, what: str) -> int:
    """``i`` as a position in ``[0, n)`` (negative counts from the end), or an IndexError."""
    if isinstance(i, bool) or not hasattr(i, "__index__"):
        raise TypeError(f"{what} indices must be ints or slices, got {type(i).__name__}.")
    i = int(i.__index__())
    if not -n <= i < n:
        raise IndexError(f"{what} index {i} is out of range for {n} modules.")
    return i % n


class _Positional(Module):
    """What ``Sequential`` and ``ModuleList`` share: modules addressed by position."""

    def __delitem__(self, i: Union[int, slice]) -> None:
        keys = list(self._modules)
        doomed = keys[i] if isinstance(i, slice) else [keys[_index(i, len(self), type(self).__name__)]]
        for k in doomed:
            del self._modules[k]
        _renumber(self)

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Any:
        """Add ``module`` at the end; returns self."""
        self.add_module(str(len(self)), module)
        return self

    def insert(self, index: int, module: Module) -> Any:
        """Put ``module`` before position ``index``; returns self."""
        _insert(self, index, module, type(self).__name__)
        return self


class Sequential(_Positional):
    """Modules run one after the other: ``Sequential(Linear(...), GELU(), Linear(...))``, or from an
    ``OrderedDict`` of named modules.  Reads what its first module reads, writes what its last writes."""

    def __init__(self, *modules: Any) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x: Any) -> Any:
        """Feed ``x`` through every module in order."""
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i: Union[int, slice]) -> Module:
        if isinstance(i, slice):
            return Sequential(OrderedDict(list(self._modules.items())[i]))
        return list(self._modules.values())[_index(i, len(self), "Sequential")]

    def __setitem__(self, i: int, module: Module) -> None:
        key = list(self._modules)[_index(i, len(self), "Sequential")]
        self.add_module(key, module)

    def extend(self, modules: Iterable[Module]) -> "Sequential":
        """Add each of ``modules`` at the end; returns self."""
        for m in modules:
            self.append(m)
        return self


def _renumber(container: Module) -> None:
    """After a deletion or insertion, keys that were positions ("0", "1"...) become positions again."""
    items = list(container._modules.items())
    if all(k.isdigit() for k, _ in items):
        container._modules.clear()
        for i, (_, m) in enumerate(items):
            container._modules[str(i)] = m


def _insert(container: Module, index: int, module: Module, what: str) -> None:
    n = len(container._modules)
    if isinstance(index, bool) or not hasattr(index, "__index__"):
        raise TypeError(f"{what}.insert: the index must be an int, got {type(index).__name__}.")
    index = int(index.__index__())
    index = max(0, min(n, index + n if index < 0 else index))
    if not registers_as_module(module):
        raise TypeError(f"{what}.insert: expected a Module, got {type(module).__name__}.")
    mods = list(container._modules.values())
    mods.insert(index, module)
    container._modules.clear()
    for i, m in enumerate(mods):
        container._modules[str(i)] = m


class ModuleList(_Positional):
    """A list of modules (registered, unlike a plain list): ``self.blocks = ModuleList([...])``.
    It has no ``forward``; iterate over it in yours."""

    def __init__(self, modules: Optional[Iterable[Module]] = None) -> None:
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, i: Union[int, slice]) -> Union[Module, "ModuleList"]:
        if isinstance(i, slice):
            return ModuleList(list(self._modules.values())[i])
        return self._modules[str(_index(i, len(self), "ModuleList"))]

    def __setitem__(self, i: int, module: Module) -> None:
        self.add_module(str(_index(i, len(self), "ModuleList")), module)

    def __iadd__(self, modules: Iterable[Module]) -> "ModuleList":
        return self.extend(modules)

    def extend(self, modules: Iterable[Module]) -> "ModuleList":
        """Add each of ``modules`` at the end; returns self."""
        if isinstance(modules, Module) and not isinstance(modules, (ModuleList, Sequential)):
            raise TypeError("ModuleList.extend: expected an iterable of modules, got a single Module; use append.")
        for m in modules:
            self.append(m)
        return self

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleList has no forward(): iterate over it (for m in self.layers: x = m(x)).")


class ModuleDict(Module):
    """A dict of modules by name (registered, unlike a plain dict); keeps insertion order."""

    def __init__(self, modules: Union[Mapping[str, Module], Iterable[Tuple[str, Module]], None] = None) -> None:
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key: str) -> Module:
        try:
            return self._modules[key]
        except KeyError:
            raise KeyError(f"ModuleDict has no module {key!r}; it has {list(self._modules)}.") from None

    def __setitem__(self, key: str, module: Module) -> None:
        self.add_module(key, module)

    def __delitem__(self, key: str) -> None:
        del self._modules[key]

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[str]:
        return iter(self._modules)

    def __contains__(self, key: object) -> bool:
        return key in self._modules

    def keys(self):
        """The names, in insertion order."""
        return self._modules.keys()

    def items(self):
        """``(name, module)`` pairs, in insertion order."""
        return self._modules.items()

    def values(self):
        """The modules, in insertion order."""
        return self._modules.values()

    def update(self, modules: Union[Mapping[str, Module], Iterable[Tuple[str, Module]]]) -> None:
        """Add or replace modules from a mapping or from ``(name, module)`` pairs."""
        pairs = modules.items() if isinstance(modules, Mapping) else modules
        for pair in pairs:
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError(f"ModuleDict.update: expected (name, module) pairs, got {pair!r}.")
            self[pair[0]] = pair[1]

    def pop(self, key: str) -> Module:
        """Remove the module ``key`` and return it."""
        m = self[key]
        del self._modules[key]
        return m

    def clear(self) -> None:
        """Remove every module."""
        self._modules.clear()

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ModuleDict has no forward(): pick a module by name (self.heads['a'](x)).")
