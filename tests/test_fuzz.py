"""A fuzzer over the public API: random ops, names, shapes, dims, dtypes and arguments, good and bad.

The contract every call keeps (README, "Errors"): it returns a result whose names follow the documented
rule and whose values (and dtype) equal NumPy's, or it raises one of the documented exception types
(``ValueError``, ``nt.NamesError`` among them; ``TypeError``; ``IndexError``; ``RuntimeError``) with
the op's name in the message. Each family below also carries its own reference of what is valid,
written from docs/design.md independently of ``_names.py``: valid arguments must succeed, and
invalid ones must be refused.

CI runs a bounded number of examples per family (derandomized); a long run by hand:

    NT_FUZZ_EXAMPLES=20000 python -m pytest tests/test_fuzz.py -p no:cacheprovider
"""

from __future__ import annotations

import math
import os
import warnings
from typing import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt

EXAMPLES = int(os.environ.get("NT_FUZZ_EXAMPLES", "120"))
fuzz = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
DOCUMENTED = (ValueError, TypeError, IndexError, RuntimeError)
POOL = ("batch", "seq", "embed", "head", "k")
DTYPES = ("float32", "float64", "int64", "int32", "bool")


class Invalid(Exception):
    """The reference's verdict: the call must be refused."""


# ----------------------------------------------------------------------------- drawing inputs


@st.composite
def names_for(draw, ndim: int) -> tuple:
    chosen = draw(st.permutations(POOL))[:ndim]
    return tuple(n if draw(st.integers(0, 3)) else None for n in chosen)


@st.composite
def arrays_of(draw, shape: tuple, dtype: str) -> np.ndarray:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-4, 5, shape).astype(dtype)
    a = (rng.standard_normal(shape) * 2).astype(dtype)
    if a.size and draw(st.integers(0, 9)) == 0:  # now and then a special value
        a.flat[draw(st.integers(0, a.size - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf, 0.0]))
    return a


@st.composite
def tensors(draw, ndim=None, dtypes=DTYPES, min_side: int = 0) -> tuple:
    """``(t, a)``: a named tensor and its NumPy array."""
    ndim = draw(st.integers(0, 4)) if ndim is None else ndim
    shape = tuple(draw(st.integers(min_side, 3)) for _ in range(ndim))
    a = draw(arrays_of(shape, draw(st.sampled_from(dtypes))))
    return nt.tensor(a, names=draw(names_for(ndim))), a


def single_dims(ndim: int):
    """A dim argument, valid or not: names in and out of the pool, ints in and out of range, and values of
    other types that equal valid ints."""
    return st.one_of(
        st.sampled_from(POOL + ("nope",)),
        st.integers(-ndim - 1, ndim),
        st.sampled_from([0.0, 1.0, True, False, np.True_, None, np.int64(0), np.str_("batch"), b"seq", 1.5]),
    )


def dims_args(ndim: int):
    return st.one_of(st.none(), single_dims(ndim),
                     st.lists(single_dims(ndim), max_size=3).map(tuple),
                     st.lists(single_dims(ndim), max_size=3))


FLAGS = st.sampled_from([True, False, np.True_, np.False_, 1, 0, "yes", None])


# ----------------------------------------------------------------------------- the reference


def ref_axis(names: tuple, dim) -> int:
    """The axis ``dim`` addresses, by docs/design.md rule 3: a name of the tensor, or an int in range
    (NumPy ints count; bools, floats and anything else do not)."""
    if isinstance(dim, str):
        if dim not in names:
            raise Invalid
        return names.index(str(dim))
    if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
        raise Invalid
    if not -len(names) <= dim < len(names):
        raise Invalid
    return int(dim) % len(names)


def ref_axes(names: tuple, dims) -> tuple:
    if dims is None:
        return tuple(range(len(names)))
    items = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    axes = tuple(ref_axis(names, d) for d in items)
    if len(set(axes)) != len(axes):
        raise Invalid
    return axes


def ref_flag(value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise Invalid
    return bool(value)


_MISSING = object()


def ref_unify(a: tuple, b: tuple, whole_a: tuple = None, whole_b: tuple = None) -> tuple:
    """Rule 2: right-aligned, equal names or one None; a name facing None or nothing must not occur
    elsewhere in the other operand (``whole_a``/``whole_b``: all of it, when ``a`` and ``b`` are its
    batch dims)."""
    whole_a, whole_b = whole_a or a, whole_b or b
    n = max(len(a), len(b))
    A = (_MISSING,) * (n - len(a)) + a
    Bn = (_MISSING,) * (n - len(b)) + b
    out = []
    for x, y in zip(A, Bn):
        if isinstance(x, str) and isinstance(y, str) and x != y:
            raise Invalid
        if isinstance(x, str) and not isinstance(y, str) and x in whole_b:
            raise Invalid
        if isinstance(y, str) and not isinstance(x, str) and y in whole_a:
            raise Invalid
        out.append(x if isinstance(x, str) else y if isinstance(y, str) else None)
    return tuple(out)


def numpy_value(fn: Callable):
    """NumPy's result; NumPy's own refusal, or a result of a dtype no tensor holds (``square`` of a bool is
    int8), means the call is invalid."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = np.asarray(fn())
        except (TypeError, ValueError, IndexError, np.exceptions.AxisError):
            raise Invalid from None
    if out.dtype.name not in ("bool", "int32", "int64", "float16", "float32", "float64"):
        raise Invalid
    return out


# ----------------------------------------------------------------------------- the contract


def check(op: str, call: Callable, expect: Callable) -> None:
    """Run ``call`` and hold it to the contract; ``expect()`` gives ``(names, values)`` or raises Invalid."""
    try:
        want = expect()
    except Invalid:
        want = None
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = call()
    except DOCUMENTED as e:
        assert op in str(e), f"{op}: the message does not name the op: {type(e).__name__}: {e}"
        assert want is None, f"{op}: valid arguments refused: {type(e).__name__}: {e}"
        return
    assert want is not None, f"{op}: invalid arguments accepted, got names {got.names}"
    names, values = want
    assert got.names == names, f"{op}: names {got.names}, the rule says {names}"
    assert all(n is None or type(n) is str for n in got.names)
    same_values(op, got.numpy(), values)


def same_values(op: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape, f"{op}: shape {got.shape}, NumPy's {want.shape}"
    assert got.dtype == want.dtype, f"{op}: dtype {got.dtype}, NumPy's {want.dtype}"
    if want.dtype.kind == "f":
        tol = 1e-5 if want.dtype == np.float32 else 1e-10
        ok = np.isclose(got, want, rtol=tol, atol=tol, equal_nan=True) | (got == want)
        assert ok.all(), f"{op}: values differ from NumPy's: {got} vs {want}"
    else:
        assert np.array_equal(got, want), f"{op}: values differ from NumPy's: {got} vs {want}"


# ----------------------------------------------------------------------------- families

UNARY = {"neg": np.negative, "abs": np.abs, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "sin": np.sin,
         "tanh": np.tanh, "floor": np.floor, "ceil": np.ceil, "sign": np.sign, "square": np.square,
         "reciprocal": lambda a: np.true_divide(1, a), "logical_not": np.logical_not, "isnan": np.isnan, "isfinite": np.isfinite}


@fuzz
@given(st.data())
def test_unary(data):
    t, a = data.draw(tensors())
    op = data.draw(st.sampled_from(sorted(UNARY)))
    check(op, lambda: getattr(t, op)(), lambda: (t.names, numpy_value(lambda: UNARY[op](a))))


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide, "maximum": np.maximum,
          "minimum": np.minimum, "eq": np.equal, "lt": np.less, "ge": np.greater_equal,
          "logical_and": np.logical_and, "pow": np.power, "remainder": np.remainder}


@st.composite
def pairs(draw):
    """Two tensors whose names and shapes line up, or fail to, in every way rule 2 knows."""
    t, a = draw(tensors())
    how = draw(st.sampled_from(["same", "suffix", "renamed", "random", "scalar"]))
    if how == "scalar":
        v = draw(st.sampled_from([2, 0.5, True, -1]))
        return t, a, v, v
    if how == "random":
        u, b = draw(tensors())
        return t, a, u, b
    k = draw(st.integers(0, t.ndim))
    names = t.names[t.ndim - k:] if how != "renamed" else draw(names_for(k))
    shape = tuple(draw(st.sampled_from([s, 1])) for s in a.shape[a.ndim - k:])
    if draw(st.booleans()):
        names, shape = (None,) + names, (2,) + shape
    b = draw(arrays_of(shape, draw(st.sampled_from(DTYPES))))
    return t, a, nt.tensor(b, names=names), b


@fuzz
@given(pairs(), st.sampled_from(sorted(BINARY)))
def test_binary(pair, op):
    t, a, u, b = pair
    u_names = u.names if isinstance(u, nt.Tensor) else ()

    def expect():
        return ref_unify(t.names, u_names), numpy_value(lambda: BINARY[op](a, b))

    check(op, lambda: getattr(nt, op)(t, u), expect)


REDUCTIONS = {
    "sum": lambda a, ax, k: np.sum(a, axis=ax, keepdims=k),
    "mean": lambda a, ax, k: np.mean(a, axis=ax, keepdims=k),
    "prod": lambda a, ax, k: np.prod(a, axis=ax, keepdims=k),
    "amax": lambda a, ax, k: np.amax(a, axis=ax, keepdims=k),
    "amin": lambda a, ax, k: np.amin(a, axis=ax, keepdims=k),
    "var": lambda a, ax, k: np.var(a, axis=ax, keepdims=k, ddof=1),
    "std": lambda a, ax, k: np.std(a, axis=ax, keepdims=k, ddof=1),
    "any": lambda a, ax, k: np.any(a, axis=ax, keepdims=k),
    "all": lambda a, ax, k: np.all(a, axis=ax, keepdims=k),
}


@fuzz
@given(st.data())
def test_reductions(data):
    t, a = data.draw(tensors())
    op = data.draw(st.sampled_from(sorted(REDUCTIONS)))
    dim = data.draw(dims_args(t.ndim))
    keepdim = data.draw(FLAGS)

    def expect():
        axes, keep = ref_axes(t.names, dim), ref_flag(keepdim)
        if op in ("amax", "amin") and any(a.shape[i] == 0 for i in axes):
            raise Invalid  # no identity: the maximum of nothing
        values = numpy_value(lambda: REDUCTIONS[op](a, axes, keep))
        if op in ("mean", "var", "std") and a.dtype == np.bool_:
            values = numpy_value(lambda: REDUCTIONS[op](a.astype(np.float64), axes, keep))
        names = t.names if keep else tuple(n for i, n in enumerate(t.names) if i not in axes)
        return names, values

    check(op, lambda: getattr(t, op)(dim, keepdim=keepdim), expect)


@fuzz
@given(st.data())
def test_along_one_dim(data):
    """``softmax``, ``log_softmax``, ``cumsum``, ``argmax`` and ``sort`` along one dim."""
    t, a = data.draw(tensors(dtypes=("float32", "float64", "int64")))
    op = data.draw(st.sampled_from(["softmax", "log_softmax", "cumsum", "argmax", "sort", "flip"]))
    dim = data.draw(single_dims(t.ndim))

    def expect():
        if op == "argmax" and dim is None:  # the index into the flattened tensor
            if a.size == 0:
                raise Invalid
            return (), numpy_value(lambda: np.argmax(a))
        ax = ref_axis(t.names, dim)
        x = a.astype(np.float64) if a.dtype.kind != "f" else a
        if op in ("softmax", "log_softmax"):
            e = np.exp(x - np.max(x, axis=ax, keepdims=True)) if a.shape[ax] else x
            s = e / e.sum(axis=ax, keepdims=True)
            return t.names, numpy_value(lambda: s if op == "softmax" else np.log(s))
        if op == "cumsum":
            return t.names, numpy_value(lambda: np.cumsum(a, axis=ax))
        if op == "flip":
            return t.names, numpy_value(lambda: np.flip(a, axis=ax))
        if op == "sort":
            return t.names, numpy_value(lambda: np.sort(a, axis=ax, kind="stable"))
        if a.shape[ax] == 0:
            raise Invalid
        return t.names[:ax] + t.names[ax + 1:], numpy_value(lambda: np.argmax(a, axis=ax))

    def call():
        out = getattr(t, op)(dim)
        return out.values if op == "sort" else out

    if op in ("softmax", "log_softmax") and not any(np.isnan(a).ravel()) and np.isfinite(a).all():
        check(op, call, expect)
    elif op not in ("softmax", "log_softmax"):
        check(op, call, expect)


@fuzz
@given(st.data())
def test_naming(data):
    """``rename``, ``refine_names``, ``align_to``, ``permute`` and ``transpose`` with random arguments."""
    t, a = data.draw(tensors(dtypes=("float32",)))
    op = data.draw(st.sampled_from(["rename", "refine_names", "align_to", "permute", "transpose"]))
    arg = st.one_of(st.sampled_from(POOL + (None, "nope", "1x", "")), st.integers(-t.ndim - 1, t.ndim),
                    st.sampled_from([0.0, True]))
    args = tuple(data.draw(st.lists(arg, min_size=0, max_size=t.ndim + 1)))
    if op == "transpose":
        args = args[:2] + (0,) * (2 - len(args[:2]))

    def valid_name(n):
        return n is None or (isinstance(n, str) and n.isidentifier())

    def unique(names):
        named = [n for n in names if n is not None]
        if len(set(named)) != len(named):
            raise Invalid
        return names

    def expect():
        if op == "rename" and args == (None,):  # rename(None) drops every name
            return (None,) * t.ndim, a
        if op in ("rename", "refine_names"):
            if len(args) != t.ndim or not all(valid_name(n) for n in args):
                raise Invalid
            if op == "refine_names" and any(o is not None and o != n for o, n in zip(t.names, args)):
                raise Invalid
            return unique(args), a
        if op == "align_to":
            if not all(isinstance(n, str) and n.isidentifier() for n in args) or len(set(args)) != len(args):
                raise Invalid
            if any(n is not None and n not in args for n in t.names):
                raise Invalid  # align_to keeps every dim: a named one must be listed
            if any(n is None for n in t.names):
                raise Invalid  # unnamed dims cannot be placed without '...'
            src = [t.names.index(n) if n in t.names else None for n in args]
            moved = np.transpose(a, [s for s in src if s is not None])
            return tuple(args), moved.reshape([a.shape[s] if s is not None else 1 for s in src])
        if op == "permute":
            axes = tuple(ref_axis(t.names, d) for d in args)
            if sorted(axes) != list(range(t.ndim)):
                raise Invalid
            return tuple(t.names[i] for i in axes), np.transpose(a, axes)
        i, j = ref_axis(t.names, args[0]), ref_axis(t.names, args[1])
        perm = list(range(t.ndim))
        perm[i], perm[j] = perm[j], perm[i]
        return tuple(t.names[p] for p in perm), np.transpose(a, perm)

    check(op, lambda: getattr(t, op)(*args), expect)


@fuzz
@given(st.data())
def test_shape(data):
    """``flatten``, ``unsqueeze``, ``squeeze``, ``cat`` and ``stack`` with random arguments."""
    t, a = data.draw(tensors(dtypes=("float64", "int64")))
    op = data.draw(st.sampled_from(["flatten", "unsqueeze", "squeeze", "cat", "stack"]))
    name = data.draw(st.sampled_from(POOL + (None, "nope", "1x")))
    if op == "flatten":
        dims = tuple(data.draw(st.lists(single_dims(t.ndim), min_size=0, max_size=3)))

        def expect():
            axes = [ref_axis(t.names, d) for d in dims]
            if not axes or axes != list(range(axes[0], axes[0] + len(axes))):
                raise Invalid
            merged = [t.names[i] for i in axes]
            if name is None and len(axes) > 1 and any(n is not None for n in merged):
                raise Invalid  # a name would be lost
            new = merged[0] if name is None and len(axes) == 1 else name
            if not (new is None or new.isidentifier()):
                raise Invalid
            out = t.names[:axes[0]] + (new,) + t.names[axes[-1] + 1:]
            shape = a.shape[:axes[0]] + (math.prod(a.shape[i] for i in axes),) + a.shape[axes[-1] + 1:]
            return unique_or_invalid(out), a.reshape(shape)

        check(op, lambda: t.flatten(dims, name), expect)
    elif op == "unsqueeze":
        pos = data.draw(st.one_of(st.integers(-t.ndim - 2, t.ndim + 1), st.sampled_from([0.0, True, None])))

        def expect():
            if isinstance(pos, (bool, float)) or pos is None or not -t.ndim - 1 <= pos <= t.ndim:
                raise Invalid
            if not (name is None or name.isidentifier()):
                raise Invalid
            p = pos % (t.ndim + 1)
            return unique_or_invalid(t.names[:p] + (name,) + t.names[p:]), np.expand_dims(a, p)

        check(op, lambda: t.unsqueeze(pos, name), expect)
    elif op == "squeeze":
        dim = data.draw(dims_args(t.ndim))

        def expect():
            axes = tuple(i for i, s in enumerate(a.shape) if s == 1) if dim is None else ref_axes(t.names, dim)
            if any(a.shape[i] != 1 for i in axes):
                raise Invalid
            return tuple(n for i, n in enumerate(t.names) if i not in axes), np.squeeze(a, axes)

        check(op, lambda: t.squeeze(dim), expect)
    else:
        u, b = data.draw(st.sampled_from([(t, a), data.draw(tensors(ndim=t.ndim, dtypes=(str(a.dtype),)))]))
        dim = data.draw(single_dims(t.ndim + (op == "stack")))

        def expect():
            joined = ref_unify_all((t.names, u.names))
            if op == "cat":
                ax = ref_axis(joined, dim)
                return joined, numpy_value(lambda: np.concatenate([a, b], axis=ax))
            if isinstance(dim, str):
                if not dim.isidentifier() or dim in joined:
                    raise Invalid
                return (dim,) + joined, numpy_value(lambda: np.stack([a, b]))
            ax = ref_axis((None,) * (t.ndim + 1), dim)
            return joined[:ax] + (None,) + joined[ax:], numpy_value(lambda: np.stack([a, b], axis=ax))

        check(op, lambda: getattr(nt, op)([t, u], dim), expect)


def unique_or_invalid(names: tuple) -> tuple:
    named = [n for n in names if n is not None]
    if len(set(named)) != len(named):
        raise Invalid
    return names


def ref_unify_all(all_names: tuple) -> tuple:
    """Joining: the same number of dims, names equal position by position or one None."""
    first = all_names[0]
    out = list(first)
    for names in all_names[1:]:
        if len(names) != len(first):
            raise Invalid
        for i, n in enumerate(names):
            if n is not None and out[i] is not None and n != out[i]:
                raise Invalid
            out[i] = out[i] if out[i] is not None else n
    return unique_or_invalid(tuple(out))


@fuzz
@given(st.data())
def test_indexing_by_name(data):
    t, a = data.draw(tensors(dtypes=("float32", "int64")))
    keys = data.draw(st.lists(st.sampled_from(POOL + ("nope",)), max_size=3, unique=True))
    entries = st.one_of(st.integers(-4, 4), st.builds(slice, st.integers(-4, 4) | st.none(),
                                                     st.integers(-4, 4) | st.none()),
                        st.sampled_from([1.0, True, "x", None]))
    key = {k: data.draw(entries) for k in keys}

    def expect():
        index = [slice(None)] * t.ndim
        for k, v in key.items():
            if k not in t.names or isinstance(v, (bool, float, str)) or v is None:
                raise Invalid
            index[t.names.index(k)] = v
        kept = tuple(n for n, v in zip(t.names, index) if not isinstance(v, int))
        return kept, numpy_value(lambda: a[tuple(index)])

    check("getitem", lambda: t[key], expect)


@fuzz
@given(st.data())
def test_contractions(data):
    """``matmul`` by position and ``dot`` by name."""
    t, a = data.draw(tensors(dtypes=("float64",), min_side=1))
    u, b = data.draw(tensors(dtypes=("float64",), min_side=1))
    if data.draw(st.booleans()):
        def expect():
            if t.ndim < 1 or u.ndim < 1:
                raise Invalid
            values = numpy_value(lambda: np.matmul(a, b))
            ta, tb = (t.names if t.ndim > 1 else (None,) + t.names), (u.names if u.ndim > 1 else u.names + (None,))
            if ta[-1] is not None and tb[-2] is not None and ta[-1] != tb[-2]:
                raise Invalid
            for n in set(t.names) & set(u.names) - {None}:  # a shared name: the contracted pair, or batch dims
                if not (n == ta[-1] == tb[-2] or (n in ta[:-2] and n in tb[:-2])):
                    raise Invalid
            batch = ref_unify(ta[:-2], tb[:-2])
            out = batch + ((ta[-2],) if t.ndim > 1 else ()) + ((tb[-1],) if u.ndim > 1 else ())
            return unique_or_invalid(out), values

        check("matmul", lambda: t @ u, expect)
        return
    over = tuple(data.draw(st.lists(st.sampled_from(POOL + ("nope",)), min_size=1, max_size=2, unique=True)))

    def expect():
        if None in t.names or None in u.names:
            raise Invalid
        for n in over:
            if not (n in t.names and n in u.names):
                raise Invalid  # a dim in over= is in both operands
        for n in set(t.names) & set(u.names):
            if a.shape[t.names.index(n)] != b.shape[u.names.index(n)]:
                raise Invalid
        seen = list(t.names) + [n for n in u.names if n not in t.names]
        kept = tuple(n for n in seen if n not in over)
        letters = {n: chr(97 + i) for i, n in enumerate(seen)}
        spec = f"{''.join(letters[n] for n in t.names)},{''.join(letters[n] for n in u.names)}->" \
               f"{''.join(letters[n] for n in kept)}"
        return kept, numpy_value(lambda: np.einsum(spec, a, b))

    check("dot", lambda: nt.dot(t, u, over=over), expect)


def test_the_reference_refuses_what_the_rules_refuse():
    """The fuzzer's reference is a second reading of the rules: a few verdicts pinned by hand."""
    assert ref_unify(("a", "b"), ("b",)) == ("a", "b")
    assert ref_unify((None, "b"), ("a", None)) == ("a", "b")
    for a, b in [(("a", "b"), ("a",)), (("a", None), ("a",)), (("a", "b"), ("b", "a"))]:
        with pytest.raises(Invalid):
            ref_unify(a, b)
    assert ref_axes(("a", "b"), ("b", 0)) == (1, 0)
    for bad in [(0, "a"), (0.0,), (True,), 2, "c"]:
        with pytest.raises(Invalid):
            ref_axes(("a", "b"), bad)
