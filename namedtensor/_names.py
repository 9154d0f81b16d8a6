"""Every name rule of the library, as pure functions on name tuples.

A tensor's names are a tuple with one entry per dim: a ``str`` (a valid Python
identifier) or ``None`` (unnamed).  The three rules (docs/design.md, "The three rules"):

1. Names ride along: each op has one rule for its output names (functions here).
2. Broadcasting is positional and checked by name: operands are right-aligned; at
   each position the names are equal or one is ``None``; a name paired with
   ``None`` must not appear elsewhere in the other operand (:func:`unify`).
3. Dims are addressed by name wherever an axis is taken (:func:`axis`).

Nothing here touches arrays.  Functions take and return tuples and ints, so
they are cached on their (hashable) arguments: names repeat every training
step, and a cache hit costs one dict lookup.  Every name problem raises
:class:`NamesError` with a message that names the op, shows each operand's
names, says which rule broke and suggests the fix.
"""

from __future__ import annotations

from functools import lru_cache
from numbers import Integral
from typing import Any, Hashable, Iterable, NamedTuple, Optional, Sequence, Tuple

Name = Optional[str]
Names = Tuple[Name, ...]

_cache = lru_cache(maxsize=8192, typed=True)  # typed: axis(n, 1.0) must not hit axis(n, 1)


class NamesError(ValueError):
    """A name rule was broken: invalid, duplicate, mismatched, misaligned or unknown dim names."""


class NamesDropped(NamesError):
    """Raised where an op cannot infer a dim's name and would have to drop it (``flatten`` without
    ``out_name``, ``unflatten`` without names).  ``result`` is what the name rule returns with those dims
    unnamed and ``dropped`` the names lost: the conversion mode (``nt.gradual()``) uses them instead of
    raising, only on this error path, so that the rule itself stays strict and costs nothing."""

    def __init__(self, message: str, result: Any, dropped: Names) -> None:
        super().__init__(message)
        self.result = result
        self.dropped = dropped

    def __reduce__(self) -> Tuple[type, Tuple[str, Any, Names]]:
        # args holds the message only; pickling (e.g. a worker process reporting it) needs all three
        return type(self), (str(self), self.result, self.dropped)


# --------------------------------------------------------------------------- formatting


def fmt(names: Sequence[Name]) -> str:
    """``('batch', None)`` as it reads in messages."""
    inner = ", ".join("None" if n is None else repr(n) for n in names)
    return f"({inner},)" if len(names) == 1 else f"({inner})"


def _dim_label(names: Names, ax: int) -> str:
    n = names[ax]
    return f"dim {ax} ({n!r})" if n is not None else f"dim {ax}"


# --------------------------------------------------------------------------- validity


@lru_cache(maxsize=None)
def unnamed(ndim: int) -> Names:
    """The names of an unnamed tensor of ``ndim`` dims (one shared tuple per ndim)."""
    return (None,) * ndim


def is_named(names: Names) -> bool:
    """Whether any dim has a name."""
    return names is not unnamed(len(names)) and any(n is not None for n in names)


def _check_name(name: object, op: str) -> None:
    if name is None:
        return
    if not isinstance(name, str):
        raise NamesError(
            f"{op}: a dim name must be a str or None, got {name!r} of type {type(name).__name__}."
        )
    if not name.isidentifier():
        raise NamesError(
            f"{op}: invalid dim name {name!r}: a name must be a Python identifier "
            "(letters, digits and '_', not starting with a digit)."
        )


@_cache
def _validated(names: Names, op: str) -> Names:
    for n in names:
        _check_name(n, op)
    seen = set()
    for n in names:
        if n is not None:
            if n in seen:
                raise NamesError(
                    f"{op}: duplicate dim name {n!r} in {fmt(names)}: names must be unique "
                    "within a tensor (any number of dims may be None)."
                )
            seen.add(n)
    if not any(n is not None for n in names):
        return unnamed(len(names))
    if not all(n is None or n.__class__ is str for n in names):
        # a str subclass (np.str_) would be cached and handed to every later call with equal names
        return tuple(None if n is None else str(n) for n in names)
    return names


def validate(names: Iterable[Name] | None, ndim: int, op: str = "tensor") -> Names:
    """Check ``names`` for a tensor of ``ndim`` dims and return them as a tuple.

    ``None`` means unnamed.  A single ``str`` is refused (a common slip for ``("x",)``).
    """
    if names is None:
        return unnamed(ndim)
    if isinstance(names, str):
        raise NamesError(f"{op}: names must be a sequence of names, not the str {names!r}; write ({names!r},).")
    try:
        names = tuple(names)
    except TypeError:
        raise TypeError(f"{op}: names must be a sequence of str or None, got {type(names).__name__}.") from None
    if len(names) != ndim:
        raise NamesError(
            f"{op}: got {len(names)} names {fmt(names)} for a tensor with {ndim} dims; give one name (or None) per dim."
        )
    try:
        return _validated(names, op)
    except TypeError:  # an unhashable entry (a list...) cannot be a name: say so instead of "unhashable"
        for n in names:
            _check_name(n, op)
        raise


def _require_named(all_names, op: str, why: str, what: str) -> None:
    """Ops that work by name alone refuse unnamed dims, pointing to refine_names."""
    for names in all_names:
        for i, n in enumerate(names):
            if n is None:
                raise NamesError(
                    f"{op}: {why}, but dim {i} of {fmt(names)} is unnamed "
                    f"({what}: {', '.join(fmt(x) for x in all_names)}). Name it with refine_names."
                )


# --------------------------------------------------------------------------- rule 2: unify


def _misaligned(op: str, a: Names, b: Names, name: str, fix: str) -> NamesError:
    return NamesError(
        f"{op}: dims {fmt(a)} and {fmt(b)} are misaligned: {name!r} is at a different position "
        f"from the right in each (names must line up when broadcasting by position). {fix}"
    )


_UNIFY: dict = {}


def unify(a: Names, b: Names, op: str = "op") -> Names:
    """Output names of broadcasting ``a`` with ``b`` (rule 2), or a NamesError."""
    if a is b:
        return a
    key = (a, b)
    out = _UNIFY.get(key)
    if out is None:
        if len(_UNIFY) > 65536:  # bound the cache when names are generated on the fly
            _UNIFY.clear()
        out = _UNIFY[key] = _unify(a, b, op)
    return out


def _unify(a: Names, b: Names, op: str) -> Names:
    na, nb = len(a), len(b)
    n = na if na > nb else nb
    out = []
    for k in range(1, n + 1):  # from the right, so the first position that breaks is the one reported
        x = a[na - k] if k <= na else None
        y = b[nb - k] if k <= nb else None
        if x is not None and y is not None:
            if x != y:
                raise NamesError(
                    f"{op}: dims {fmt(a)} and {fmt(b)} do not match at position {-k} from the right: "
                    f"{x!r} vs {y!r}. Broadcasting is by position and checked by name. "
                    "To broadcast by name use b.align_as(a) (or nt.align(a, b)); "
                    "if the dims are really the same, rename one of them."
                )
            out.append(x)
        elif x is not None:
            if x in b:
                raise _misaligned(op, a, b, x, "To broadcast by name use b.align_as(a) or nt.align(a, b).")
            out.append(x)
        elif y is not None:
            if y in a:
                raise _misaligned(op, a, b, y, "To broadcast by name use b.align_as(a) or nt.align(a, b).")
            out.append(y)
        else:
            out.append(None)
    out.reverse()
    return validate(out, n, op)


def unify_all(names: Sequence[Names], op: str) -> Names:
    """:func:`unify` of several operands, pairwise from the first (e.g. ``where``'s three)."""
    out = names[0]
    for other in names[1:]:
        out = unify(out, other, op)
    return out


@_cache
def unifiable(a: Names, b: Names) -> bool:
    """Whether ``a`` and ``b`` broadcast under rule 2 (``equal`` answers False where they do not)."""
    try:
        _unify(a, b, "equal")
    except NamesError:
        return False
    return True


# --------------------------------------------------------------------------- rule 3: dims by name


@_cache
def axis(names: Names, dim: Hashable, op: str = "op") -> int:
    """The non-negative axis of ``dim`` (a name or an int, negative counting from the end)."""
    ndim = len(names)
    if isinstance(dim, str):
        try:
            return names.index(dim)
        except ValueError:
            raise NamesError(
                f"{op}: no dim named {dim!r} in a tensor with names {fmt(names)}. "
                "Check the spelling, or name the dim first with refine_names/rename."
            ) from None
    if dim is None:
        raise NamesError(f"{op}: a dim must be a name or an int, got None.")
    if dim.__class__ is not int:
        dim = _as_int(dim, op, "a dim must be a name (str) or an int")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: dim {dim} is out of range for a tensor with {ndim} dims {fmt(names)}.")
    return dim % ndim


def _as_int(dim: object, op: str, what: str) -> int:
    """``dim`` as a Python int: anything with ``__index__`` (NumPy ints, int subclasses), but not bools."""
    if isinstance(dim, bool) or not hasattr(dim, "__index__"):
        raise TypeError(f"{op}: {what}, got {type(dim).__name__} {dim!r}.")
    return int(dim.__index__())


def axis_or_new(names: Names, dim: Hashable, op: str) -> int:
    """Like :func:`axis`, for ops that may address one past the last dim (insertions)."""
    ndim = len(names) + 1
    if isinstance(dim, str):
        return axis(names, dim, op)
    if dim.__class__ is not int:
        dim = _as_int(dim, op, "a position must be an int")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: position {dim} is out of range for a result with {ndim} dims.")
    return dim % ndim


def axes(names: Names, dims, op: str = "op") -> Tuple[int, ...]:
    """Axes of a dim or a tuple/list of dims; ``None`` means all dims.  No dim may repeat."""
    return _axes(names, hashable_dims(dims), op)


@_cache
def _axes(names: Names, dims: Hashable, op: str) -> Tuple[int, ...]:
    if dims is None:
        return tuple(range(len(names)))
    if isinstance(dims, (tuple, list)):
        out = tuple(axis(names, d, op) for d in dims)
        if len(set(out)) != len(out):
            raise NamesError(f"{op}: dims {tuple(dims)!r} name the same dim twice in a tensor with names {fmt(names)}.")
        return out
    return (axis(names, dims, op),)


_PLAIN = frozenset({int, str, type(None), type(Ellipsis)})


class _Typed(tuple):
    """A tuple that equals only a tuple holding values of the same types.

    The caches compare keys with ``==``, under which ``(0.0,)`` and ``(True,)`` equal ``(0,)``: a key
    with such entries is wrapped in this class, so it gets an entry of its own, and the rule (run on
    the miss) rejects it whatever was called before.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return (type(other) is _Typed and tuple.__eq__(self, other)
                and all(type(a) is type(b) for a, b in zip(self, other)))

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash((tuple(self), tuple(map(type, self))))


def _plain(x: object) -> object:
    """``x`` as a plain ``str`` or ``int`` when it is one in disguise (``np.str_``, ``np.int64``)."""
    if isinstance(x, str):
        return str(x)
    if isinstance(x, Integral) and not isinstance(x, bool):  # NumPy's bool is no Integral
        return int(x)
    return x


def hashable_dims(dims: Hashable) -> Hashable:
    """A user's dims (or names) as a key for the caches whose lookups never depend on call history.

    Lists become tuples; inside a tuple, NumPy's strs and ints become Python's (a name or dim given as
    ``np.str_`` must not leak into later results), and anything else that is not an int, a str, ``None``
    or ``...`` (a float, a bool) makes the key a :class:`_Typed` tuple.
    """
    if dims.__class__ is list:
        dims = tuple(dims)
    elif dims.__class__ is not tuple:
        return dims
    if _PLAIN.issuperset(map(type, dims)):
        return dims
    dims = tuple(map(_plain, dims))
    return dims if _PLAIN.issuperset(map(type, dims)) else _Typed(dims)


_REDUCE: dict = {}


def reduce(names: Names, dims: Hashable, keepdim: bool, op: str = "reduce") -> Tuple[Tuple[int, ...], Names]:
    """Axes reduced and the output names: the input's minus the reduced dims (all kept with keepdim)."""
    key = (names, dims, dims.__class__, keepdim)  # the class: dims=1.0 must not hit dims=1
    out = _REDUCE.get(key)
    if out is None:
        if len(_REDUCE) > 65536:
            _REDUCE.clear()
        out = _REDUCE[key] = _reduce(names, dims, keepdim, op)
    return out


def _reduce(names: Names, dims: Hashable, keepdim: bool, op: str) -> Tuple[Tuple[int, ...], Names]:
    ax = axes(names, dims, op)
    if keepdim:
        return ax, names
    return ax, validate([n for i, n in enumerate(names) if i not in ax], len(names) - len(ax), op)


@_cache
def remove(names: Names, ax: int) -> Names:
    """Names without the dim at ``ax`` (``unbind``, ``select``)."""
    return validate(names[:ax] + names[ax + 1 :], len(names) - 1)


@_cache
def insert(names: Names, ax: int, name: Name, op: str = "unsqueeze") -> Names:
    """Names with ``name`` inserted at position ``ax`` (already normalised)."""
    _check_name(name, op)
    if name is not None and name in names:
        raise NamesError(
            f"{op}: the new dim name {name!r} is already a dim of {fmt(names)}; choose another name."
        )
    return validate(names[:ax] + (name,) + names[ax:], len(names) + 1, op)


# --------------------------------------------------------------------------- naming


def _expand_ellipsis(new: Tuple, current: Names, op: str) -> Tuple:
    """Replace one ``...`` in ``new`` by the current names of the dims it covers."""
    count = sum(1 for n in new if n is Ellipsis or n == "...")
    if count == 0:
        return new
    if count > 1:
        raise NamesError(f"{op}: at most one '...' is allowed, got {new!r}.")
    i = next(k for k, n in enumerate(new) if n is Ellipsis or n == "...")
    rest = len(new) - 1
    if rest > len(current):
        raise NamesError(
            f"{op}: {rest} names {new!r} for a tensor with only {len(current)} dims {fmt(current)}."
        )
    return new[:i] + current[i : len(current) - (rest - i)] + new[i + 1 :]


@_cache
def rename_positional(names: Names, new: Tuple, op: str = "rename") -> Names:
    """``t.rename(*new)``: every dim gets a new name; ``...`` keeps the dims it covers."""
    new = _expand_ellipsis(new, names, op)
    return validate(new, len(names), op)


@_cache
def rename_mapping(names: Names, mapping: Tuple[Tuple[str, Name], ...], op: str = "rename") -> Names:
    """``t.rename(old=new)``: rename named dims; each ``old`` must exist."""
    out = list(names)
    for old, new in mapping:
        if old not in names:
            raise NamesError(
                f"{op}: cannot rename {old!r} to {new!r}: no dim named {old!r} in {fmt(names)}."
            )
        out[names.index(old)] = new
    return validate(out, len(names), op)


@_cache
def refine(names: Names, new: Tuple, op: str = "refine_names") -> Names:
    """``refine_names``: a ``None`` dim may get any name, a named dim only its own name."""
    expanded = _expand_ellipsis(new, names, op)
    if len(expanded) != len(names):
        raise NamesError(
            f"{op}: cannot refine {fmt(names)} to {new!r}: {len(names)} dims but {len(expanded)} names."
        )
    for i, (old, n) in enumerate(zip(names, expanded)):
        if old is not None and old != n:
            if n is None:
                why = f"{old!r} is more specific than None"
            else:
                why = f"{old!r} is different from {n!r}"
            raise NamesError(
                f"{op}: cannot refine {fmt(names)} to {fmt(expanded)}: {why} at dim {i}. "
                f"refine_names only names unnamed dims; use rename to change a name."
            )
    return validate(expanded, len(names), op)


@_cache
def align_to(names: Names, order: Tuple, op: str = "align_to") -> Tuple[Tuple[int, ...], Names]:
    """Plan for ``align_to(*order)``.

    Returns ``(source, out_names)`` where ``source[j]`` is the input axis that
    lands at output position ``j``, or ``-1`` for a new size-1 dim.  Without
    ``...`` every input dim must be named and listed; ``...`` stands for the
    input dims not listed, in their order (named or not).
    """
    ell = [i for i, n in enumerate(order) if n is Ellipsis or n == "..."]
    if len(ell) > 1:
        raise NamesError(f"{op}: at most one '...' is allowed, got {order!r}.")
    listed = [n for n in order if not (n is Ellipsis or n == "...")]
    for n in listed:
        if n is None:
            raise NamesError(f"{op}: the order {order!r} contains None; list dims by name and use '...' for the rest.")
        _check_name(n, op)
    if len(set(listed)) != len(listed):
        raise NamesError(f"{op}: the order {order!r} lists a name twice.")
    if not ell:
        _require_placed(names, order, op, "in the order", "add '...' to keep unnamed dims in order",
                        "list it, or add '...'")
    rest = [i for i, n in enumerate(names) if n is None or n not in listed]
    source = []
    for n in order:
        if n is Ellipsis or n == "...":
            source.extend(rest)
        else:
            source.append(names.index(n) if n in names else -1)
    out = tuple(names[s] if s >= 0 else n for s, n in zip(source, _expand_order(order, names, rest)))
    return tuple(source), validate(out, len(out), op)


@_cache
def align_as(names: Names, other: Names, op: str = "align_as") -> Tuple[Tuple[int, ...], Names]:
    """Plan for ``t.align_as(other)``: ``align_to(*other)``, where ``other`` may also have unnamed dims.

    Each dim of ``t`` goes where ``other`` has its name; every other position of
    ``other`` becomes a size-1 dim with ``other``'s name there (or ``None``), so the
    result broadcasts against ``other`` by position.  Every dim of ``t`` must be named and be a dim of ``other``.
    """
    fix = "use align_to with '...' to keep the dims that other lacks"
    _require_placed(names, other, op, "a dim of", fix, f"rename it, or {fix}")
    return tuple(names.index(n) if n in names else -1 for n in other), other


def _require_placed(names: Names, order: Tuple, op: str, where: str, unnamed_fix: str, missing_fix: str) -> None:
    """Without '...', every dim of ``names`` must be named and appear in ``order`` (``where`` it must be)."""
    for i, n in enumerate(names):
        if n is None:
            raise NamesError(
                f"{op}: dim {i} of {fmt(names)} is unnamed, so it has no place in {fmt(order)}. "
                f"Name it with refine_names, or {unnamed_fix}."
            )
        if n not in order:
            raise NamesError(f"{op}: dim {n!r} of {fmt(names)} is not {where} {fmt(order)}; {missing_fix}.")


def _expand_order(order: Tuple, names: Names, rest) -> list:
    out = []
    for n in order:
        if n is Ellipsis or n == "...":
            out.extend(names[i] for i in rest)
        else:
            out.append(n)
    return out


@_cache
def align_union(all_names: Tuple[Names, ...], op: str = "align") -> Names:
    """The target of ``nt.align(*tensors)``: every name, in order of first appearance.

    Names that appear in several tensors must appear in the same relative order in
    each (otherwise the union order is ambiguous).  Unnamed dims cannot be aligned by
    name, unless every tensor is fully unnamed (no alignment needed).
    """
    _require_named(all_names, op, "aligns by name", "tensors")
    # each name must follow the names before it in every tensor; among the names free to go
    # next, the one that appeared first goes first (a topological sort by first appearance)
    first: list = []
    before: dict = {}
    for names in all_names:
        for k, n in enumerate(names):
            if n not in before:
                first.append(n)
                before[n] = set()
            before[n].update(names[:k])
    out: list = []
    placed: set = set()
    while len(out) < len(first):
        for n in first:
            if n not in placed and before[n] <= placed:
                out.append(n)
                placed.add(n)
                break
        else:
            raise NamesError(
                f"{op}: the tensors order their shared dims differently "
                f"({', '.join(fmt(x) for x in all_names)}); align_to one order first."
            )
    return tuple(out)


# --------------------------------------------------------------------------- permutations


@_cache
def permute(names: Names, dims: Tuple, op: str = "permute") -> Tuple[Tuple[int, ...], Names]:
    """``permute(*dims)``: every dim once, by name or position (or names with ``...``); ``(perm, names)``."""
    if any(d is Ellipsis or d == "..." for d in dims):
        if any(isinstance(d, int) for d in dims):
            raise NamesError(f"{op}: '...' can only be combined with names, got {dims!r}.")
        src, out = align_to(names, dims, op)
        if -1 in src:
            missing = [d for d, s in zip(dims, src) if s == -1]
            raise NamesError(f"{op}: no dims named {missing!r} in {fmt(names)}.")
        return src, out
    if len(dims) != len(names):
        raise NamesError(
            f"{op}: got {len(dims)} dims {dims!r} for a tensor with {len(names)} dims {fmt(names)}; list every dim once "
            "(or use '...' for the rest)."
        )
    perm = axes(names, tuple(dims), op)
    return perm, tuple(names[p] for p in perm)


@_cache
def transpose(names: Names, d0: Hashable, d1: Hashable, op: str = "transpose") -> Tuple[Tuple[int, ...], Names]:
    """``transpose(d0, d1)``: the two dims swap places, with their names; ``(perm, names)``."""
    a, b = axis(names, d0, op), axis(names, d1, op)
    perm = list(range(len(names)))
    perm[a], perm[b] = perm[b], perm[a]
    return tuple(perm), tuple(names[p] for p in perm)


# --------------------------------------------------------------------------- reshapes


@_cache
def flatten(names: Names, dims: Tuple, out_name: Name, op: str = "flatten") -> Tuple[int, int, Names]:
    """``flatten(dims, out_name)``: dims must be consecutive and in order; returns (start, stop, names)."""
    if not dims:
        raise NamesError(f"{op}: dims cannot be empty.")
    ax = axes(names, dims, op)
    start = ax[0]
    if list(ax) != list(range(start, start + len(ax))):
        raise NamesError(
            f"{op}: dims {tuple(dims)!r} must be consecutive and in order in {fmt(names)}; "
            "permute or align_to first."
        )
    _check_name(out_name, op)
    if out_name is None:
        merged = tuple(names[a] for a in ax if names[a] is not None)
        if len(ax) == 1:
            out_name = names[start]  # flattening one dim changes nothing: it keeps its name
        elif merged:
            stop = start + len(ax)
            raise NamesDropped(
                f"{op}: flattening dims {tuple(dims)!r} of {fmt(names)} without out_name would drop the names "
                f"{fmt(merged)}; give the new dim a name, e.g. flatten({tuple(dims)!r}, {'_'.join(merged)!r}).",
                (start, stop, names[:start] + (None,) + names[stop:]),
                merged,
            )
    out = names[:start] + (out_name,) + names[start + len(ax) :]
    if out_name is not None and out_name in names and out_name not in [names[a] for a in ax]:
        raise NamesError(f"{op}: the new name {out_name!r} is already a dim of {fmt(names)}.")
    return start, start + len(ax), validate(out, len(out), op)


@_cache
def unflatten(names: Names, ax: int, new: Names, op: str = "unflatten", named: bool = True) -> Names:
    """Names after splitting the dim at ``ax`` into dims named ``new``.

    ``named=False`` says the sizes came without names: allowed for an unnamed dim
    only, since a named dim would lose its name.
    """
    if not new:
        raise NamesError(f"{op}: the new sizes must be non-empty.")
    if not named and names[ax] is not None:
        raise NamesDropped(
            f"{op}: input is named but no names were given for the new dims: {_dim_label(names, ax)} of "
            f"{fmt(names)} would lose its name. Give (name, size) pairs, e.g. "
            f"unflatten({names[ax]!r}, (('{names[ax]}_outer', 2), ('{names[ax]}_inner', -1))), or names=.",
            names[:ax] + new + names[ax + 1 :],
            (names[ax],),
        )
    out = names[:ax] + new + names[ax + 1 :]
    for n in new:
        _check_name(n, op)
        if n is not None and n in names and n != names[ax]:
            raise NamesError(f"{op}: the new name {n!r} is already a dim of {fmt(names)}.")
    return validate(out, len(out), op)


def reshape(names: Names, new: Optional[Iterable[Name]], shape: Tuple[int, ...], out_shape: Tuple[int, ...],
            op: str = "reshape") -> Tuple[Names, Names]:
    """``reshape``/``view`` from ``shape`` to ``out_shape`` (both resolved, no -1): ``(out_names, dropped)``.

    ``names=`` given (``new``) wins and is only validated.  Else the dims of the longest common prefix
    and suffix of equal sizes keep their names (in the input they are disjoint, so no name repeats);
    the dims split or merged between them come out unnamed, and ``dropped`` are the names they had.
    """
    if new is not None:
        return validate(new, len(out_shape), op), ()
    if not is_named(names):
        return unnamed(len(out_shape)), ()
    return _reshape(names, shape, out_shape, op)


@_cache
def _reshape(names: Names, shape: Tuple[int, ...], out_shape: Tuple[int, ...], op: str) -> Tuple[Names, Names]:
    n_in, n_out = len(shape), len(out_shape)
    limit = min(n_in, n_out)
    head = 0
    while head < limit and shape[head] == out_shape[head]:
        head += 1
    tail = 0
    while tail < limit - head and shape[n_in - 1 - tail] == out_shape[n_out - 1 - tail]:
        tail += 1
    out = names[:head] + (None,) * (n_out - head - tail) + names[n_in - tail :]
    dropped = tuple(n for n in names[head : n_in - tail] if n is not None)
    return validate(out, n_out, op), dropped


@_cache
def unreduce(names: Names, axes: Tuple[int, ...]) -> Names:
    """``names`` with unnamed dims put back so that they sit at ``axes`` of the result: a reduction
    without ``keepdim`` undone, so that its gradient broadcasts against the input (rule 2)."""
    out = list(names)
    for a in sorted(axes):
        out.insert(a, None)
    return validate(out, len(out))


@_cache
def broadcast_to(names: Names, new: Names, op: str = "broadcast_to") -> Names:
    """Names after broadcasting to a shape whose names are ``new`` (right-aligned, rule 2)."""
    if len(new) < len(names):
        raise ValueError(f"{op}: cannot broadcast {len(names)} dims {fmt(names)} to {len(new)} dims.")
    return unify(names, new, op)


# --------------------------------------------------------------------------- joins


@_cache
def cat(all_names: Tuple[Names, ...], dim: Hashable, op: str = "cat") -> Tuple[int, Names]:
    """``cat(tensors, dim)``: same ndim, names unify dim by dim; ``(axis, names)``."""
    out = _joined(all_names, op)
    if not out:
        raise ValueError(f"{op}: zero-dimensional tensors cannot be concatenated; stack them instead.")
    return axis(out, dim, op), out


@_cache
def stack(all_names: Tuple[Names, ...], dim: Hashable, op: str = "stack") -> Tuple[int, Names]:
    """``stack(tensors, dim)``: ``dim`` is a new name (placed first) or an int position (new dim unnamed)."""
    out = _joined(all_names, op)
    if isinstance(dim, str):
        return 0, insert(out, 0, dim, op)
    ax = axis_or_new(out, dim, op)
    return ax, insert(out, ax, None, op)


def _joined(all_names: Tuple[Names, ...], op: str) -> Names:
    """The names of tensors joined by ``cat``/``stack``: all have the same ndim, and names unify dim by dim."""
    if len({len(n) for n in all_names}) != 1:
        raise ValueError(
            f"{op}: all tensors must have the same number of dims, got {', '.join(fmt(n) for n in all_names)}."
        )
    out = all_names[0]
    for other in all_names[1:]:
        if other != out:
            try:
                out = unify(out, other, op)
            except NamesError:
                raise NamesError(
                    f"{op}: the tensors' names must match dim by dim (None matches any name), got "
                    f"{', '.join(fmt(n) for n in all_names)}. Use align_to or rename so they agree."
                ) from None
    return out


# --------------------------------------------------------------------------- contractions


@_cache
def matmul(a: Names, b: Names, op: str = "matmul") -> Names:
    """``a @ b``: batch dims unify, contracted dims must have equal names when both are named."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError(f"{op}: both operands need at least 1 dim, got {len(a)} and {len(b)} dims.")
    ka = a[-1]
    kb = b[-2] if len(b) >= 2 else b[-1]
    if ka is not None and kb is not None and ka != kb:
        raise NamesError(
            f"{op}: the contracted dims differ: {ka!r} (last dim of {fmt(a)}) vs {kb!r} "
            f"({'second-to-last' if len(b) >= 2 else 'only'} dim of {fmt(b)}). "
            "matmul checks contracted names; rename one of them if they really are the same dim, "
            "or use nt.dot(..., over=...) to contract by name."
        )
    if len(a) == 1 and len(b) == 1:
        return ()
    # the contracted dim of one operand may share its name only with the contracted dim of the other
    rest_b = b[:-2] + b[-1:] if len(b) >= 2 else ()
    for k, rest in ((ka, rest_b), (kb, a[:-1])):
        if k is not None and k in rest:
            raise _misaligned(op, a, b, k, "The contracted dim of one operand has the name of another dim of the "
                                           "other; rename one of them, or use nt.dot to contract by name.")
    if len(b) == 1:
        out = a[:-1]
        return validate(out, len(out), op)
    if len(a) == 1:
        out = b[:-2] + b[-1:]
        return validate(out, len(out), op)
    batch_a, batch_b = a[:-2], b[:-2]
    feat_a, feat_b = a[-2:], b[-2:]
    for n in batch_a:
        if n is not None and n in feat_b:
            raise _misaligned(op, a, b, n, "A batch dim of one operand is a matrix dim of the other; align_to first.")
    for n in batch_b:
        if n is not None and n in feat_a:
            raise _misaligned(op, a, b, n, "A batch dim of one operand is a matrix dim of the other; align_to first.")
    batch = unify(batch_a, batch_b, op)
    out = batch + (a[-2], b[-1])
    if a[-2] is not None and a[-2] == b[-1]:
        raise NamesError(
            f"{op}: {fmt(a)} @ {fmt(b)} would give duplicate names {fmt(out)}; rename one of the operands' dims."
        )
    return validate(out, len(out), op)


@_cache
def contract(all_names: Tuple[Names, ...], over: Optional[Tuple[str, ...]], out: Optional[Tuple[str, ...]],
             op: str = "dot") -> Tuple[Tuple[Tuple[int, ...], ...], Tuple[int, ...], Names]:
    """Plan a contraction by name: every name gets an id (its order of first appearance); ``over`` is summed.

    ``over=None`` (einsum) sums every name that ``out`` does not list.  Returns
    ``(operand_ids, out_ids, out_names)``: the ids of each operand's dims and of the
    output's dims, ready for einsum.
    """
    _require_named(all_names, op, "contracts by name", "operands")
    seen: list = []
    for names in all_names:
        for n in names:
            if n not in seen:
                seen.append(n)
    explicit = over is not None
    if over is None:
        over = tuple(n for n in seen if n not in (out or ()))
    for n in over:
        _check_name(n, op)
        if n not in seen:
            raise NamesError(
                f"{op}: cannot contract over {n!r}: no operand has it (operands: "
                f"{', '.join(fmt(x) for x in all_names)})."
            )
        if explicit:
            _require_shared(all_names, n, op)
    if len(set(over)) != len(over):
        raise NamesError(f"{op}: over={over!r} lists a name twice.")
    kept = [n for n in seen if n not in over]
    if out is not None:
        out = validate(out, len(out), op)
        if sorted(out, key=str) != sorted(kept, key=str):
            raise NamesError(
                f"{op}: out={fmt(out)} must list exactly the dims that are not contracted: {fmt(tuple(kept))}."
            )
        kept = list(out)
    ids = {n: i for i, n in enumerate(seen)}
    return (tuple(tuple(ids[n] for n in names) for names in all_names), tuple(ids[n] for n in kept), tuple(kept))


def _require_shared(all_names: Tuple[Names, ...], n: str, op: str) -> None:
    """A dim contracted by name must be in two operands at least: in one alone it would be a plain sum,
    which is how a typo in one operand's names would turn into a wrong answer instead of an error."""
    having = [i for i, names in enumerate(all_names) if n in names]
    if len(having) >= 2:
        return
    lacking = ", ".join(f"operand {i} {fmt(names)}" for i, names in enumerate(all_names) if i not in having)
    raise NamesError(
        f"{op}: cannot contract over {n!r}: only operand {having[0]} {fmt(all_names[having[0]])} has it; "
        f"{lacking + ' lacks it' if lacking else 'it is the only operand'}. A dim in over= must be in at least two "
        f"operands: check the spelling or rename, and to sum one operand's dim write .sum({n!r})."
    )


@_cache
def outer(a: Names, b: Names, op: str = "outer") -> Names:
    """``outer(a, b)``: ``a + b``, which must not share a name."""
    for n in a:
        if n is not None and n in b:
            raise NamesError(
                f"{op}: {fmt(a)} and {fmt(b)} share the name {n!r}; an outer product needs distinct names "
                "(use nt.dot to treat it as a batch dim, or rename one)."
            )
    return validate(a + b, len(a) + len(b), op)


@_cache
def parse_einsum(spec: str, all_names: Tuple[Names, ...], op: str = "einsum") -> Tuple[Tuple[Names, ...], Names]:
    """Parse a by-name einsum spec such as ``"batch seq d, d out -> batch seq out"``.

    Operands are separated by ``,`` and their dims by spaces; each word is a dim
    name.  A spec with no spaces at all is read letter by letter as in NumPy
    (``"ij,jk->ik"``).  Each operand's names are refined with the spec's (an
    unnamed dim takes the spec's name, a named dim must match it).
    Returns the operands' names and the output names.
    """
    if "->" not in spec:
        raise ValueError(f"{op}: the spec {spec!r} needs '->' followed by the output dims.")
    if "..." in spec:
        raise ValueError(f"{op}: the spec {spec!r} uses '...', which a by-name spec does not support; name every dim.")
    lhs, rhs = spec.split("->", 1)
    compact = not any(ch.isspace() for ch in spec.strip())
    split = (lambda s: tuple(s.strip())) if compact else (lambda s: tuple(s.split()))
    inputs = [split(s) for s in lhs.split(",")]
    if len(inputs) != len(all_names):
        raise ValueError(f"{op}: the spec {spec!r} has {len(inputs)} operands but {len(all_names)} tensors were given.")
    refined = []
    for names, wanted in zip(all_names, inputs):
        if len(wanted) != len(names):
            raise NamesError(f"{op}: the spec gives {len(wanted)} dims {wanted!r} for an operand with names {fmt(names)}.")
        refined.append(refine(names, wanted, op))
    out = split(rhs)
    for n in out:
        if not any(n in names for names in refined):
            raise NamesError(f"{op}: the output dim {n!r} of {spec!r} is not a dim of any operand.")
    return tuple(refined), validate(out, len(out), op)


class RearrangePlan(NamedTuple):
    """What :func:`rearrange_plan` works out: the steps of ``nt.rearrange``/``reduce``/``repeat``.

    ``split_*``: the input with every dim of the pattern's left side split into its words (each
    dim named by its word; the dims under ``...`` keep their names); ``reduce_axes``: the axes of
    that layout to reduce; ``perm``: the order the remaining dims take (``perm_names`` theirs then); ``expand_*``: the layout
    with size-1 dims where the new words of ``repeat`` go, and ``full_shape`` their sizes; ``out_*``:
    the result, the right side's groups merged.
    """

    split_shape: Tuple[int, ...]
    split_names: Names
    reduce_axes: Tuple[int, ...]
    perm: Tuple[int, ...]
    perm_names: Names
    expand_shape: Tuple[int, ...]
    expand_names: Names
    full_shape: Tuple[int, ...]
    out_shape: Tuple[int, ...]
    out_names: Names


_GROUP_FIX = "write words, '...', groups '(a b)' and named groups 'name=(a b)'"


def _parse_side(side: str, pattern: str, op: str) -> Tuple:
    """One side of a rearrange pattern as items: a word (str), ``...``, or a group ``(label, words)``."""
    tokens = side.replace("(", " ( ").replace(")", " ) ").replace("=", " = ").split()
    items: list = []
    i = 0
    while i < len(tokens):
        label = None
        if i + 1 < len(tokens) and tokens[i + 1] == "=":
            label, i = tokens[i], i + 2
            if not label.isidentifier() or i >= len(tokens) or tokens[i] != "(":
                raise ValueError(f"{op}: in {pattern!r}, '=' must join a name and a group, as in 'embed=(head d)'.")
        tok = tokens[i]
        if tok == "(":
            close = tokens.index(")", i) if ")" in tokens[i:] else -1
            words = tuple(tokens[i + 1 : close])
            if close < 0 or not all(w.isidentifier() for w in words) or not words:
                raise ValueError(
                    f"{op}: in {pattern!r}, a group '(...)' must be closed and hold one or more words (no '...', "
                    f"nesting or numbers); {_GROUP_FIX}."
                )
            items.append((label, words))
            i = close + 1
        elif tok == "..." or tok.isidentifier():
            items.append(... if tok == "..." else tok)
            i += 1
        else:
            raise ValueError(
                f"{op}: {pattern!r} has {tok!r}, which is not a word; {_GROUP_FIX} (sizes go in keyword arguments)."
            )
    if items.count(...) > 1:
        raise ValueError(f"{op}: {pattern!r} has '...' twice on one side; it may stand once for the unlisted dims.")
    return tuple(items)


def _words(items: Tuple, pattern: str, op: str) -> Tuple[str, ...]:
    words = tuple(w for it in items if it is not ... for w in ((it,) if isinstance(it, str) else it[1]))
    for w in words:
        if words.count(w) > 1:
            raise ValueError(f"{op}: the word {w!r} appears twice on one side of {pattern!r}; each word is one dim.")
    return words


@_cache
def rearrange_plan(pattern: str, names: Names, shape: Tuple[int, ...], sizes: Tuple[Tuple[str, int], ...],
                   op: str = "rearrange") -> RearrangePlan:
    """The plan of ``nt.rearrange``, ``nt.reduce`` or ``nt.repeat`` (``op``) for ``pattern`` (einops'
    syntax, words being dim names) on a tensor of ``names`` and ``shape``, ``sizes`` being the
    keyword sizes as sorted ``(word, size)`` pairs.

    The left side's items name the input's dims in order, as ``refine_names`` does (an unnamed dim
    takes the word, a named one must carry it); ``...`` stands for the dims not listed, which keep
    their names.  A group ``(a b)`` on the left splits a dim (``name=(a b)`` also checks the dim's
    name), on the right merges dims into one, named only when written ``name=(a b)`` (a group of one
    word keeps that word).  ``rearrange`` keeps every word, ``reduce`` reduces the words missing on
    the right, ``repeat`` adds new words on the right (each needs its size).
    """
    shown = f"{pattern!r} on a tensor with names {fmt(names)} and shape {shape}"
    if pattern.count("->") != 1:
        raise ValueError(f"{op}: the pattern {pattern!r} needs one '->' between the input's dims and the output's.")
    left_side, right_side = pattern.split("->")
    left, right = _parse_side(left_side, pattern, op), _parse_side(right_side, pattern, op)
    left_words, right_words = _words(left, pattern, op), _words(right, pattern, op)
    if (... in left) != (... in right):
        raise ValueError(f"{op}: {pattern!r} has '...' on one side only; write it on both sides or on neither.")
    listed = len(left) - (... in left)
    if listed > len(names) or (... not in left and listed != len(names)):
        raise NamesError(
            f"{op}: the pattern's left side gives {listed} dims but the tensor has {len(names)}: {shown}. "
            "Give one word or group per dim, or '...' for the dims not listed."
        )
    at = left.index(...) if ... in left else listed
    rest = len(names) - listed
    ell = tuple(range(at, at + rest))
    ell_names = tuple(names[a] for a in ell)
    for w in left_words + right_words:
        if w in ell_names:
            raise NamesError(
                f"{op}: {w!r} is a word of the pattern and the name of dim {ell[ell_names.index(w)]}, which '...' "
                f"covers: {shown}. Name that dim in the pattern, or use another word."
            )
    given = dict(sizes)
    for w in given:
        if w not in left_words and w not in right_words:
            raise ValueError(f"{op}: the size {w}={given[w]} is for no word of {shown}; give sizes of words only.")
    elem: list = []  # (id, name, size) in the input's order: a word, or the int position of a dim under '...'
    axis_items = [it for it in left if it is not ...]
    for a, item in zip(tuple(range(at)) + tuple(range(at + rest, len(names))), axis_items):
        current = names[a]
        if isinstance(item, str):
            if current is not None and current != item:
                raise NamesError(
                    f"{op}: the pattern names dim {a} {item!r} but the tensor's dim {a} is named {current!r}: "
                    f"{shown}. Words name the dims in order, as refine_names does; use the dim's name, or rename it."
                )
            if item in given and given[item] != shape[a]:
                raise ValueError(f"{op}: {item}={given[item]} but dim {a} has size {shape[a]}: {shown}.")
            elem.append((item, item, shape[a]))
            continue
        label, words = item
        if label is not None and current is not None and current != label:
            raise NamesError(
                f"{op}: the pattern names dim {a} {label!r} (as {label}=(...)) but the tensor's dim {a} is named "
                f"{current!r}: {shown}. Use the dim's name, or leave the group unnamed."
            )
        unknown = [w for w in words if w not in given]
        known = 1
        for w in words:
            known *= given.get(w, 1)
        if len(unknown) > 1:
            raise ValueError(
                f"{op}: the sizes of {', '.join(unknown)} in the group ({' '.join(words)}) are unknown: {shown}. "
                f"Give all but one as keyword arguments, e.g. {unknown[0]}=..."
            )
        inferred = shape[a] // known if known and shape[a] % known == 0 else None
        if (unknown and inferred is None) or (not unknown and known != shape[a]):
            raise ValueError(
                f"{op}: the group ({' '.join(words)}) with sizes {dict((w, given[w]) for w in words if w in given)} "
                f"cannot split dim {a} of size {shape[a]}: {shown}."
            )
        elem.extend((w, w, given.get(w, inferred)) for w in words)
    elem[at:at] = [(k, ell_names[k], shape[a]) for k, a in enumerate(ell)]
    ids = [e[0] for e in elem]
    right_ids = []
    for item in right:
        right_ids.extend(range(rest) if item is ... else (item,) if isinstance(item, str) else item[1])
    dropped = [w for w in left_words if w not in right_words]
    new = [w for w in right_words if w not in left_words]
    if dropped and op != "reduce":
        raise ValueError(f"{op}: {', '.join(dropped)} on the left is missing on the right of {shown}; {op} keeps "
                         "every dim (to reduce dims use nt.reduce).")
    if new and op != "repeat":
        raise ValueError(f"{op}: {', '.join(new)} on the right is not on the left of {shown}; to add dims use "
                         "nt.repeat with their sizes.")
    for w in new:
        if w not in given:
            raise ValueError(f"{op}: the new dim {w!r} needs its size: {op}(t, {pattern!r}, {w}=...); {shown}.")
    reduce_axes = tuple(ids.index(w) for w in dropped)
    kept = [i for i in ids if i not in dropped]
    size = {e[0]: e[2] for e in elem}
    size.update((w, given[w]) for w in new)
    label_of = {e[0]: e[1] for e in elem}
    label_of.update((w, w) for w in new)
    right_kept = [i for i in right_ids if i in kept]
    out_shape: list = []
    out_names: list = []
    for item in right:
        if item is ...:
            out_shape.extend(size[k] for k in range(rest))
            out_names.extend(ell_names)
            continue
        label, words = (item, (item,)) if isinstance(item, str) else item
        merged = 1
        for w in words:
            merged *= size[w]
        out_shape.append(merged)
        out_names.append(label if label is not None or len(words) > 1 else words[0])
    try:
        out = validate(out_names, len(out_names), op)
    except NamesError:
        raise NamesError(
            f"{op}: the result's names {fmt(tuple(out_names))} would repeat a name: {shown}. Name the group "
            "differently."
        ) from None
    return RearrangePlan(
        split_shape=tuple(e[2] for e in elem),
        split_names=validate(tuple(e[1] for e in elem), len(elem), op),
        reduce_axes=reduce_axes,
        perm=tuple(kept.index(i) for i in right_kept),
        perm_names=validate(tuple(label_of[i] for i in right_kept), len(right_kept), op),
        expand_shape=tuple(1 if i in new else size[i] for i in right_ids),
        expand_names=validate(tuple(label_of[i] for i in right_ids), len(right_ids), op),
        full_shape=tuple(size[i] for i in right_ids),
        out_shape=tuple(out_shape),
        out_names=out,
    )


# --------------------------------------------------------------------------- indexing


def index(names: Names, key: Tuple, op: str = "getitem") -> Names:
    """Output names of positional indexing with a normalised key.

    ``key`` is a tuple of tokens, one per index item, with ``...`` already expanded:
    ``("int",)`` drops a dim, ``("slice",)`` keeps it, ``("new",)`` inserts an unnamed
    dim, ``("array", names_of_index)`` is an integer-array index, and
    ``("mask", k, names_of_mask)`` is a boolean mask over ``k`` dims, and ``("sep",)`` is
    a ``...`` that covers no dim (it still separates advanced indices).  Advanced indices
    follow NumPy's placement: adjacent ones put their result where the first was,
    separated ones put it in front.  The advanced result takes the index tensors'
    names (rule 2 among them); a lone unnamed 1-D integer index keeps the dim's name
    (it selects from that dim); a boolean mask gives one unnamed dim.
    """
    return _index(names, key, op)[0]


@_cache
def _index(names: Names, key: Tuple, op: str) -> Tuple[Names, Tuple[int, ...]]:
    """:func:`index`'s names, and for each output dim the input axis it comes from (-1: none)."""
    out: list = []
    srcs: list = []
    adv_names: list = []
    src = 0
    for tok in key:
        kind = tok[0]
        if kind == "int":
            src += 1
        elif kind == "slice":
            out.append(names[src])
            srcs.append(src)
            src += 1
        elif kind == "new":
            out.append(None)
            srcs.append(-1)
        elif kind == "array":
            adv_names.append((tok[1], names[src], src))
            out.append(_ADV)
            srcs.append(-1)
            src += 1
        elif kind == "mask":
            k = tok[1]
            mask_names = tok[2]
            own = names[src : src + k]
            try:
                unify(own, mask_names, op)
            except NamesError:
                raise NamesError(
                    f"{op}: dims {fmt(own)} and {fmt(mask_names)} do not match: a boolean mask's names must match "
                    f"those of the dims it indexes (dims {src} to {src + k - 1} of {fmt(names)}; None matches any "
                    "name). Rename the mask, or index by name."
                ) from None
            adv_names.append(((None,), None, -1))
            out.append(_ADV)
            srcs.append(-1)
            src += k
    out.extend(names[src:])
    srcs.extend(range(src, len(names)))
    if not adv_names:
        return validate(out, len(out), op), tuple(srcs)
    if len(adv_names) == 1:
        idx_names, dim_name, dim_src = adv_names[0]
        if len(idx_names) == 1 and idx_names[0] is None:
            res, res_srcs = (dim_name,), (dim_src,)
        else:
            res, res_srcs = idx_names, (-1,) * len(idx_names)
    else:
        res = unify_all([n for n, _, _ in adv_names], op)
        res_srcs = (-1,) * len(res)
    # as in NumPy, an int next to index arrays is an advanced index too: it counts for adjacency
    adv = [i for i, tok in enumerate(key) if tok[0] in ("int", "array", "mask")]
    adjacent = adv == list(range(adv[0], adv[0] + len(adv)))
    rest = [(n, s) for n, s in zip(out, srcs) if n is not _ADV]
    pos = sum(1 for tok in key[: adv[0]] if tok[0] in ("slice", "new")) if adjacent else 0
    final = rest[:pos] + list(zip(res, res_srcs)) + rest[pos:]
    final_names = [n for n, _ in final]
    try:
        return validate(final_names, len(final_names), op), tuple(s for _, s in final)
    except NamesError:
        raise NamesError(
            f"{op}: indexing {fmt(names)} with index tensors named "
            f"{', '.join(fmt(n) for n, _, _ in adv_names)} would repeat a name in the result "
            f"{fmt(tuple(final_names))}; rename the index tensor."
        ) from None


@_cache
def setitem(names: Names, key: Tuple, value: Names, op: str = "setitem") -> Names:
    """Self's names after ``t[key] = value`` (``key`` normalised as for :func:`index`).

    The value's names unify with the indexed region's (the names ``t[key]`` has, rule 2).
    As in the other in-place ops they may fill self's ``None`` dims: a name the value gives
    to an unnamed region dim that is one of self's dims (a sliced dim, or the dim a lone
    unnamed 1-D index picks from) becomes that dim's name.  Region dims that are not
    self's (``None`` insertions, masks, named index tensors) have nothing to fill.
    """
    region, sources = _index(names, key, op)
    if len(value) > len(region):
        raise ValueError(
            f"{op}: the value has more dims {fmt(value)} than the indexed part {fmt(region)} of the tensor "
            f"{fmt(names)}; it must broadcast onto that part."
        )
    filled = inplace(region, value, op)
    if filled == region:
        return names
    out = list(names)
    for old, new, s in zip(region, filled, sources):
        if old != new and s >= 0:
            out[s] = new
    try:
        return validate(out, len(out), op)
    except NamesError:
        raise NamesError(
            f"{op}: a value with names {fmt(value)} would name dims of {fmt(names)} so that a name repeats "
            f"({fmt(tuple(out))}); the value's names fill self's unnamed dims and must not name another "
            "of its dims. Rename the value."
        ) from None


class _AdvancedSlot:
    """Placeholder for where the advanced-index result dims go."""

    def __repr__(self) -> str:
        return "<advanced>"


_ADV = _AdvancedSlot()


@_cache
def gather(names: Names, ax: int, index_names: Names, op: str = "gather") -> Names:
    """``gather(t, dim, idx)``: idx has t's ndim; the output has idx's shape.

    Dims other than ``dim`` unify position by position; at ``dim`` the index's name
    wins (it may pick along a dim with a new meaning, e.g. ``"k"`` for top-k).
    """
    if len(index_names) != len(names):
        raise ValueError(
            f"{op}: the index must have the same number of dims as the input: {fmt(index_names)} vs {fmt(names)}."
        )
    others_a = names[:ax] + names[ax + 1 :]
    others_b = index_names[:ax] + index_names[ax + 1 :]
    for x, y in zip(others_a, others_b):
        if x is not None and y is not None and x != y:
            raise NamesError(
                f"{op}: the index's names {fmt(index_names)} do not match the input's {fmt(names)} "
                f"outside dim {ax}: {x!r} vs {y!r}."
            )
    at = index_names[ax] if index_names[ax] is not None else names[ax]
    out = [x if x is not None else y for x, y in zip(others_a, others_b)]
    out.insert(ax, at)
    return validate(out, len(out), op)


@_cache
def index_select(names: Names, ax: int, index: Names, op: str = "index_select") -> Names:
    """Selecting along ``ax`` with a 1-D index: a named index's name replaces the dim's, an unnamed
    index keeps it (it picks entries of the same dim)."""
    return replace(names, ax, index if index[0] is not None else (names[ax],), op)


@_cache
def replace(names: Names, ax: int, new: Names, op: str) -> Names:
    """``names`` with the dim at ``ax`` replaced by the dims ``new``."""
    out = names[:ax] + new + names[ax + 1 :]
    try:
        return validate(out, len(out), op)
    except NamesError:
        raise NamesError(
            f"{op}: replacing {_dim_label(names, ax)} of {fmt(names)} by {fmt(new)} would repeat a name; "
            "rename the index tensor."
        ) from None


@_cache
def masked(names: Names, mask: Names, op: str = "masked_fill") -> Names:
    """``masked_fill``: the mask broadcasts onto self (no more dims); names unify (rule 2)."""
    if len(mask) > len(names):
        raise ValueError(
            f"{op}: the mask has more dims {fmt(mask)} than the tensor {fmt(names)}; it must broadcast onto the tensor."
        )
    return unify(names, mask, op)


@_cache
def diagonal(names: Names, d1: Hashable, d2: Hashable, out_name: Name,
             op: str = "diagonal") -> Tuple[int, int, Names]:
    """``diagonal(dim1, dim2, out_name)``: both dims go and the diagonal becomes a new last dim named
    ``out_name`` (unnamed by default: the diagonal of 'row' and 'col' is neither); ``(axis1, axis2, names)``."""
    a, b = axis(names, d1, op), axis(names, d2, op)
    if a == b:
        raise ValueError(
            f"{op}: dim1 and dim2 are the same dim, {_dim_label(names, a)} of {fmt(names)}; a diagonal needs two "
            "different dims."
        )
    _check_name(out_name, op)
    rest = tuple(n for i, n in enumerate(names) if i not in (a, b))
    if out_name is not None and out_name in rest:
        raise NamesError(
            f"{op}: out_name {out_name!r} is already a dim of the result {fmt(rest)} (diagonal of "
            f"{_dim_label(names, a)} and {_dim_label(names, b)} of {fmt(names)}); choose another name."
        )
    return a, b, validate(rest + (out_name,), len(rest) + 1, op)


@_cache
def cdist(a: Names, b: Names, op: str = "cdist") -> Names:
    """``cdist(x1, x2)``: ``(..., P, M)`` and ``(..., R, M)`` give ``(..., P, R)``.  The batch dims unify
    (rule 2); the feature dims ``M`` are summed over, so their names must be equal where both are
    named; the row dims keep their names, which must differ (they become two dims of the output)."""
    if len(a) < 2 or len(b) < 2:
        raise ValueError(
            f"{op}: both operands need at least 2 dims (..., rows, features), got {fmt(a)} and {fmt(b)}."
        )
    fa, fb = a[-1], b[-1]
    if fa is not None and fb is not None and fa != fb:
        raise NamesError(
            f"{op}: the feature dims differ: {fa!r} (last dim of {fmt(a)}) vs {fb!r} (last dim of {fmt(b)}). "
            "The distance sums over the feature dim of both; rename one of them if they really are the same dim."
        )
    for f, other in ((fa, b[:-1]), (fb, a[:-1])):
        if f is not None and f in other:
            raise _misaligned(op, a, b, f, "The feature dim of one operand is another dim of the other; rename one.")
    if a[-2] is not None and a[-2] == b[-2]:
        raise NamesError(
            f"{op}: both row dims are named {a[-2]!r} ({fmt(a)} and {fmt(b)}), but they become two dims of the "
            f"output; rename one of them, e.g. x2.rename({a[-2]}='{a[-2]}2')."
        )
    out = unify(a[:-2], b[:-2], op) + (a[-2], b[-2])
    try:
        return validate(out, len(out), op)
    except NamesError:
        raise NamesError(
            f"{op}: the output {fmt(out)} of {fmt(a)} and {fmt(b)} would repeat a name: a row dim has the name "
            "of a batch dim; rename one of them."
        ) from None


@_cache
def inplace(self_names: Names, other: Names, op: str) -> Names:
    """In-place ops: the result keeps self's dims; other's names may only fill self's ``None`` dims."""
    if len(other) > len(self_names):
        raise ValueError(
            f"{op}: the other operand {fmt(other)} has more dims than self {fmt(self_names)}; "
            "an in-place op cannot grow self."
        )
    return unify(self_names, other, op)


def grad_names_error(op: str, what: str, names: Names, g_names: Names) -> NamesError:
    """A gradient whose names are not its tensor's (``what``: how the message calls the tensor)."""
    return NamesError(
        f"{op}: the gradient's names {fmt(g_names)} differ from the {what}'s names {fmt(names)}; "
        "a gradient has exactly the names of its tensor (rename or align_as it first)."
    )


# --------------------------------------------------------------------------- attention


def _qkv(q: Names, k: Names, v: Names, mask: Optional[Names] = None) -> str:
    """The operands of attention as they read in messages."""
    out = f"q {fmt(q)}, k {fmt(k)}, v {fmt(v)}"
    return out if mask is None else f"{out}, mask {fmt(mask)}"


@_cache
def attention(q: Names, k: Names, v: Names, dim: str, key_dim: str, query_dim: Optional[str] = None,
              op: str = "scaled_dot_product_attention") -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...],
                                                                 Names, Names]:
    """Plan attention by name: ``(q_src, k_src, v_src, out_names, weights_names)``.

    ``dim`` is the feature dim q and k contract; ``key_dim`` the keys' sequence dim (in k and v).
    The query's sequence dim is ``query_dim``, or else the one dim of q that is neither ``dim``
    nor a dim of k.  q's other dims are batch dims; k and v have some of them (matched by name,
    any order; a missing one broadcasts, as in multi-query attention), ``key_dim`` and, for v,
    one value-feature dim.  The ``*_src`` tuples align each operand to its working layout
    ``(batch..., seq, dim)``, ``(batch..., key_dim, dim)``, ``(batch..., key_dim, value)``: entry
    ``j`` is the operand's axis at position ``j``, or ``-1`` for a size-1 dim the operand lacks.
    The output, laid out like q, is named ``out_names``: q's names with ``dim`` replaced in place by
    v's value-feature name.  ``weights_names`` are the batch dims in q's order, then ``(seq, key_dim)``.

    The dims are inferred by :func:`attention_dims`, the layouts planned by :func:`attention_layout`.
    """
    batch, seq, value = attention_dims(q, k, v, dim, key_dim, query_dim, op)
    return attention_layout(q, k, v, dim, key_dim, batch, seq, value)


@_cache
def attention_dims(q: Names, k: Names, v: Names, dim: str, key_dim: str, query_dim: Optional[str] = None,
                   op: str = "scaled_dot_product_attention") -> Tuple[Names, str, str]:
    """Which dim of attention's operands is which: ``(batch, seq, value)``.

    ``batch`` are q's dims other than ``dim`` and the queries' sequence dim ``seq`` (in q's order),
    ``value`` is v's value-feature dim.  Every check of :func:`attention` is made here, in the order
    its errors are reported: the names, the arguments, the queries' sequence dim, k's and v's dims.
    """
    ops = _qkv(q, k, v)
    _attention_named(q, k, v, ops, op)
    for n in (dim, key_dim, query_dim):
        _check_name(n, op)
    _attention_contracted(q, k, v, dim, key_dim, ops, op)
    seq = _query_dim(q, k, dim, query_dim, ops, op)
    batch = tuple(n for n in q if n != dim and n != seq)
    _key_dims(k, batch, dim, key_dim, ops, op)
    return batch, seq, _value_dim(v, batch, key_dim, seq, dim, ops, op)


def _attention_named(q: Names, k: Names, v: Names, ops: str, op: str) -> None:
    """Every dim of q, k and v is named: attention matches them by name."""
    for label, names in (("q", q), ("k", k), ("v", v)):
        if None in names:
            raise NamesError(
                f"{op}: attention matches q, k and v by name, but dim {names.index(None)} of {label} is unnamed "
                f"({ops}). Name it with refine_names."
            )


def _attention_contracted(q: Names, k: Names, v: Names, dim: str, key_dim: str, ops: str, op: str) -> None:
    """``dim`` is in q and k, ``key_dim`` in k and v and not in q, and they differ."""
    if dim == key_dim:
        raise NamesError(
            f"{op}: dim={dim!r} (the feature dim q and k contract) and key_dim={key_dim!r} (the keys' sequence "
            f"dim) must be different dims ({ops})."
        )
    for label, names in (("q", q), ("k", k)):
        if dim not in names:
            raise NamesError(
                f"{op}: dim={dim!r} must be the feature dim that q and k share and contract, but {label} has no "
                f"dim {dim!r} ({ops}). Pass dim= the name of that dim, or rename it in {label}."
            )
    for label, names in (("k", k), ("v", v)):
        if key_dim not in names:
            raise NamesError(
                f"{op}: key_dim={key_dim!r} must be the keys' sequence dim, in k and v, but {label} has no dim "
                f"{key_dim!r} ({ops}). Pass key_dim= the name of that dim, or rename it in {label}."
            )
    if key_dim in q:
        raise NamesError(
            f"{op}: key_dim={key_dim!r} is also a dim of q ({ops}): the queries' and the keys' sequence dims "
            f"need different names, e.g. k.rename({key_dim}='key'), v.rename({key_dim}='key') and key_dim='key'."
        )


def _query_dim(q: Names, k: Names, dim: str, query_dim: Optional[str], ops: str, op: str) -> str:
    """The queries' sequence dim: ``query_dim`` checked, or the one dim of q that is neither ``dim`` nor in k."""
    if query_dim is not None:
        if query_dim not in q or query_dim == dim:
            raise NamesError(
                f"{op}: query_dim={query_dim!r} must be the queries' sequence dim, a dim of q other than "
                f"dim={dim!r} ({ops})."
            )
        if query_dim in k:
            raise NamesError(
                f"{op}: query_dim={query_dim!r} is also a dim of k ({ops}): the keys' sequence dim needs its "
                f"own name, passed as key_dim."
            )
        return query_dim
    candidates = tuple(n for n in q if n != dim and n not in k)
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        raise NamesError(
            f"{op}: cannot infer the queries' sequence dim: it is the dim of q that is neither dim={dim!r} nor a "
            f"dim of k, and q has none ({ops}). Give q a sequence dim that k lacks."
        )
    raise NamesError(
        f"{op}: cannot infer the queries' sequence dim: q has {len(candidates)} dims that are neither "
        f"dim={dim!r} nor dims of k: {', '.join(repr(n) for n in candidates)} ({ops}). Pass query_dim= "
        "to say which it is (the others are then batch dims that k and v lack and broadcast over, as in "
        "multi-query attention), or give k and v the batch dims."
    )


def _key_dims(k: Names, batch: Names, dim: str, key_dim: str, ops: str, op: str) -> None:
    """k has only q's batch dims, ``key_dim`` and ``dim``."""
    for n in k:
        if n not in batch and n != key_dim and n != dim:
            raise NamesError(
                f"{op}: k's dim {n!r} is not a batch dim of q ({ops}): k's dims must be among q's batch dims "
                f"{fmt(batch)}, key_dim={key_dim!r} and dim={dim!r}. Rename or remove it."
            )


def _value_dim(v: Names, batch: Names, key_dim: str, seq: str, dim: str, ops: str, op: str) -> str:
    """v's one value-feature dim: its dim other than q's batch dims and ``key_dim``, not named ``seq``."""
    features = tuple(n for n in v if n not in batch and n != key_dim)
    if len(features) != 1:
        found = ", ".join(repr(n) for n in features) if features else "none"
        raise NamesError(
            f"{op}: v must have exactly one value-feature dim besides q's batch dims {fmt(batch)} and "
            f"key_dim={key_dim!r}; found {found} ({ops}). Rename v's dims to match."
        )
    value = features[0]
    if value == seq:
        raise NamesError(
            f"{op}: v's value-feature dim {value!r} is the queries' sequence dim, so the output would name two "
            f"dims {value!r} ({ops}). Rename v's feature dim (e.g. to {dim!r})."
        )
    return value


@_cache
def attention_layout(q: Names, k: Names, v: Names, dim: str, key_dim: str, batch: Names, seq: str,
                     value: str) -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], Names, Names]:
    """The layouts of :func:`attention` once its dims are known (:func:`attention_dims`); no checks.

    ``(q_src, k_src, v_src, out_names, weights_names)``: each ``*_src`` takes its operand to its
    working layout (:func:`_sources`), the output is q's names with ``dim`` replaced by ``value``,
    and the weights are named ``batch + (seq, key_dim)``.
    """
    q_src = _sources(q, batch + (seq, dim))
    k_src = _sources(k, batch + (key_dim, dim))
    v_src = _sources(v, batch + (key_dim, value))
    out_names = tuple(value if n == dim else n for n in q)
    return q_src, k_src, v_src, out_names, batch + (seq, key_dim)


def _sources(names: Names, layout: Names) -> Tuple[int, ...]:
    """For each dim of ``layout``, its axis in ``names``, or ``-1`` where ``names`` lacks it (a size-1 dim)."""
    return tuple(names.index(n) if n in names else -1 for n in layout)


@_cache
def attention_mask(mask: Names, weights: Names, q: Names, k: Names, v: Names,
                   op: str = "scaled_dot_product_attention") -> Tuple[int, ...]:
    """Align an attention mask to the weights by name: for each weights dim, the mask's axis or ``-1``.

    Every dim of the mask is named and is one of the weights' dims (any subset, any order); the
    dims it lacks broadcast.
    """
    ops = _qkv(q, k, v, mask)
    for i, n in enumerate(mask):
        if n is None:
            raise NamesError(
                f"{op}: the mask is aligned to the attention weights {fmt(weights)} by name, but its dim {i} is "
                f"unnamed ({ops}). Name it with refine_names."
            )
        if n not in weights:
            raise NamesError(
                f"{op}: the mask's dim {n!r} is not a dim of the attention weights {fmt(weights)} ({ops}): a mask "
                "is aligned by name, so its names must be among the weights' (q's batch dims, the queries' and the "
                "keys' sequence dims). Rename it, or remove it."
            )
    return tuple(mask.index(n) if n in mask else -1 for n in weights)


def _same_dim(a: Name, b: Name, what: str, ops: str, op: str) -> Name:
    """The name of a dim that two operands share by position: equal where both are named."""
    if a is not None and b is not None and a != b:
        raise NamesError(f"{op}: {what} are the same dim by position but named {a!r} and {b!r} ({ops}). "
                         "Rename one of them, or give the dims by name with dim= and key_dim=.")
    return b if a is None else a


@_cache
def attention_positional(q: Names, k: Names, v: Names, mask: Optional[Names],
                         op: str = "scaled_dot_product_attention") -> Tuple[Names, Tuple[int, ...],
                                                                            Tuple[int, ...], Tuple[int, ...],
                                                                            Optional[Tuple[int, ...]], Names, Names]:
    """PyTorch's attention by position: ``(q_names, q_src, k_src, v_src, m_src, out_names, weights_names)``.

    The output is laid out like q, so q takes the batch dims it broadcasts: ``q_names`` are its names
    with unnamed size-1 dims in front where it has fewer dims than the output (q itself where not).

    q is ``(..., L, E)``, k ``(..., S, E)``, v ``(..., S, Ev)`` and the mask broadcasts to the weights
    ``(..., L, S)``; the batch dims broadcast from the right and their names unify (rule 2), q's and
    k's ``E`` and k's and v's ``S`` must be equal where both are named, and each mask dim's name
    equals the weights' at its position or one is ``None``.  The ``*_src`` tuples are as in
    :func:`attention` (``m_src`` is None without a mask); the output is named ``batch + (L, Ev)``.
    """
    ops = _qkv(q, k, v, mask)
    for label, names in (("q", q), ("k", k), ("v", v)):
        if len(names) < 2:
            raise ValueError(f"{op}: {label} must have at least 2 dims, (..., L, E) for q, (..., S, E) for k and "
                             f"(..., S, Ev) for v ({ops}).")
    nb = max(len(q), len(k), len(v)) - 2
    if mask is not None and len(mask) > nb + 2:
        raise ValueError(f"{op}: the mask has {len(mask)} dims, more than the attention weights (..., L, S) have "
                         f"({nb + 2}; {ops}).")
    batch = unify_all(tuple((None,) * (nb - len(t) + 2) + t[:-2] for t in (q, k, v)), op)
    _same_dim(q[-1], k[-1], "q's and k's last dims (the features they contract)", ops, op)
    key = _same_dim(k[-2], v[-2], "k's and v's second-to-last dims (the keys)", ops, op)
    weights = batch + (q[-2], key)
    m_src = None
    if mask is not None:
        lead = nb + 2 - len(mask)
        for i, n in enumerate(mask):
            _same_dim(weights[lead + i], n, f"the mask's dim {i} and the weights' dim {lead + i}", ops, op)
        m_src = (-1,) * lead + tuple(range(len(mask)))
    out = validate(batch + (q[-2], v[-1]), nb + 2, op)
    k_src, v_src = ((-1,) * (nb + 2 - len(t)) + tuple(range(len(t))) for t in (k, v))
    q_names = (None,) * (nb + 2 - len(q)) + q if len(q) < nb + 2 else q
    return q_names, tuple(range(nb + 2)), k_src, v_src, m_src, out, weights


# --------------------------------------------------------------------------- fused layers and losses


@_cache
def match(expected: Names, got: Names, op: str, what: str, wanted: str) -> Optional[Tuple[int, ...]]:
    """How an operand that must have the dims ``expected`` (a loss's target, a norm's weight) lines up with them.

    ``None`` when it lines up dim by dim (equal names, or one of them ``None``: rule 2); else, when
    every dim of both is named and the names are the same, the permutation ``perm`` with
    ``got[perm[j]] == expected[j]`` (it is matched by name, in any order).  Anything else is a
    NamesError; ``what`` is how the message calls the operand, ``wanted`` what ``expected`` are.
    ``got`` has as many dims as ``expected`` (the caller checks).
    """
    try:
        unify(expected, got, op)
        return None
    except NamesError:
        pass
    if None not in expected and None not in got and set(expected) == set(got):
        return tuple(got.index(n) for n in expected)
    raise NamesError(
        f"{op}: {what} has names {fmt(got)} but must have {wanted} {fmt(expected)}: matched by name in any "
        "order when every dim is named, else dim by dim with None matching any name (rule 2). "
        f"Rename {what}'s dims (rename/refine_names) so that they match."
    )


@_cache
def linear(x: Names, w: Names, bias: Optional[Names], dim: Hashable, out_dim: Name,
           op: str = "linear") -> Tuple[int, Names]:
    """``linear(x, w, bias, dim=, out_dim=)``: the axis of x contracted and the output names.

    The weight is named ``(out, in)``.  ``dim`` (default: ``in`` if named, else x's last dim) is
    contracted with ``in``; both must be equal where both are named.  The output has x's names with
    ``dim`` replaced in place by ``out_dim`` (default: ``out``), which must not be another dim of x.
    The bias is ``(out,)`` (or ``(out_dim,)``, or unnamed).
    """
    w_out, w_in = w
    if dim is None:
        if w_in is not None and w_in not in x:
            raise NamesError(
                f"{op}: the weight {fmt(w)} contracts {w_in!r}, but the input {fmt(x)} has no dim {w_in!r}. "
                "Pass dim= naming the input's dim to contract, or rename the weight's second dim."
            )
        dim = -1 if w_in is None else w_in
    ax = axis(x, dim, op)
    if x[ax] is not None and w_in is not None and x[ax] != w_in:
        raise NamesError(
            f"{op}: the input {fmt(x)} is contracted over {_dim_label(x, ax)}, but the weight {fmt(w)} "
            f"contracts {w_in!r}: a weight is named (out, in), with in the contracted dim's name. "
            f"Rename the weight's second dim to {x[ax]!r}, or pass the dim it names."
        )
    out_name = w_out if out_dim is None else out_dim
    _check_name(out_name, op)
    if out_name is not None and out_name in x[:ax] + x[ax + 1 :]:
        raise NamesError(
            f"{op}: the output dim would be named {out_name!r}, which is already another dim of the input "
            f"{fmt(x)} (weight {fmt(w)}); pass out_dim= a new name, or rename the weight's first dim."
        )
    if bias is not None and bias[0] is not None and bias[0] not in (w_out, out_name):
        raise NamesError(
            f"{op}: the bias {fmt(bias)} must be named like the output dim {out_name!r} (weight {fmt(w)}, "
            f"input {fmt(x)}); rename the bias."
        )
    out = x[:ax] + (out_name,) + x[ax + 1 :]
    return ax, validate(out, len(out), op)


@_cache
def embedding(indices: Names, w: Names, dim: Hashable, op: str = "embedding") -> Tuple[int, Names]:
    """``embedding(indices, w, dim=)``: the weight's axis indexed (``dim``, default its first) and the
    output names, the indices' plus the weight's other (embedding) name, last."""
    wax = 0 if dim is None else axis(w, dim, op)
    embed = w[1 - wax]
    if embed is not None and embed in indices:
        raise NamesError(
            f"{op}: the indices {fmt(indices)} already have a dim named {embed!r}, the embedding dim of the "
            f"weight {fmt(w)}; rename the indices' dim or the weight's."
        )
    out = indices + (embed,)
    return wax, validate(out, len(out), op)


def _spatial_plan(x: Names, n: int, dim: Hashable, spatial: Hashable, op: str) -> Tuple[Tuple[int, ...], int, int]:
    """``(perm, ch, nb)`` for an ``n``-d sliding-window op: ``perm`` lists x's batch axes, then the
    channel axis ``ch`` (-1: none), then the spatial axes; ``nb`` counts the batch axes.  Without
    ``spatial`` the spatial dims are x's last ``n`` other than the channel dim."""
    ch = -1 if dim is None else axis(x, dim, op)
    if spatial is None:
        sp = tuple(i for i in range(len(x)) if i != ch)[-n:]
    else:
        sp = axes(x, spatial, op)
    if len(sp) != n:
        raise NamesError(f"{op}: needs {n} spatial dim(s), got {spatial!r} for the input {fmt(x)}; "
                         f"pass spatial= with {n} dim name(s).")
    if ch in sp:
        raise NamesError(f"{op}: {_dim_label(x, ch)} of the input {fmt(x)} cannot be both the channel dim and a "
                         "spatial dim; pass different dims as dim= and spatial=.")
    batch = tuple(i for i in range(len(x)) if i != ch and i not in sp)
    return batch + ((ch,) if ch >= 0 else ()) + sp, ch, len(batch)


@_cache
def conv(x: Names, w: Names, bias: Optional[Names], n: int, dim: Hashable, spatial: Hashable, out_dim: Name,
         op: str = "conv", transposed: bool = False) -> Tuple[Tuple[int, ...], int, Names]:
    """``conv(x, w, bias, dim=, spatial=, out_dim=)``: ``(perm, nb, names)``, x's batch axes then its
    channel axis then its spatial axes (``nb`` batch axes), and the output names.

    ``dim`` is the channel dim (default: the dim before the last ``n``), ``spatial`` the ``n`` spatial
    dims in the kernel's order (default: the last ``n``).  The weight is ``(out, in, *kernel)``: ``in``
    must be the channel dim's name and each kernel dim its spatial dim's, where both are named.  The
    output has x's names, the channel dim renamed to ``out_dim`` if given; the bias is ``(out,)``,
    ``(out_dim,)`` or unnamed.  A ``transposed`` convolution's weight is ``(in, out, *kernel)``.
    """
    w_in, w_out = (w[0], w[1]) if transposed else (w[1], w[0])
    layout = "(in, out, *kernel)" if transposed else "(out, in, *kernel)"
    if dim is None:
        dim = len(x) - n - 1
        if dim < 0:
            raise NamesError(f"{op}: the input {fmt(x)} needs a channel dim and {n} spatial dim(s).")
    perm, ch, nb = _spatial_plan(x, n, dim, spatial, op)
    for wn, ax in zip((w_in,) + w[2:], perm[nb:]):
        if wn is not None and x[ax] is not None and wn != x[ax]:
            raise NamesError(
                f"{op}: the weight {fmt(w)} is {layout}, but its {wn!r} meets the input's "
                f"{_dim_label(x, ax)} (input {fmt(x)}, channel dim then spatial dims {tuple(x[a] for a in perm[nb:])}); "
                "rename the weight's dims to the input's, or pass dim= and spatial= naming them."
            )
    out_name = x[ch] if out_dim is None else out_dim
    _check_name(out_name, op)
    if out_name is not None and out_name in x[:ch] + x[ch + 1:]:
        raise NamesError(f"{op}: the output channel dim would be named {out_name!r}, which is already another dim "
                         f"of the input {fmt(x)}; pass out_dim= a new name.")
    if bias is not None and bias[0] is not None and bias[0] not in (w_out, out_name):
        raise NamesError(f"{op}: the bias {fmt(bias)} must be named like the weight's output dim {w_out!r} or the "
                         f"output channel dim {out_name!r} (input {fmt(x)}); rename the bias.")
    out = x[:ch] + (out_name,) + x[ch + 1:]
    return perm, nb, validate(out, len(out), op)


@_cache
def pool(x: Names, n: int, spatial: Hashable, op: str = "pool") -> Tuple[int, ...]:
    """The permutation putting x's other dims first, then its ``n`` spatial dims (default: the last
    ``n``) in the window's order; a pooling op's output keeps x's names."""
    return _spatial_plan(x, n, None, spatial, op)[0]


@_cache
def class_target(logits: Names, ax: int, target: Names, probs: bool,
                 op: str = "cross_entropy") -> Tuple[Optional[Tuple[int, ...]], Optional[Tuple[int, ...]], Names]:
    """Plan a loss's target against its logits, whose class dim is at ``ax``.

    Class indices (``probs`` false) have the logits' dims without the class dim, class probabilities
    all of them; either is matched by :func:`match`.  Returns ``(perm, out_perm, out_names)``: ``perm``
    puts the target's dims in the logits' order (``None``: they are), ``out_perm`` puts the per-element
    loss (the logits' dims without the class dim, in their order) in the target's order (``None``: it
    is), and ``out_names`` are the names of that loss (``reduction="none"``): the target's dims (without
    the class dim), with ``None`` filled by the logits' names.
    """
    rest = logits[:ax] + logits[ax + 1 :]
    expected = logits if probs else rest
    wanted = ("the logits' names" if probs else
              f"the logits' names without the class dim {_dim_label(logits, ax)}, of {fmt(logits)},")
    perm = match(expected, target, op, "the target", wanted)
    if perm is None:
        full = unify(expected, target, op)
        out = full[:ax] + full[ax + 1 :] if probs else full
        return None, None, validate(out, len(out), op)
    order = tuple(n for n in target if n != logits[ax]) if probs else target
    out_perm = tuple(rest.index(n) for n in order)
    return perm, (None if out_perm == tuple(range(len(out_perm))) else out_perm), order


@_cache
def normalized(x: Names, dims: Hashable, op: str) -> Tuple[Tuple[int, ...], Names]:
    """A normalisation's axes (sorted) and their names in x's order: what its weight and bias are matched to."""
    axs = tuple(sorted(axes(x, dims, op)))
    if not axs:
        raise ValueError(f"{op}: give at least one dim to normalise over (the input has names {fmt(x)}).")
    return axs, tuple(x[a] for a in axs)


@_cache
def channel_norm(x: Names, dim: Hashable, batch: Hashable, params: Tuple[Optional[Names], ...],
                 op: str) -> Tuple[int, Tuple[int, ...]]:
    """``batch_norm``/``group_norm``: ``(ch, batch_axes)``, the channel axis and the axes whose entries keep
    separate statistics.  ``dim`` is the channel dim (default: 1, PyTorch's ``(N, C, *)``); ``batch`` the
    separate dims (``()`` for batch_norm; for group_norm default the first dim, PyTorch's N).  Each of
    ``params`` (weight, bias, running stats; ``None`` where absent) is one dim named like the channel or unnamed.
    """
    if dim is None and len(x) < 2:
        raise ValueError(f"{op}: the input {fmt(x)} must be (N, C, *) with at least 2 dims; pass dim= naming "
                         "the channel dim for other layouts.")
    ch = axis(x, 1 if dim is None else dim, op)
    if batch is None:
        batch = 0 if ch else ()
    bx = axes(x, batch, op)
    if ch in bx:
        raise NamesError(f"{op}: {_dim_label(x, ch)} of the input {fmt(x)} cannot be both the channel dim and a "
                         "batch dim; pass different dims as dim= and batch=.")
    for p in params:
        if p is not None and len(p) != 1:
            raise ValueError(f"{op}: the weight, bias and running statistics must have one dim, the channel "
                             f"dim {_dim_label(x, ch)} of the input {fmt(x)}, got names {fmt(p)}.")
        if p is not None and p[0] is not None and x[ch] is not None and p[0] != x[ch]:
            raise NamesError(f"{op}: a parameter named {fmt(p)} meets the channel dim {_dim_label(x, ch)} of the "
                             f"input {fmt(x)}; rename the parameter, or pass dim= naming the channel dim.")
    return ch, tuple(sorted(bx))


@_cache
def quant_channel(x: Names, dim: Hashable, params: Tuple[Names, ...], op: str) -> int:
    """Per-channel quantization: the axis of the channel dim ``dim`` (a name or an int) of ``x``, whose
    scales and zero points (``params``) are one dim each, named like it or unnamed."""
    ch = axis(x, dim, op)
    for p in params:
        if len(p) != 1:
            raise ValueError(f"{op}: the scales and zero points must have one dim, the channel dim "
                             f"{_dim_label(x, ch)} of the input {fmt(x)}, got names {fmt(p)}.")
        if p[0] is not None and x[ch] is not None and p[0] != x[ch]:
            raise NamesError(f"{op}: scales or zero points named {fmt(p)} meet the channel dim {_dim_label(x, ch)} "
                             f"of the input {fmt(x)}; name them like it (or pass dim= naming their dim).")
    return ch


@_cache
def match_spec(names: Names, spec: Tuple) -> Optional[Tuple[int, ...]]:
    """Match a tensor's names against a declared spec (:mod:`namedtensor.checking`).

    ``spec`` holds names, ``None`` (an unnamed dim) and at most one ``...`` (any run of dims,
    possibly empty).  Order matters.  Returns the axis matched by each entry other than ``...``,
    in spec order, or ``None`` when the names do not fit (the caller explains, with the shape).
    """
    if Ellipsis in spec:
        cut = spec.index(Ellipsis)
        head, tail = spec[:cut], spec[cut + 1 :]
        if len(names) < len(head) + len(tail):
            return None
        axs = tuple(range(len(head))) + tuple(range(len(names) - len(tail), len(names)))
        wanted = head + tail
    else:
        if len(names) != len(spec):
            return None
        axs, wanted = tuple(range(len(spec))), spec
    if any(names[ax] != want for ax, want in zip(axs, wanted)):
        return None
    return axs


# --------------------------------------------------------------------------- complex numbers (ops/complex.py)


@_cache
def view_as_real(names: Names, name: Name, op: str = "view_as_real") -> Names:
    """``view_as_real``: the input's names plus a new last dim of the real and imaginary parts, named
    ``name`` (``None``: unnamed)."""
    return insert(names, len(names), name, op)


@_cache
def view_as_complex(names: Names, shape: Tuple[int, ...], op: str = "view_as_complex") -> Names:
    """``view_as_complex``: the input's names without its last dim, which holds the parts (size 2)."""
    if not shape or shape[-1] != 2:
        raise ValueError(f"{op}: the last dim must hold the real and imaginary parts (size 2); got names "
                         f"{fmt(names)} and shape {shape}. The input of view_as_real's shape (..., 2) is expected.")
    return names[:-1]


# --------------------------------------------------------------------------- shape helpers (ops/shaping.py)


@_cache
def repeat_interleave(names: Names, dim: Hashable, repeats: Optional[Names],
                      op: str = "repeat_interleave") -> Tuple[int, Names]:
    """``repeat_interleave(t, repeats, dim)``: the output keeps ``t``'s names (``dim`` grows); ``(axis, names)``.

    ``repeats`` are the names of a 1-D tensor of counts (``None`` for an int): it has one count per
    entry of ``dim``, so its name, where both are named, must be the dim's, and it must not be
    another dim of ``t``."""
    a = axis(names, dim, op)
    r = repeats[0] if repeats else None
    if r is not None and names[a] is not None and r != names[a]:
        raise NamesError(
            f"{op}: repeats is named {fmt(repeats)} but the repeated dim is {_dim_label(names, a)} of {fmt(names)}; "
            "repeats holds one count per entry of that dim, so the names must agree: rename repeats, or pass "
            f"dim={r!r} if that is the dim meant."
        )
    if r is not None and names[a] is None and r in names:
        raise _misaligned(op, names, repeats, r,
                          f"repeats counts the entries of dim {a}, not of {r!r}: pass dim={r!r}, or rename repeats.")
    return a, names


@_cache
def unfold(names: Names, dim: Hashable, name: Name, op: str = "unfold") -> Tuple[int, Names]:
    """``t.unfold(dim, size, step, name=)``: ``dim`` keeps its name (it now counts the windows) and a new
    last dim, the window, is named ``name`` (unnamed by default); ``(axis, names)``."""
    a = axis(names, dim, op)
    _check_name(name, op)
    if name is not None and name in names:
        raise NamesError(
            f"{op}: the window dim's name {name!r} is already a dim of {fmt(names)}; choose another name."
        )
    return a, names + (name,)


@_cache
def reshape_as(names: Names, other: Names, shape: Tuple[int, ...], other_shape: Tuple[int, ...],
               op: str = "reshape_as") -> Tuple[Names, Names]:
    """``t.reshape_as(other)``/``t.view_as(other)``: ``reshape``'s rule to ``other``'s shape, then the
    result takes ``other``'s names where ``other`` is named: at each position the name the reshape kept
    and ``other``'s are equal or one is ``None`` (rule 2, :func:`unify`).  ``(names, dropped)``, the
    input's names that the result lost."""
    kept, dropped = reshape(names, None, shape, other_shape, op)
    try:
        out = unify(kept, other, op)
    except NamesError:
        raise NamesError(
            f"{op}: reshaping {fmt(names)} {shape} to {other_shape} keeps the names {fmt(kept)}, which do not "
            f"line up with other's names {fmt(other)}: at each position the names must be equal or one of them "
            "None. Rename one of the tensors, or use reshape(..., names=)."
        ) from None
    return out, tuple(n for n in dropped if n not in out)


@_cache
def diag_embed(names: Names, dim1: Hashable, dim2: Hashable, new: Names,
               op: str = "diag_embed") -> Tuple[int, int, Names]:
    """``diag_embed(t, offset, dim1, dim2, names=)``: ``t``'s last dim (the diagonal's entries) goes and two
    new dims sit at the positions ``dim1`` and ``dim2`` of the result, named ``new`` (a pair, unnamed by
    default: the diagonal's dim is neither of them); the other dims keep their names.
    ``(axis1, axis2, names)``."""
    if not names:
        raise ValueError(f"{op}: needs at least one dim (the diagonal's entries), got a 0-dim tensor.")
    n = len(names) + 1
    positions = []
    for d in (dim1, dim2):
        if isinstance(d, str):
            raise TypeError(
                f"{op}: dim1 and dim2 are positions of the new dims in the result (ints), got {d!r}; name the new "
                f"dims with names=, e.g. names=({d!r}, ...)."
            )
        positions.append(axis(unnamed(n), d, op))
    a1, a2 = positions
    if a1 == a2:
        raise ValueError(f"{op}: dim1 and dim2 are the same position {a1} of the result; they must differ.")
    if len(new) != 2:
        raise NamesError(f"{op}: names= names the two new dims, got {len(new)} names {fmt(new)}.")
    for x in new:
        _check_name(x, op)
    rest = iter(names[:-1])
    out = tuple(new[0] if i == a1 else new[1] if i == a2 else next(rest) for i in range(n))
    try:
        return a1, a2, validate(out, n, op)
    except NamesError:
        raise NamesError(
            f"{op}: the new dims' names {fmt(new)} and the other dims {fmt(names[:-1])} would give {fmt(out)}, "
            "which repeats a name; choose other names."
        ) from None


@_cache
def diag(names: Names, new: Optional[Names], op: str = "diag") -> Names:
    """``diag(t, diagonal, names=)``: a 1-D ``t`` gives a 2-D matrix, a 2-D ``t`` its 1-D diagonal; the
    result's dims are new (neither is the input's dim), so they are named by ``names=`` only."""
    if len(names) not in (1, 2):
        raise ValueError(f"{op}: expects a 1-D or 2-D tensor, got {len(names)} dims {fmt(names)}.")
    n = 3 - len(names)
    return unnamed(n) if new is None else validate(new, n, op)


@_cache
def rot90(names: Names, k: int, dims: Tuple, op: str = "rot90") -> Tuple[int, int, int, Names]:
    """``rot90(t, k, dims)``: a rotation by an odd ``k`` swaps the two dims with their names (PyTorch
    transposes them), an even ``k`` keeps every name; ``(k % 4, axis0, axis1, names)``."""
    if len(dims) != 2:
        raise ValueError(f"{op}: dims must be two dims, got {dims!r}.")
    if len(names) < 2:
        raise ValueError(f"{op}: needs at least 2 dims, got {len(names)} dims {fmt(names)}.")
    a, b = axis(names, dims[0], op), axis(names, dims[1], op)
    if a == b:
        raise ValueError(f"{op}: the two dims {dims!r} are the same dim, {_dim_label(names, a)} of {fmt(names)}.")
    k = _as_int(k, op, "k must be an int") % 4
    if k % 2 == 0:
        return k, a, b, names
    out = list(names)
    out[a], out[b] = out[b], out[a]
    return k, a, b, tuple(out)


@_cache
def meshgrid(all_names: Tuple[Names, ...], indexing: str, op: str = "meshgrid") -> Tuple[Names, Tuple[int, ...]]:
    """``meshgrid(*tensors, indexing)``: 0-D or 1-D inputs; output dim ``i`` has input ``i``'s name (unnamed
    for an unnamed or 0-D input), and ``"xy"`` swaps the first two.  ``(names, position of each input)``."""
    if indexing not in ("ij", "xy"):
        raise ValueError(f"{op}: indexing must be 'ij' or 'xy', got {indexing!r}.")
    for n in all_names:
        if len(n) > 1:
            raise ValueError(f"{op}: expects 0-D or 1-D tensors, got one with {len(n)} dims {fmt(n)}.")
    positions = list(range(len(all_names)))
    if indexing == "xy" and len(positions) > 1:
        positions[0], positions[1] = 1, 0
    out: list = [None] * len(all_names)
    for n, p in zip(all_names, positions):
        out[p] = n[0] if n else None
    try:
        return validate(out, len(out), op), tuple(positions)
    except NamesError:
        raise NamesError(
            f"{op}: the inputs' names {', '.join(fmt(n) for n in all_names)} repeat a name, but each input becomes "
            "its own dim of the grid; rename one of them."
        ) from None


# --------------------------------------------------------------------------- scatter family (ops/scatter.py)


@_cache
def scatter(names: Names, ax: int, index: Names, src: Optional[Names], op: str = "scatter") -> Names:
    """``scatter(t, dim, index, src)``, ``scatter_add`` and ``scatter_reduce``: gather's inverse.

    ``index`` (and ``src``, ``None`` for a number) have ``t``'s number of dims; src is read at the
    index's positions, so the two unify dim by dim (rule 2).  Outside ``dim`` they must name ``t``'s
    dims as ``t`` does (``None`` matches any name) and may fill ``t``'s ``None`` dims; at ``dim`` their
    name is that of the positions they read along (any name but another dim of ``t``'s, as in
    :func:`gather`).  The output has ``t``'s names, so filled.
    """
    if len(index) != len(names):
        raise ValueError(
            f"{op}: the index must have the same number of dims as the input: index names {fmt(index)} vs "
            f"input names {fmt(names)}."
        )
    if src is not None:
        if len(src) != len(index):
            raise ValueError(
                f"{op}: src must have the same number of dims as the index: src names {fmt(src)} vs index "
                f"names {fmt(index)}."
            )
        try:
            index = unify(index, src, op)
        except NamesError:
            raise NamesError(
                f"{op}: the index's names {fmt(index)} and src's {fmt(src)} do not match; src is read at the "
                "index's positions, so they name the same dims (None matches any name). Rename one of them."
            ) from None
    return _scattered(names, ax, index, "index", op)


@_cache
def index_add(names: Names, ax: int, index: Names, source: Names, op: str = "index_add") -> Names:
    """``index_add(t, dim, index, source)`` and ``index_copy``: index_select's inverse.  ``source`` has
    ``t``'s dims with ``dim`` as long as the 1-D ``index``; at ``dim`` its name and the index's unify
    (the positions read along, any name but another dim of ``t``'s); outside it its names meet ``t``'s
    as in :func:`scatter`.  The output has ``t``'s names, ``None`` dims filled by source's."""
    if len(source) != len(names):
        raise ValueError(
            f"{op}: source must have the same number of dims as the input: source names {fmt(source)} vs input "
            f"names {fmt(names)}."
        )
    at, own = index[0], source[ax]
    if at is not None and own is not None and at != own:
        raise NamesError(
            f"{op}: the index is named {at!r} but source's dim {ax} is named {own!r}; source's dim {ax} holds "
            "the values for the index's positions, so they name the same dim. Rename one of them."
        )
    return _scattered(names, ax, source[:ax] + (own if own is not None else at,) + source[ax + 1:], "source", op)


def _scattered(names: Names, ax: int, other: Names, what: str, op: str) -> Names:
    """``names`` with the ``None`` dims outside ``ax`` named by ``other`` (a tensor written into ``names``
    along ``ax``), after checking that ``other`` names no dim of ``names`` at another position."""
    at = other[ax]
    if at is not None and at != names[ax] and at in names:
        raise NamesError(
            f"{op}: the {what}'s dim {ax} is named {at!r}, which is another dim of the input {fmt(names)}: "
            f"the {what} would write along {_dim_label(names, ax)} values that belong to {at!r}. Rename the "
            f"{what}'s dim, or scatter along {at!r}."
        )
    out = list(names)
    for d, (x, y) in enumerate(zip(names, other)):
        if d == ax or y is None or x == y:
            continue
        if x is not None:
            raise NamesError(
                f"{op}: the {what}'s names {fmt(other)} do not match the input's {fmt(names)} outside dim {ax}: "
                f"{x!r} vs {y!r} at dim {d}. Rename one of them (None matches any name)."
            )
        if y in names:
            raise _misaligned(op, names, other, y, f"Rename the {what}'s dim {d}, or align it with align_as.")
        out[d] = y
    return validate(out, len(out), op)


# --------------------------------------------------------------------------- statistics (quantile, trapezoid,
# cosine_similarity): ops/statistics.py


@_cache
def quantile(names: Names, dim: Hashable, keepdim: bool, q: Optional[Names],
             op: str = "quantile") -> Tuple[Optional[int], Names]:
    """``quantile``/``nanquantile``: the reduced axis (``None`` for ``dim=None``: every dim, flattened) and
    the output names: the input's without the reduced dim (all of them, as size-1 dims, with ``keepdim``),
    after a leading dim for the quantiles when ``q`` (its names; ``None`` for a number or a 0-dim q) is a
    1-D tensor.  That dim has q's name, which must not be a name of the rest of the result."""
    if dim is None:
        ax, out = None, (names if keepdim else ())
    else:
        ax = axis(names, dim, op)
        out = names if keepdim else remove(names, ax)
    if q is None:
        return ax, out
    if q[0] is not None and q[0] in out:
        raise NamesError(
            f"{op}: q's dim {q[0]!r} would lead the result, whose other dims are {fmt(out)}, and repeat a name; "
            "rename q (q.rename(None) leaves the quantile dim unnamed)."
        )
    return ax, validate((q[0],) + out, len(out) + 1, op)


@_cache
def reduce_broadcast(a: Names, b: Names, dim: Hashable, op: str) -> Tuple[int, Names]:
    """Two operands broadcast (rule 2) and one dim of the result reduced (``cosine_similarity``): the axis
    of ``dim`` in the broadcast result and the result's names without it."""
    names = unify(a, b, op)
    ax = axis(names, dim, op)
    return ax, remove(names, ax)


@_cache
def trapezoid(y: Names, x: Optional[Names], dim: Hashable, op: str = "trapezoid") -> Tuple[int, Names]:
    """``trapezoid(y, x, dim=)``: the axis integrated along, in the broadcast of ``y`` and ``x`` (in ``y``
    without ``x``, or with a 1-D ``x``, which gives the sample points along ``dim``, named like it where
    both have a name), and the output names: the broadcast names without that dim."""
    ax = axis(y, dim, op)
    if x is None:
        return ax, remove(y, ax)
    if len(x) == 1:
        if x[0] is not None and y[ax] is not None and x[0] != y[ax]:
            raise NamesError(
                f"{op}: x's dim {x[0]!r} gives the sample points along y's {_dim_label(y, ax)} of {fmt(y)}; "
                "the names must be equal. Rename one of them."
            )
        if x[0] is not None and y[ax] is None and x[0] in y:
            raise NamesError(
                f"{op}: x's dim {x[0]!r} gives the sample points along y's {_dim_label(y, ax)} of {fmt(y)}, "
                f"but y has {x[0]!r} at another position. Pass dim={x[0]!r}, or rename x."
            )
        return ax, remove(y, ax)
    names = unify(y, x, op)
    ax += len(names) - len(y)
    return ax, remove(names, ax)


# --------------------------------------------------------------------------- linalg (nt.linalg's matrix functions)


@_cache
def matrix_dims(names: Names, dims: Hashable, op: str) -> Tuple[Optional[Tuple[int, ...]], Names, Name, Name]:
    """The two matrix dims of a matrix function: ``dims`` is ``(row, col)``, names or ints, or ``None`` for
    the last two (PyTorch's).  Returns ``(perm, batch, row, col)``: ``perm`` moves the two dims last and
    keeps the other dims (the batch dims) in their order, ``None`` when they are last already; ``batch``
    are those dims' names, ``row`` and ``col`` the matrix dims' names."""
    if len(names) < 2:
        raise ValueError(f"{op}: expects a matrix or a batch of matrices (at least 2 dims), got {len(names)} "
                         f"dims {fmt(names)}.")
    if dims is None:
        r, c = len(names) - 2, len(names) - 1
    else:
        if not isinstance(dims, tuple) or len(dims) != 2:
            raise TypeError(f"{op}: dims must be a pair (row, col) of dim names or ints, got {dims!r}.")
        r, c = axis(names, dims[0], op), axis(names, dims[1], op)
        if r == c:
            raise NamesError(f"{op}: dims={dims!r} name the same dim twice in {fmt(names)}; a matrix's row and "
                             "column dims are two different dims.")
    batch_axes = tuple(i for i in range(len(names)) if i not in (r, c))
    perm = batch_axes + (r, c)
    batch = tuple(names[i] for i in batch_axes)
    return (None if perm == tuple(range(len(names))) else perm), batch, names[r], names[c]


@_cache
def matrix_result(names: Names, dims: Hashable, layout: str, op: str) -> Tuple[Optional[Tuple[int, ...]], Names]:
    """``(perm, names)`` of a matrix function's result, the batch dims first, in their order: ``layout``
    ``"same"`` keeps the matrix dims as ``(row, col)`` (``inv cholesky matrix_power``), ``"swapped"`` gives
    ``(col, row)`` (``pinv``: its rows are the input's columns), ``"removed"`` drops them (``det slogdet
    trace matrix_rank``) and ``"values"`` puts one unnamed dim of values in their place (``svdvals
    eigvalsh``: the values belong to neither matrix dim)."""
    perm, batch, row, col = matrix_dims(names, dims, op)
    out = {"same": batch + (row, col), "swapped": batch + (col, row), "removed": batch,
           "values": batch + (None,)}[layout]
    return perm, validate(out, len(out), op)


@_cache
def matrix_factors(names: Names, dims: Hashable, name: Name, kind: str,
                   op: str) -> Tuple[Optional[Tuple[int, ...]], Tuple[Names, ...]]:
    """``(perm, names of each factor)`` of a decomposition, whose factors share a new dim ``k`` named
    ``name`` (unnamed when None): ``svd`` U ``(row, k)``, S ``(k,)``, Vh ``(k, col)``; ``eigh`` eigenvalues
    ``(k,)``, eigenvectors ``(row, k)``; ``qr`` Q ``(row, k)``, R ``(k, col)``; batch dims first."""
    perm, batch, row, col = matrix_dims(names, dims, op)
    _check_name(name, op)
    if name is not None and (name in batch or name in (row, col)):
        raise NamesError(f"{op}: name={name!r} for the new dim of the factors is already a dim of the input "
                         f"{fmt(names)}; choose another name.")
    k = (name,)
    outs = {"svd": (batch + (row,) + k, batch + k, batch + k + (col,)),
            "eigh": (batch + k, batch + (row,) + k),
            "qr": (batch + (row,) + k, batch + k + (col,))}[kind]
    return perm, tuple(validate(o, len(o), op) for o in outs)


@_cache
def solve(a: Names, b: Names, dims: Hashable, vector: bool, left: bool,
          op: str = "solve") -> Tuple[Optional[Tuple[int, ...]], Names]:
    """``(perm of a, names of x)`` for ``a @ x = b`` (``x @ a = b`` when not ``left``), ``b`` by position as
    in PyTorch: ``(..., n, k)``, ``(..., k, n)`` when not ``left``, or ``(..., n)`` when ``vector``.  The
    dim ``n`` of ``b`` meets a's row dim (its col dim when not ``left``): where both are named, the names
    must be equal.  In ``x`` that dim has a's other matrix dim's name (b's name where ``a`` names neither);
    the batch dims of ``a`` and ``b`` unify (rule 2)."""
    perm, batch_a, row, col = matrix_dims(a, dims, op)
    meet, other = (row, col) if left else (col, row)
    lead = len(b) - (1 if vector else 2)
    batch_b = b[:lead]
    n_name = b[-1] if vector or not left else b[-2]
    if meet is not None and n_name is not None and meet != n_name:
        which = "row" if left else "column"
        raise NamesError(
            f"{op}: A's {which} dim {meet!r} (A {fmt(a)}) meets B's dim {n_name!r} (B {fmt(b)}); they are the same "
            "dim of the system, so their names must be equal (or one unnamed). Rename one of them."
        )
    x_name = other if other is not None else (n_name if meet is None else None)
    batch = unify(batch_a, batch_b, op)
    rest = batch if vector else batch + (b[-1] if left else b[-2],)
    if x_name is not None and x_name in rest:
        raise NamesError(
            f"{op}: X would name two dims {x_name!r}: the dim that meets A's {'column' if left else 'row'} dim, and "
            f"B's dim {x_name!r} (A {fmt(a)}, B {fmt(b)}). Rename B's dim (or A's)."
        )
    out = batch + ((x_name,) if vector else (x_name, b[-1]) if left else (b[-2], x_name))
    return perm, validate(out, len(out), op)


@_cache
def tensordot(a: Names, b: Names, dims_a: Tuple, dims_b: Tuple,
              op: str = "tensordot") -> Tuple[Tuple[int, ...], Tuple[int, ...], Tuple[int, ...], Names]:
    """``tensordot``: the dims ``dims_a`` of ``a`` are contracted with ``dims_b`` of ``b``, pair by pair (names
    or ints); a pair's names must be equal where both are named.  The output is a's other dims then b's, which
    must not share a name.  Returns einsum ids ``(ids_a, ids_b, out_ids, names)``."""
    if len(dims_a) != len(dims_b):
        raise ValueError(f"{op}: dims gives {len(dims_a)} dims of a but {len(dims_b)} of b; they are contracted "
                         "in pairs.")
    axa = _axes(a, tuple(dims_a), op)
    axb = _axes(b, tuple(dims_b), op)
    for x, y in zip(axa, axb):
        if a[x] is not None and b[y] is not None and a[x] != b[y]:
            raise NamesError(
                f"{op}: the contracted dims differ: {_dim_label(a, x)} of {fmt(a)} vs {_dim_label(b, y)} of {fmt(b)}. "
                "tensordot checks contracted names; rename one if they really are the same dim, or use "
                "nt.dot(..., over=...) to contract by name."
            )
    free_a = tuple(i for i in range(len(a)) if i not in axa)
    free_b = tuple(j for j in range(len(b)) if j not in axb)
    rest_a, rest_b = tuple(a[i] for i in free_a), tuple(b[j] for j in free_b)
    for n in rest_a:
        if n is not None and n in rest_b:
            raise NamesError(
                f"{op}: the result would have a's other dims {fmt(rest_a)} and b's {fmt(rest_b)}, which share the "
                f"name {n!r}; contract it too, rename one, or use nt.dot to keep it as a batch dim."
            )
    out = validate(rest_a + rest_b, len(rest_a) + len(rest_b), op)
    ids_a = tuple(range(len(a)))
    partner = dict(zip(axb, axa))
    fresh = iter(range(len(a), len(a) + len(free_b)))
    ids_b = tuple(partner[j] if j in partner else next(fresh) for j in range(len(b)))
    return ids_a, ids_b, free_a + tuple(ids_b[j] for j in free_b), out


@_cache
def cross(a: Names, b: Names, dim: Hashable, op: str = "cross") -> Tuple[Names, int]:
    """``cross(a, b, dim)``: the operands broadcast (rule 2), and ``dim`` (a name or an int) is a dim of the
    result, which has the unified names.  Returns ``(names, axis)``."""
    out = unify(a, b, op)
    return out, axis(out, dim, op)


# ----------------------------------------------------------------------------- spectral (the FFTs)


@_cache
def spectral(names: Names, dims: Hashable, out_names: Optional[Tuple[Name, ...]],
             op: str = "fft") -> Tuple[Tuple[int, ...], Names]:
    """The FFTs (``namedtensor.fft``): ``(axes, output names)``.  Each transformed dim keeps its place
    and its name (its frequencies stand where its samples stood), or takes the one ``out_names``
    gives for it, in the order of ``dims``; the other dims are untouched."""
    ax = _axes(names, dims, op)
    if out_names is None:
        return ax, names
    if len(out_names) != len(ax):
        raise NamesError(f"{op}: {len(out_names)} output name(s) {tuple(out_names)!r} for {len(ax)} transformed "
                         f"dim(s) of a tensor with names {fmt(names)}; give one per transformed dim.")
    validate(out_names, len(out_names), op)
    out = list(names)
    for a, n in zip(ax, out_names):
        out[a] = n
    kept = {n for i, n in enumerate(names) if i not in ax}
    if any(n is not None and n in kept for n in out_names):
        raise NamesError(f"{op}: renaming the transformed dims of {fmt(names)} to {tuple(out_names)!r} would "
                         "repeat a name; pick names no other dim has.")
    return ax, tuple(out)


# ----------------------------------------------------------------------------- sets and search (ops/sets.py)


@_cache
def unique(names: Names, dim: Hashable, op: str = "unique") -> Tuple[Optional[int], Names, Names, Names]:
    """``unique``/``unique_consecutive``: ``(axis, values' names, inverse's names, counts' names)``.

    With ``dim`` the unique slices are a selection along it: the values keep the input's names and the
    inverse and the counts are 1-D, named as ``dim``.  Without, the input is read flat: a 1-D input
    keeps its name, a flattened one's values are unnamed; the inverse has the input's names."""
    if dim is None:
        flat = names if len(names) == 1 else (None,)
        return None, flat, names, flat
    ax = axis(names, dim, op)
    return ax, names, (names[ax],), (names[ax],)


@_cache
def searchsorted(sequence: Names, values: Names, op: str = "searchsorted") -> Names:
    """``searchsorted``: the values' names; an N-dim sequence's leading dims and the values' leading
    dims are the same batch, so their names unify (rule 2)."""
    if len(sequence) == 1:
        return values
    if len(sequence) != len(values):
        raise ValueError(f"{op}: an N-dim sorted_sequence {fmt(sequence)} needs input with as many dims, got "
                         f"{fmt(values)}; use a 1-D sequence to search every value in one.")
    return unify(sequence[:-1], values[:-1], op) + values[-1:]
