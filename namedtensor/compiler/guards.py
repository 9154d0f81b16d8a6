"""What a compiled function reads from outside its arguments, and the guards that find it again at each call.

``reach(fn, module)`` follows the function (or the compiled module's ``forward``) into the user code
it may call, statically, as a tracer that reads bytecode would: the closure cells and the globals each
function names (``co_names``, nested code included), attributes named of the Python modules it
imports, the ``forward`` of every ``nn.Module`` found (the compiled one, one in a cell or a global, one
passed as an argument) and the methods and plain class attributes of the user classes met that the code
reached names.  Code of namedtensor, of the standard library and of installed packages is not
followed: its globals are its own constants.  The result, :class:`Outside`, is what the signature
reads at every call (``CompiledFunction._extra``: plain values, tensor and function identities,
modules' ``state_key``) and what a trace must not rebind.

``locate`` makes guards for the externals the signature does not hold by identity: tensors found in a
list, tuple, dict, object attribute or module attribute, within :data:`DEPTH` steps of a place, a
default of a function reached, a module read or an argument that is an object.  Each guard reads that
place again and holds while the same tensor, or a module in the same state, is there.

``settings`` finds the containers of plain values near the same roots (``CONFIG["scale"]``,
``args.causal``, ``self.cfg["p"]``): their values are read again at each call into the signature.
"""

from __future__ import annotations

import functools
import itertools
import sys
import types
from typing import Any, Callable, Dict, List, NamedTuple, Tuple

from .._internal import FUNCTION_TYPES, PLAIN_TYPES, is_plain_value
from ..nn import Module
from ..nn.module import compiled_target, state_key
from ..tensor import Tensor

__all__ = ["Outside", "reach", "locate", "settings", "contents", "read", "put"]

#: the most functions followed from the compiled one (a script's helpers, not a library)
MOST_FUNCTIONS = 256
#: how many steps (items, attributes) from a place ``locate`` looks for a tensor
DEPTH = 8
#: the most objects ``locate`` looks into, in all
MOST_OBJECTS = 10_000
#: the most items or attributes of one container or object that ``locate`` and ``settings`` look through
LOOK_AT = 64
#: how many steps from a place ``settings`` looks for containers of plain values
SETTINGS_DEPTH = 3
#: a module's stores of parameters, buffers and sub-modules, which its ``state_key`` holds
_MODULE_STORES = ("_parameters", "_buffers", "_modules")

_LIBRARY_TOPS = frozenset(sys.stdlib_module_names) | {"namedtensor", "builtins"}


class Outside(NamedTuple):
    """The places a compiled function reads from outside: closure cells, ``(dict, name)`` pairs of
    globals and Python modules' attributes, ``(class, name)`` pairs of the plain class attributes of
    user classes that the code names (``self.SCALE``), and the functions reached (whose defaults
    ``locate`` reads)."""

    cells: Tuple[Any, ...]
    scopes: Tuple[Tuple[Dict[str, Any], str], ...]
    functions: Tuple[types.FunctionType, ...]
    class_attributes: Tuple[Tuple[type, str], ...] = ()
    #: what each cell, scope and class attribute is, in that order, for messages (``f's closure variable n``)
    labels: Tuple[str, ...] = ()

    def values(self) -> List[Tuple[Any, Any, Any]]:
        """``(owner, key, value)`` for each place (``key`` None for a cell); a global deleted meanwhile is skipped."""
        return ([(c, None, contents(c)) for c in self.cells] + [(d, n, d[n]) for d, n in self.scopes if n in d]
                + [(k, n, vars(k)[n]) for k, n in self.class_attributes if n in vars(k)])

    def roots(self) -> List[Tuple[Any, Callable, str]]:
        """``(value, find, label)`` for each place, where ``find(leaves)`` reads it again: the first roots of
        :func:`locate`'s and :func:`settings`' walks."""
        places = [(c, None) for c in self.cells] + list(self.scopes) + list(self.class_attributes)
        found = [(read(owner, key), functools.partial(_place, owner, key), label)
                 for (owner, key), label in zip(places, self.labels)]
        return [root for root in found if root[0] is not read]


def _user_code(obj: Any) -> bool:
    """Whether ``obj`` (a function, class or Python module) is the user's: not namedtensor's, the standard
    library's or an installed package's."""
    is_module = isinstance(obj, types.ModuleType)
    name = obj.__name__ if is_module else getattr(obj, "__module__", None)
    if not isinstance(name, str) or name.partition(".")[0] in _LIBRARY_TOPS:
        return False
    # a notebook's or an interpreter's __main__ has no file: the user's
    path = getattr(obj if is_module else sys.modules.get(name), "__file__", None) or ""
    return "site-packages" not in path and "dist-packages" not in path


def _names_read(code: types.CodeType) -> List[str]:
    """The global and attribute names a code object and the code nested in it (lambdas, comprehensions,
    inner functions) name."""
    names, stack = [], [code]
    while stack:
        c = stack.pop()
        names.extend(c.co_names)
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return list(dict.fromkeys(names))


def _method(cls: type, name: str) -> Any:
    """The function ``name`` of a user class or of its user bases (a method, a static or class method, a
    property's getter), or None."""
    for klass in cls.__mro__:
        if _user_code(klass) and name in vars(klass):
            v = vars(klass)[name]
            if isinstance(v, (staticmethod, classmethod)):
                return v.__func__
            return v.fget if isinstance(v, property) else v
    return None


def reach(fn: Any, module: Any, arguments: List[Any] = ()) -> Outside:
    """The places ``fn`` (a function, a bound method, or ``module`` itself when it is the compiled one)
    and the user code it reaches read from outside, with the modules among a call's ``arguments``
    (``self`` of a method compiled with ``@nt.compile``).  A module's ``forward`` is followed, and then the
    methods that the code reached names (``self._tail(y)``) of the user classes met (modules' classes,
    classes and callable objects in the places), not every method: a logging method that names a
    growing list would otherwise make that list part of every signature."""
    cells: Dict[int, Any] = {}
    scopes: Dict[Tuple[int, str], Tuple[Dict[str, Any], str]] = {}
    labels: Dict[Tuple[int, Any], str] = {}
    functions: Dict[int, types.FunctionType] = {}
    queue: List[types.FunctionType] = []
    seen_modules: set = set()
    classes: Dict[int, type] = {}
    names_met: Dict[str, None] = {}
    attributes: Dict[Tuple[int, str], Tuple[type, str]] = {}

    def follow(v: Any, depth: int = 0) -> None:
        v = compiled_target(v)
        if isinstance(v, types.MethodType):
            follow(v.__self__)
            v = v.__func__
        if isinstance(v, functools.partial):
            follow(v.func)
        elif isinstance(v, (list, tuple, dict)) and depth < 2:  # ``ACTS["gelu"](x)``: the functions kept there
            for item in itertools.islice(v.values() if isinstance(v, dict) else v, LOOK_AT):
                if callable(item) or isinstance(item, (list, tuple, dict)):
                    follow(item, depth + 1)
        elif isinstance(v, types.FunctionType):
            if id(v) not in functions and len(functions) < MOST_FUNCTIONS and _user_code(v):
                functions[id(v)] = v
                queue.append(v)
        elif isinstance(v, Module):
            for m in v.modules():
                if id(m) not in seen_modules:
                    seen_modules.add(id(m))
                    meet(type(m))
                    follow(_method(type(m), "forward"))
        elif isinstance(v, type):
            meet(v)
        elif callable(v) and _user_code(type(v)):  # a callable object: its __call__
            meet(type(v))
            follow(_method(type(v), "__call__"))

    def meet(cls: type) -> None:
        if id(cls) not in classes and _user_code(cls):
            classes[id(cls)] = cls
            for n in names_met:
                named(cls, n)

    def named(cls: type, n: str) -> None:  # a name the code reached reads, on a user class met
        follow(_method(cls, n))
        owner = next((k for k in cls.__mro__ if _user_code(k) and n in vars(k)), None)
        if owner is not None and is_plain_value(vars(owner)[n]):
            attributes.setdefault((id(owner), n), (owner, n))
            labels.setdefault((id(owner), n), f"{owner.__qualname__}.{n}")

    follow(fn)
    for m in (module, *arguments):
        if isinstance(compiled_target(m), Module):
            follow(m)
    while queue:
        f = queue.pop(0)
        for c, name in zip(f.__closure__ or (), f.__code__.co_freevars):
            cells.setdefault(id(c), c)
            labels.setdefault((id(c), None), f"{f.__qualname__}'s closure variable {name}")
            follow(contents(c))
        scope = f.__globals__
        names = _names_read(f.__code__)
        for n in names:
            if n not in names_met:
                names_met[n] = None
                for cls in list(classes.values()):
                    named(cls, n)
            if n not in scope:
                continue
            scopes.setdefault((id(scope), n), (scope, n))
            labels.setdefault((id(scope), n), f"global {n}")
            v = scope[n]
            follow(v)
            if isinstance(v, types.ModuleType) and _user_code(v):  # ``helpers.W``: the names read there too
                inner = vars(v)
                for a in names:
                    if a in inner:
                        scopes.setdefault((id(inner), a), (inner, a))
                        labels.setdefault((id(inner), a), f"{v.__name__}.{a}")
                        follow(inner[a])
    order = [(id(c), None) for c in cells.values()] + [(id(d), n) for d, n in scopes.values()]
    order += [(id(k), n) for k, n in attributes.values()]
    return Outside(tuple(cells.values()), tuple(scopes.values()), tuple(functions.values()), tuple(attributes.values()),
                   tuple(labels[k] for k in order))


def contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a cell not filled yet
        return None


def read(owner: Any, key: Any) -> Any:
    """What a place ``(owner, key)`` holds now (a global deleted meanwhile reads as a new object)."""
    if key is None:
        return contents(owner)
    return vars(owner).get(key, read) if isinstance(owner, type) else owner.get(key, read)


def put(owner: Any, key: Any, value: Any) -> None:
    """Put ``value`` back at a place ``(owner, key)``."""
    if key is None:
        owner.cell_contents = value
    elif isinstance(owner, type):
        setattr(owner, key, value)
    else:
        owner[key] = value


# ----------------------------------------------------------------------------- guards


def locate(wanted: Dict[int, Tensor], outside: Outside, modules: List[Module],
           leaves: List[Any]) -> Tuple[List[Callable[[List[Any]], bool]], List[Tensor]]:
    """Guards ``holds(leaves)`` for the tensors ``wanted`` (by id), looked for breadth first from the places
    of ``outside``, the defaults of its functions, the attributes of ``modules`` (whose parameters and
    buffers the signature holds) and the arguments that are objects; and the tensors not found."""
    level: List[Tuple[Any, Callable]] = [(v, find) for v, find, _ in outside.roots() + _argument_roots(leaves)]
    for f in outside.functions:
        for attr in ("__defaults__", "__kwdefaults__"):
            if getattr(f, attr):
                level.append((getattr(f, attr), functools.partial(_attribute, f, attr)))
    level += [(m, functools.partial(_fixed, m)) for m in modules]
    guards: List[Callable] = []
    seen = set()
    budget = MOST_OBJECTS
    for _ in range(DEPTH):
        deeper = []
        for obj, find in level:
            if id(obj) in seen or isinstance(obj, (Tensor, type)) or is_plain_value(obj) or budget <= 0:
                continue
            seen.add(id(obj))
            budget -= 1
            for step, child in _children(obj):
                get = functools.partial(_step, find, step)
                if isinstance(child, Tensor):
                    if wanted.pop(id(child), None) is not None:
                        guards.append(functools.partial(_holds_tensor, get, child))
                    continue
                target = compiled_target(child)  # a compiled module is guarded as its module
                if isinstance(target, Module) and id(target) not in seen:
                    inside = [id(t) for t in (*target.parameters(), *target.buffers()) if id(t) in wanted]
                    if inside:
                        for i in inside:
                            del wanted[i]
                        guards.append(functools.partial(_holds_module, get, state_key(child)))
                deeper.append((target, get))
        if not wanted:
            break
        level = deeper
    return guards, list(wanted.values())


def settings(outside: Outside, modules: List[Module],
             leaves: List[Any]) -> List[Tuple[Callable[[List[Any]], tuple], str, bool]]:
    """Readers ``read(leaves)`` of the plain values (``is_plain_value``) kept in containers near what the
    function reads: a dict's or a list's items, the attributes of a namespace or of an object of a user
    class, within :data:`SETTINGS_DEPTH` steps of a place, of an attribute of a module read or of an
    argument that is an object (``CONFIG["scale"]``, ``args.causal``, ``self.cfg["p"]``).  Each reads
    its container again, by the path the trace found it at, as a tuple for the signature: a changed
    number there is a new signature, traced again, as a changed global number is.  Each comes with its
    path, for messages (``global CONFIG['model']``), and whether its values are attributes (``args.lr``)."""
    level = outside.roots() + _argument_roots(leaves)
    for root in modules:
        for m in root.modules():
            level += [(v, functools.partial(_step, functools.partial(_fixed, m), ("attr", k)), f"{type(m).__name__}.{k}")
                      for k, v in vars(m).items() if k not in _MODULE_STORES]
    readers: List[Tuple[Callable, str, bool]] = []
    seen: set = set()
    for _ in range(SETTINGS_DEPTH):
        deeper = []
        for obj, find, label in level:
            if id(obj) in seen or not _holds_settings(obj):
                continue
            seen.add(id(obj))
            if plain_items(obj):
                readers.append((functools.partial(_read_settings, find), label, obj.__class__ not in (dict, list)))
            deeper += [(child, functools.partial(_step, find, step), f"{label}[{step[1]!r}]" if step[0] == "item"
                        else f"{label}.{step[1]}") for step, child in _children(obj)]
        level = deeper
    return readers


def _holds_settings(obj: Any) -> bool:
    """Whether ``obj`` is a container whose plain values ``settings`` reads: a dict, a list, a namespace
    (``types.SimpleNamespace``, ``argparse.Namespace``) or an object of a user class that is no function or
    module.  Other libraries' objects (a logger, a lock) keep their own changing state."""
    cls = obj.__class__
    if cls in (dict, list) or cls is types.SimpleNamespace or (cls.__name__ == "Namespace" and cls.__module__ == "argparse"):
        return True
    return (hasattr(obj, "__dict__") and not isinstance(obj, (Module, Tensor, type, types.ModuleType))
            and not callable(obj) and _user_code(cls))


def plain_items(obj: Any) -> tuple:
    """The plain values and the functions of a container (its first LOOK_AT items or attributes), each with
    its key and its class (1, 1.0 and True are one key otherwise)."""
    if obj.__class__ is list:
        items = enumerate(obj[:LOOK_AT])
    else:
        items = itertools.islice((obj if obj.__class__ is dict else vars(obj)).items(), LOOK_AT)
    return tuple((k, v.__class__, v) for k, v in items if v.__class__ in PLAIN_TYPES or v.__class__ in FUNCTION_TYPES
                 or (v.__class__ is tuple and is_plain_value(v)))


def _read_settings(find: Callable, leaves: List[Any]) -> tuple:
    obj = find(leaves)
    return plain_items(obj) if _holds_settings(obj) else (obj.__class__,)


def _children(obj: Any) -> List[Tuple[Tuple[str, Any], Any]]:
    """``((kind, key), child)`` of a list, tuple or dict (its first LOOK_AT items; a dict's keys strings,
    ints or objects hashed by identity, as an optimizer's state is keyed by parameter), of a module's
    attributes and sub-modules (not its parameters and buffers, which its ``state_key`` holds) or of an
    object's attributes (``vars``); nothing for anything else (functions, Python modules...)."""
    if isinstance(obj, (list, tuple)):
        return [(("item", i), v) for i, v in enumerate(obj[:LOOK_AT])]
    if isinstance(obj, dict):
        return [(("item", k), v) for k, v in itertools.islice(obj.items(), LOOK_AT)
                if isinstance(k, (str, int)) or type(k).__hash__ in (object.__hash__, Tensor.__hash__)]
    if isinstance(obj, Module):
        attrs = {k: v for k, v in vars(obj).items() if k not in _MODULE_STORES}
        attrs.update((k, v) for k, v in obj._modules.items() if v is not None)
        return [(("attr", k), v) for k, v in itertools.islice(attrs.items(), LOOK_AT)]
    attrs = getattr(obj, "__dict__", None)
    if not isinstance(attrs, dict) or callable(obj) or isinstance(obj, types.ModuleType):
        return []
    return [(("attr", k), v) for k, v in itertools.islice(attrs.items(), LOOK_AT)]


def _argument_roots(leaves: List[Any]) -> List[Tuple[Any, Callable, str]]:
    """``(argument, find, label)`` for the arguments that are objects (no tensor, no plain value): roots of
    :func:`locate`'s and :func:`settings`' walks, read again from each call's ``leaves``."""
    return [(x, functools.partial(_argument, i), f"argument {i}") for i, x in enumerate(leaves)
            if not isinstance(x, Tensor) and not is_plain_value(x)]


def _place(owner: Any, key: Any, leaves: List[Any]) -> Any:
    return read(owner, key)


def _attribute(obj: Any, name: str, leaves: List[Any]) -> Any:
    return getattr(obj, name, None)


def _fixed(obj: Any, leaves: List[Any]) -> Any:
    return obj


def _argument(i: int, leaves: List[Any]) -> Any:
    return leaves[i] if i < len(leaves) else None


def _step(find: Callable, step: Tuple[str, Any], leaves: List[Any]) -> Any:
    """What ``find(leaves)`` holds at ``step`` (an item or an attribute), or None where it is gone."""
    kind, key = step
    try:
        obj = find(leaves)
        return obj[key] if kind == "item" else getattr(obj, key)
    except (LookupError, AttributeError, TypeError):
        return None


def _holds_tensor(find: Callable, t: Tensor, leaves: List[Any]) -> bool:
    return find(leaves) is t


def _holds_module(find: Callable, key: Tuple[Any, ...], leaves: List[Any]) -> bool:
    m = find(leaves)
    return isinstance(compiled_target(m), Module) and state_key(m) == key
