"""Name annotations for tensors, and a decorator that checks them at call time.

State the names a function takes and returns, in its signature::

    import namedtensor as nt
    from namedtensor import Named, check_names

    @check_names
    def pool(x: Named["batch", "seq", "embed"], mask: Named["batch", "seq"]) -> Named["batch", "embed"]:
        return (x * mask.align_as(x)).sum("seq")

``Named[...]`` entries are, in order, one per dim:

- a name (a Python identifier): the dim must have exactly that name;
- ``None``: the dim must be unnamed;
- ``...`` (at most once, anywhere): any run of dims, possibly none, with any names.

``Named["batch seq embed"]`` (one string, names separated by spaces, ``...`` allowed) is the same
as ``Named["batch", "seq", "embed"]``.  Bad specs raise :class:`~namedtensor.NamesError` when
the annotation is written, not when the function runs.

``Named[...]`` *is* ``typing.Annotated[Tensor, NamesSpec(...)]``: ``typing.get_type_hints``
reports ``Tensor`` (the spec rides in the ``Annotated`` metadata, read with
``include_extras=True``), so tools that evaluate annotations see an ordinary Tensor annotation.
Static checkers (mypy, pyright) read a string in a subscript as a forward reference and reject
the short form (a mypy plugin cannot help: mypy looks the strings up as names before any plugin
hook sees the annotation); for them write ``Named[Tensor, "batch", "seq"]``, which they read as
``Annotated[Tensor, ...]``, that is ``Tensor`` (``Annotated[Tensor, NamesSpec("batch", "seq")]``
is checked too).  They see Tensor's methods through the stub ``_tensor_methods.pyi``.

``@check_names`` then checks, on every call, each argument annotated ``Named[...]`` (or
``Optional[Named[...]]``, where ``None`` passes) and the return value (``Named[...]``, or a
``Tuple`` of them).  Within one call, sizes are bound by name: every dim that a spec names must
have the same size in every argument and in the return value where the spec names it (dims
covered by ``...`` are not bound).  A name mismatch or a size conflict raises ``NamesError``
naming the function, the parameter, the spec and the actual names and shape; a non-Tensor where
a ``Named`` one is expected raises ``TypeError``.  The plan (which parameters to check, against
which specs) is made once, when the function is decorated (or on its first call if its
annotations refer to names defined later), so a call costs a cached tuple match per checked
value (:func:`namedtensor._names.match_spec`) and a dict lookup per named dim; calls that pass
tensors by keyword also pay a signature bind.  Put ``@check_names`` below ``@staticmethod`` /
``@classmethod``, on the function itself.
"""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple, TypeVar, Union

from . import _names
from ._names import NamesError
from .tensor import Tensor

__all__ = ["Named", "NamesSpec", "check_names"]

F = TypeVar("F", bound=Callable[..., Any])


class NamesSpec:
    """The dims a ``Named[...]`` annotation declares: names, ``None`` (unnamed) and at most one ``...``.

    ``NamesSpec("batch", ..., "embed")`` validates like ``Named[...]``; it is the metadata that
    ``Named[...]`` puts in ``Annotated``, and may be written there directly.
    """

    __slots__ = ("names",)
    names: Tuple[Any, ...]

    def __init__(self, *names: Any) -> None:
        object.__setattr__(self, "names", _parse(names))

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError("NamesSpec is immutable.")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamesSpec) and other.names == self.names

    def __hash__(self) -> int:
        return hash(self.names)

    def __repr__(self) -> str:
        inner = ", ".join("..." if n is Ellipsis else repr(n) for n in self.names)
        return f"Named[{inner}]" if self.names else "Named[()]"


def _parse(entries: Tuple[Any, ...]) -> Tuple[Any, ...]:
    if len(entries) == 1 and isinstance(entries[0], str) and (" " in entries[0] or entries[0] == "..."):
        entries = tuple(Ellipsis if w == "..." else w for w in entries[0].split())
    for e in entries:
        if e is not Ellipsis:
            _names.validate((e,), 1, "Named")  # a str identifier (or None), else the NamesError
    if entries.count(Ellipsis) > 1:
        raise NamesError(f"Named: '...' may appear at most once (it stands for any run of dims), got {entries!r}.")
    given = [e for e in entries if isinstance(e, str)]
    dup = next((n for n in given if given.count(n) > 1), None)
    if dup is not None:
        raise NamesError(f"Named: dim name {dup!r} appears twice in {entries!r}; every name must be distinct.")
    return entries


if typing.TYPE_CHECKING:
    # Static checkers read string subscripts as forward references, so they reject the short
    # form; as ``Annotated``, ``Named[Tensor, "batch", "seq"]`` reads to them as ``Tensor``.
    from typing import Annotated as Named
else:

    class Named:
        """``Named["batch", "seq"]`` (or ``Named[Tensor, "batch", "seq"]``): a Tensor annotation
        stating its dim names (see the module docstring)."""

        def __new__(cls, *args: Any, **kwargs: Any) -> "Named":
            raise TypeError("Named is an annotation: write Named['batch', 'seq'], it is not instantiated.")

        def __class_getitem__(cls, item: Any) -> Any:
            entries = item if isinstance(item, tuple) else (item,)
            if entries and entries[0] is Tensor:
                entries = entries[1:]
            return typing.Annotated[Tensor, NamesSpec(*entries)]


# --------------------------------------------------------------------------- reading annotations


def _spec_of(hint: Any) -> Tuple[Optional[NamesSpec], bool]:
    """``(spec, optional)`` of ``Named[...]`` or ``Optional[Named[...]]``; ``(None, False)`` for other annotations."""
    if typing.get_origin(hint) is typing.Annotated:
        spec = next((m for m in hint.__metadata__ if isinstance(m, NamesSpec)), None)
        return spec, False
    if typing.get_origin(hint) is typing.Union:
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1 and len(args) == 2:
            spec, _ = _spec_of(rest[0])
            return spec, spec is not None
    return None, False


@dataclass(frozen=True)
class _Check:
    spec: NamesSpec
    optional: bool  # None passes
    named: Tuple[Any, ...] = field(init=False)  # the entries but '...': one per axis match_spec returns

    def __post_init__(self) -> None:
        object.__setattr__(self, "named", tuple(n for n in self.spec.names if n is not Ellipsis))


@dataclass(frozen=True)
class _Arg:
    name: str
    position: Optional[int]  # index among the positional parameters; None for keyword-only and *args
    variadic: bool  # *args: every item is checked
    check: _Check
    where: str


@dataclass(frozen=True)
class _TupleCheck:
    items: Tuple[Optional[_Check], ...]  # one per item (None: not checked), or the one for every item
    variadic: bool  # Tuple[Named[...], ...]


@dataclass(frozen=True)
class _Plan:
    args: Tuple[_Arg, ...]
    n_positional: int
    ret: Union[None, _Check, _TupleCheck]


def _check_of(hint: Any) -> Optional[_Check]:
    spec, optional = _spec_of(hint)
    return None if spec is None else _Check(spec, optional)


def _return_plan(hint: Any) -> Union[None, _Check, _TupleCheck]:
    if typing.get_origin(hint) is not tuple:
        return _check_of(hint)
    args = typing.get_args(hint)
    variadic = len(args) == 2 and args[1] is Ellipsis
    items = tuple(_check_of(a) for a in args[:1 if variadic else None])
    return _TupleCheck(items, variadic) if any(items) else None


def _hints(fn: Callable, lenient: bool) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except NameError:
        if not lenient:
            raise
    # Some annotation names what is not reachable from the function's module (a class local to
    # a function): evaluate the others one by one; an unresolvable one cannot be Named[...].
    hints = {}
    for key, ann in getattr(fn, "__annotations__", {}).items():
        try:
            hints[key] = eval(ann, getattr(fn, "__globals__", {})) if isinstance(ann, str) else ann
        except NameError:
            pass
    return hints


def _plan(fn: Callable, sig: inspect.Signature, lenient: bool) -> _Plan:
    hints = _hints(fn, lenient)
    positional = [p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    args = []
    for p in sig.parameters.values():
        spec, optional = _spec_of(hints.get(p.name))
        if spec is not None:
            variadic = p.kind is p.VAR_POSITIONAL
            pos = positional.index(p.name) if p.name in positional else None
            where = f"argument '*{p.name}'" if variadic else f"argument '{p.name}'"
            args.append(_Arg(p.name, pos, variadic, _Check(spec, optional), where))
    return _Plan(tuple(args), len(positional), _return_plan(hints.get("return")))


# --------------------------------------------------------------------------- checking one call


class _Sizes:
    """Sizes bound by name during one call, with where each was first seen."""

    __slots__ = ("fn", "seen")

    def __init__(self, fn: str) -> None:
        self.fn = fn
        self.seen: Dict[str, Tuple[int, str, Tuple[int, ...]]] = {}

    def check(self, value: Any, check: _Check, where: str) -> None:
        if value is None and check.optional:
            return
        if not isinstance(value, Tensor):
            raise TypeError(
                f"{self.fn}: {where} must be a Tensor with names {check.spec!r}, "
                f"got {type(value).__name__}: {value!r:.80}."
            )
        names, shape = value.names, value.shape
        axs = _names.match_spec(names, check.spec.names)
        if axs is None:
            raise NamesError(
                f"{self.fn}: {where} expected names {check.spec!r}, got names {_names.fmt(names)} with shape "
                f"{shape}. The names must match in order ('...' matches any run of dims, None an unnamed "
                "dim); fix with .rename(...), .refine_names(...) or .align_to(...) before the call."
            )
        seen = self.seen
        for ax, want in zip(axs, check.named):
            if want is None:
                continue
            size = shape[ax]
            first = seen.get(want)
            if first is None:
                seen[want] = (size, where, shape)
            elif first[0] != size:
                raise NamesError(
                    f"{self.fn}: size conflict on dim {want!r}: {first[1]} has {want!r} of size {first[0]} "
                    f"(shape {first[2]}), but {where} has {want!r} of size {size} (shape {shape}). "
                    "Within one call, a name must have the same size everywhere."
                )


def check_names(fn: F) -> F:
    """Check the ``Named[...]`` annotations of ``fn``'s arguments and return value on every call.

    Raises :class:`~namedtensor.NamesError` on a name mismatch or when one name has two sizes in
    one call, ``TypeError`` when a non-Tensor is passed where ``Named[...]`` is declared.
    """
    sig = inspect.signature(fn)
    qualname = getattr(fn, "__qualname__", repr(fn))
    plan: List[_Plan] = []
    try:
        plan.append(_plan(fn, sig, lenient=False))
    except NameError:
        pass  # annotations name something defined after the function: plan on the first call

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not plan:
            plan.append(_plan(fn, sig, lenient=True))
        p = plan[0]
        sizes = _Sizes(qualname)
        if p.args:
            if not kwargs and len(args) <= p.n_positional:
                # The common call: positional arguments fill the first parameters in order.
                for a in p.args:
                    if a.position is not None and a.position < len(args):
                        sizes.check(args[a.position], a.check, a.where)
            else:
                bound = sig.bind(*args, **kwargs).arguments
                for a in p.args:
                    if a.name not in bound:
                        continue  # left to its default
                    if a.variadic:
                        for i, v in enumerate(bound[a.name]):
                            sizes.check(v, a.check, f"{a.where}[{i}]")
                    else:
                        sizes.check(bound[a.name], a.check, a.where)
        out = fn(*args, **kwargs)
        if isinstance(p.ret, _Check):
            sizes.check(out, p.ret, "the return value")
        elif p.ret is not None:
            items = p.ret.items
            if not isinstance(out, tuple):
                raise TypeError(f"{qualname}: the return value must be a tuple, got {type(out).__name__}.")
            if not p.ret.variadic and len(out) != len(items):
                raise TypeError(f"{qualname}: the return value must be a tuple of {len(items)} items, got {len(out)}.")
            for i, v in enumerate(out):
                check = items[0] if p.ret.variadic else items[i]
                if check is not None:
                    sizes.check(v, check, f"the return value [{i}]")
        return out

    return typing.cast(F, wrapper)
