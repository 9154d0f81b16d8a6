"""The name rules of ``namedtensor._names``: every function on examples, rule 2 as Hypothesis properties,
and the error messages (op, operands' names, the rule, the fix), which are API."""

import re

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from namedtensor import _names as N
from namedtensor._names import NamesError

POOL = ("a", "b", "c", "d", "e")


@st.composite
def name_tuples(draw, min_dims=0, max_dims=4, named=None):
    """Distinct names from POOL, some replaced by None (all named when ``named`` is True)."""
    n = draw(st.integers(min_dims, max_dims))
    perm = draw(st.permutations(POOL))[:n]
    if named:
        return tuple(perm)
    return tuple(nm if draw(st.booleans()) else None for nm in perm)


def raises(fragments, exc=NamesError):
    """pytest.raises matching every fragment (in order), each escaped."""
    return pytest.raises(exc, match=".*".join(re.escape(f) for f in fragments))


# ----------------------------------------------------------------------------- formatting, validity


def test_fmt():
    assert N.fmt(()) == "()"
    assert N.fmt(("a",)) == "('a',)"
    assert N.fmt(("batch", None)) == "('batch', None)"
    assert N.fmt([None, None, "x"]) == "(None, None, 'x')"


def test_unnamed_is_shared_and_is_named():
    assert N.unnamed(3) == (None, None, None)
    assert N.unnamed(3) is N.unnamed(3)
    assert N.unnamed(0) == ()
    assert not N.is_named(N.unnamed(2))
    assert not N.is_named((None, None))
    assert not N.is_named(())
    assert N.is_named((None, "a"))


def test_validate_accepts():
    assert N.validate(None, 2) is N.unnamed(2)
    assert N.validate(["a", None], 2) == ("a", None)
    assert N.validate(("_1", "batch9", "BATCH_5"), 3) == ("_1", "batch9", "BATCH_5")
    assert N.validate((None, None), 2) is N.unnamed(2)  # all-None is the same as unnamed
    assert N.validate(iter(["x"]), 1) == ("x",)
    assert N.validate((), 0) == ()


def test_validate_wrong_count():
    with raises(["tensor: got 1 names ('N',) for a tensor with 2 dims", "one name (or None) per dim"]):
        N.validate(("N",), 2)
    with raises(["zeros: got 3 names"]):
        N.validate(("a", "b", "c"), 2, "zeros")


def test_validate_duplicates():
    with raises(["tensor: duplicate dim name 'N' in ('N', 'C', 'N')", "unique"]):
        N.validate(("N", "C", "N"), 3)
    assert N.validate((None, "a", None), 3) == (None, "a", None)  # any number of None


@pytest.mark.parametrize("bad", ["", "1x", "a-b", "?", "a b", "x.y"])
def test_validate_invalid_identifiers(bad):
    with raises([f"tensor: invalid dim name {bad!r}", "Python identifier"]):
        N.validate((bad,), 1)


def test_validate_non_str_names():
    with raises(["must be a str or None, got 3 of type int"]):
        N.validate((3,), 1)
    with raises(["must be a str or None", "list"]):
        N.validate((["a"],), 1)  # unhashable: still a NamesError, not "unhashable type"


def test_validate_bare_str_and_non_sequence():
    with raises(["names must be a sequence of names, not the str 'x'", "('x',)"]):
        N.validate("x", 1)
    with raises(["names must be a sequence of str or None, got int"], TypeError):
        N.validate(5, 1)


def test_names_error_is_a_value_error():
    assert issubclass(NamesError, ValueError)


@given(st.text(max_size=6))
def test_validate_rejects_every_non_identifier(s):
    if s.isidentifier():
        assert N.validate((s,), 1) == (s,)
    else:
        with pytest.raises(NamesError, match="invalid dim name"):
            N.validate((s,), 1)


@given(name_tuples(min_dims=1), st.data())
def test_validate_rejects_any_duplicate(names, data):
    named = [n for n in names if n is not None]
    assume(named)
    dup = data.draw(st.sampled_from(named))
    pos = data.draw(st.integers(0, len(names)))
    bad = names[:pos] + (dup,) + names[pos:]
    with pytest.raises(NamesError, match=f"duplicate dim name '{dup}'"):
        N.validate(bad, len(bad))


# ----------------------------------------------------------------------------- rule 2: unify


def test_unify_examples():
    assert N.unify(("a", "b"), ("a", "b")) == ("a", "b")
    assert N.unify(("a", None), (None, "b")) == ("a", "b")
    assert N.unify(("a", "b"), ("b",)) == ("a", "b")
    assert N.unify(("a", "b"), (None,)) == ("a", "b")
    assert N.unify((None,), ("x", None, "y")) == ("x", None, "y")
    assert N.unify((), ("a",)) == ("a",)
    assert N.unify((None, None), (None,)) is N.unnamed(2)


def test_unify_mismatch_message():
    # the example of docs/design.md, "Errors", fragment by fragment
    with raises([
        "add: dims ('batch', 'feat') and ('batch',) do not match at position -1 from the right: 'feat' vs 'batch'",
        "To broadcast by name use b.align_as(a)",
        "rename",
    ]):
        N.unify(("batch", "feat"), ("batch",), "add")


def test_unify_misaligned_message():
    with raises([
        "mul: dims ('a', None) and ('a',) are misaligned: 'a' is at a different position from the right",
        "align_as",
    ]):
        N.unify(("a", None), ("a",), "mul")
    # the name may sit where the other operand has no dim at all
    with raises(["sub: dims ('a', 'b') and ('a',)"]):
        N.unify(("a", "b"), ("a",), "sub")
    with raises(["misaligned: 'b'"]):
        N.unify(("b", None), (None, "b"))


def _ref_unify(a, b):
    """Rule 2 spelled out position by position (the test oracle); None when it must raise."""
    n = max(len(a), len(b))
    pa = (None,) * (n - len(a)) + tuple(a)
    pb = (None,) * (n - len(b)) + tuple(b)
    out = []
    for i, (x, y) in enumerate(zip(pa, pb)):
        if x is not None and y is not None:
            if x != y:
                return None
            out.append(x)
        elif x is not None:
            if x in b:
                return None
            out.append(x)
        elif y is not None:
            if y in a:
                return None
            out.append(y)
        else:
            out.append(None)
    return tuple(out)


@given(name_tuples(), name_tuples())
def test_unify_matches_rule_2(a, b):
    expected = _ref_unify(a, b)
    if expected is None:
        with pytest.raises(NamesError):
            N.unify(a, b)
    else:
        assert N.unify(a, b) == expected


@given(name_tuples(), name_tuples())
def test_unify_is_symmetric(a, b):
    try:
        ab = N.unify(a, b)
    except NamesError:
        with pytest.raises(NamesError):
            N.unify(b, a)
        return
    assert N.unify(b, a) == ab
    assert len(ab) == max(len(a), len(b))


@given(name_tuples())
def test_unify_with_itself_is_identity(a):
    assert N.unify(a, a) == a
    assert N.unify(a, tuple(a)) == a  # an equal tuple that is not the same object


@given(name_tuples())
def test_unify_with_unnamed_of_same_length_is_identity(a):
    assert N.unify(a, N.unnamed(len(a))) == a
    assert N.unify(N.unnamed(len(a)), a) == a
    assert N.unify(a, ()) == a


@given(st.integers(1, 4), st.integers(1, 4), st.data())
def test_misaligned_always_raises(la, lb, data):
    """A name paired with None (or nothing) must not appear elsewhere in the other operand."""
    j = data.draw(st.integers(0, lb - 1), label="index of the name in b")
    from_right_b = lb - j
    ka = data.draw(st.integers(1, la).filter(lambda k: k != from_right_b), label="position from right in a")
    rest = [p for p in POOL if p != "a"]
    a = [data.draw(st.sampled_from(rest + [None])) for _ in range(la)]
    b = [data.draw(st.sampled_from(rest + [None])) for _ in range(lb)]
    a[la - ka] = "a"
    b[j] = "a"
    if ka <= lb:
        b[lb - ka] = None  # "a" in a is paired with None in b
    assume(len({n for n in a if n}) == len([n for n in a if n]))
    assume(len({n for n in b if n}) == len([n for n in b if n]))
    a, b = tuple(a), tuple(b)
    with pytest.raises(NamesError):
        N.unify(a, b)
    with pytest.raises(NamesError):
        N.unify(b, a)


def test_unify_error_not_cached_as_result():
    with pytest.raises(NamesError):
        N.unify(("a",), ("b",))
    with pytest.raises(NamesError, match="second op"):
        N.unify(("a",), ("b",), "second op")


def test_unify_all():
    with pytest.raises(NamesError, match="where"):
        N.unify_all([("a", None), (None, "b"), ("c",)], "where")
    assert N.unify_all([("a", None), (None, "b"), (None,)], "where") == ("a", "b")
    assert N.unify_all([("x",)], "where") == ("x",)


# ----------------------------------------------------------------------------- rule 3: dims by name


def test_axis():
    names = ("N", None, "C")
    assert N.axis(names, "C") == 2
    assert N.axis(names, 1) == 1
    assert N.axis(names, -1) == 2
    assert N.axis(names, np.int64(-3)) == 0  # anything with __index__
    with raises(["sum: no dim named 'H' in a tensor with names ('N', None, 'C')", "refine_names/rename"]):
        N.axis(names, "H", "sum")
    with raises(["sum: a dim must be a name or an int, got None"]):
        N.axis(names, None, "sum")
    with raises(["sum: dim 3 is out of range for a tensor with 3 dims"], IndexError):
        N.axis(names, 3, "sum")
    with raises(["dim -4 is out of range"], IndexError):
        N.axis(names, -4)
    with raises(["a dim must be a name (str) or an int, got float 1.0"], TypeError):
        N.axis(names, 1.0)
    with raises(["got bool True"], TypeError):
        N.axis(names, True)


def test_axis_or_new():
    names = ("a", "b")
    assert N.axis_or_new(names, 2, "unsqueeze") == 2
    assert N.axis_or_new(names, -1, "unsqueeze") == 2
    assert N.axis_or_new(names, -3, "unsqueeze") == 0
    assert N.axis_or_new(names, "b", "unsqueeze") == 1
    with raises(["unsqueeze: position 3 is out of range for a result with 3 dims"], IndexError):
        N.axis_or_new(names, 3, "unsqueeze")
    with raises(["unsqueeze: a position must be an int, got float"], TypeError):
        N.axis_or_new(names, 1.5, "unsqueeze")
    with raises(["unsqueeze: a position must be an int, got bool"], TypeError):
        N.axis_or_new(names, False, "unsqueeze")
    assert N.axis_or_new(names, np.int64(-1), "unsqueeze") == 2  # anything with __index__, as axis takes


def test_axes():
    names = ("a", "b", "c")
    assert N.axes(names, None) == (0, 1, 2)
    assert N.axes(names, "b") == (1,)
    assert N.axes(names, ("c", 0)) == (2, 0)
    assert N.axes(names, ["c", "a"]) == (2, 0)  # lists work too (not hashable for the cache)
    with raises(["mean: dims ('a', 0) name the same dim twice in a tensor with names ('a', 'b', 'c')"]):
        N.axes(names, ("a", 0), "mean")
    with raises(["no dim named 'z'"]):
        N.axes(names, ("a", "z"))


def test_hashable_dims():
    assert N.hashable_dims(["a", 1]) == ("a", 1)
    assert N.hashable_dims(("a",)) == ("a",)
    assert N.hashable_dims("a") == "a"
    assert N.hashable_dims(None) is None


def test_reduce():
    names = ("batch", None, "feat")
    assert N.reduce(names, "feat", False) == ((2,), ("batch", None))
    assert N.reduce(names, ("batch", 1), False) == ((0, 1), ("feat",))
    assert N.reduce(names, None, False) == ((0, 1, 2), ())
    assert N.reduce(names, "feat", True) == ((2,), names)
    assert N.reduce(names, "batch", False) == ((0,), (None, "feat"))
    assert N.reduce(("a", None), "a", False)[1] is N.unnamed(1)
    with raises(["sum: no dim named 'seq'"]):
        N.reduce(names, "seq", False, "sum")


def test_caches_tell_int_from_float_and_bool():
    # 1.0 == 1 == True and they hash alike: a cached answer for 1 must not answer for 1.0 or True
    names = ("p", "q")
    assert N.axis(names, 1) == 1
    assert N.reduce(names, 1, False) == ((1,), ("p",))
    with pytest.raises(TypeError, match="float"):
        N.axis(names, 1.0)
    with pytest.raises(TypeError, match="bool"):
        N.axis(names, True)
    with pytest.raises(TypeError, match="float"):
        N.reduce(names, 1.0, False)


def test_remove_and_insert():
    assert N.remove(("a", "b", "c"), 1) == ("a", "c")
    assert N.remove(("a", None), 0) is N.unnamed(1)
    assert N.insert(("a", "b"), 1, "k") == ("a", "k", "b")
    assert N.insert(("a", "b"), 2, None) == ("a", "b", None)
    with raises(["unsqueeze: the new dim name 'a' is already a dim of ('a', 'b')"]):
        N.insert(("a", "b"), 0, "a")
    with raises(["stack: invalid dim name '1k'"]):
        N.insert(("a",), 0, "1k", "stack")


# ----------------------------------------------------------------------------- naming


def test_rename_positional():
    names = ("N", "C", "H", "W")
    assert N.rename_positional(names, ("batch", "C", "H", "W")) == ("batch", "C", "H", "W")
    assert N.rename_positional(names, (..., "height", "width")) == ("N", "C", "height", "width")
    assert N.rename_positional(names, ("batch", "...", "width")) == ("batch", "C", "H", "width")
    assert N.rename_positional(names, ("N", "C", "H", ..., "W")) == names  # empty ellipsis
    assert N.rename_positional(names, (None, None, None, None)) is N.unnamed(4)
    with raises(["rename: at most one '...' is allowed"]):
        N.rename_positional(names, (..., "x", ...))
    with raises(["rename: 5 names", "only 4 dims ('N', 'C', 'H', 'W')"]):
        N.rename_positional(names, ("a", "b", "c", "d", "e", ...))
    with raises(["rename: got 2 names ('a', 'b') for a tensor with 4 dims"]):
        N.rename_positional(names, ("a", "b"))
    with raises(["rename: duplicate dim name 'C'"]):
        N.rename_positional(names, ("C", ...))


def test_rename_mapping():
    names = ("N", "C", None)
    assert N.rename_mapping(names, (("N", "batch"),)) == ("batch", "C", None)
    assert N.rename_mapping(names, (("N", "C"), ("C", "N"))) == ("C", "N", None)  # swap
    assert N.rename_mapping(names, (("C", None),)) == ("N", None, None)
    with raises(["rename: cannot rename 'B' to 'batch': no dim named 'B' in ('N', 'C', None)"]):
        N.rename_mapping(names, (("B", "batch"),))
    with raises(["rename: duplicate dim name 'C'"]):
        N.rename_mapping(names, (("N", "C"),))
    with raises(["invalid dim name '2'"]):
        N.rename_mapping(names, (("N", "2"),))


def test_refine():
    assert N.refine((None, None), ("N", "C")) == ("N", "C")
    assert N.refine(("N", None), ("N", "C")) == ("N", "C")
    assert N.refine((None,) * 5, ("A", ..., "B", "C")) == ("A", None, None, "B", "C")
    assert N.refine(("x", None, None), (..., "y")) == ("x", None, "y")
    with raises(["refine_names: cannot refine (None, None) to ('N', 'C', 'H'): 2 dims but 3 names"]):
        N.refine((None, None), ("N", "C", "H"))
    with raises(["refine_names: cannot refine ('D',) to ('N',): 'D' is different from 'N' at dim 0",
                 "use rename to change a name"]):
        N.refine(("D",), ("N",))
    with raises(["'D' is more specific than None at dim 0"]):
        N.refine(("D",), (None,))
    with raises(["refine_names: duplicate dim name 'a'"]):
        N.refine((None, None), ("a", "a"))
    with raises(["at most one '...'"]):
        N.refine((None, None), (..., ...))


@given(name_tuples(), st.data())
def test_rename_round_trip(names, data):
    other = data.draw(name_tuples(min_dims=len(names), max_dims=len(names)))
    there = N.rename_positional(names, other)
    assert there == other
    assert N.rename_positional(there, names) == names


@given(name_tuples(min_dims=1))
def test_refine_round_trips(names):
    assert N.refine(N.unnamed(len(names)), names) == names  # an unnamed dim takes any name
    assert N.refine(names, names) == names  # a named dim keeps its own
    assert N.refine(names, (...,)) == names


def test_align_to_examples():
    # PyTorch's T[N:7, H:3, W:5, C:2] examples
    names = ("N", "H", "W", "C")
    assert N.align_to(names, ("...", "W", "N")) == ((1, 3, 2, 0), ("H", "C", "W", "N"))
    assert N.align_to(names, ("N", ..., "C", "D", "H", "W")) == ((0, 3, -1, 1, 2), ("N", "C", "D", "H", "W"))
    assert N.align_to((None, None, None, "C"), ("C", ...)) == ((3, 0, 1, 2), ("C", None, None, None))
    assert N.align_to(("a",), ("x", "a", "y")) == ((-1, 0, -1), ("x", "a", "y"))


def test_align_to_errors():
    with raises(["align_to: dim 0 of (None, 'C') is unnamed", "refine_names", "'...'"]):
        N.align_to((None, "C"), ("C",))
    with raises(["align_to: dim 'N' of ('N', 'C') is not in the order ('C',)", "'...'"]):
        N.align_to(("N", "C"), ("C",))
    with raises(["align_to: the order ('C', None) contains None"]):
        N.align_to(("C",), ("C", None))
    with raises(["align_to: the order ('C', 'C') lists a name twice"]):
        N.align_to(("C",), ("C", "C"))
    with raises(["align_to: at most one '...'"]):
        N.align_to(("C",), (..., "C", ...))
    with raises(["align_as: invalid dim name '1'"]):
        N.align_to(("C",), ("C", "1"), "align_as")


def test_align_as():
    assert N.align_as(("C",), ("N", "C", "H")) == ((-1, 0, -1), ("N", "C", "H"))
    assert N.align_as(("b", "a"), ("a", None, "b")) == ((1, -1, 0), ("a", None, "b"))
    assert N.align_as((), (None, "a")) == ((-1, -1), (None, "a"))
    # align_as has no '...': its advice is align_to's, with '...'
    with raises(["align_as: dim 0 of (None, 'b') is unnamed, so it has no place in ('a', None, 'b')",
                 "refine_names", "use align_to with '...'"]):
        N.align_as((None, "b"), ("a", None, "b"))
    for other in (("a", "b"), ("a", None)):
        with raises([f"align_as: dim 'z' of ('z',) is not a dim of {N.fmt(other)}; rename it, or use align_to "
                     "with '...'"]):
            N.align_as(("z",), other)


@given(name_tuples(named=True), st.data())
def test_align_to_round_trip(names, data):
    order = tuple(data.draw(st.permutations(names)))
    source, out = N.align_to(names, order)
    assert out == order
    back, again = N.align_to(out, names)
    assert again == names
    assert tuple(source[b] for b in back) == tuple(range(len(names)))


@given(name_tuples(min_dims=1), st.data())
def test_align_to_ellipsis_keeps_the_rest_in_order(names, data):
    named = [n for n in names if n is not None]
    front = tuple(data.draw(st.lists(st.sampled_from(named), unique=True))) if named else ()
    source, out = N.align_to(names, front + (...,))
    rest = [i for i, n in enumerate(names) if n not in front]
    assert source == tuple(names.index(n) for n in front) + tuple(rest)
    assert out == tuple(names[s] for s in source)


def test_align_union():
    assert N.align_union((("x",), ("y",))) == ("x", "y")  # order of first appearance
    assert N.align_union((("x", "z"), ("y", "z"))) == ("x", "y", "z")
    assert N.align_union((("feat",), ("batch", "feat"))) == ("batch", "feat")
    assert N.align_union((("a", "b"), ("b", "c"), ("a", "c"))) == ("a", "b", "c")
    assert N.align_union(((), ("a",))) == ("a",)
    with raises(["align: the tensors order their shared dims differently (('x', 'y'), ('y', 'x'))",
                 "align_to one order first"]):
        N.align_union((("x", "y"), ("y", "x")))
    with raises(["order their shared dims differently"]):
        N.align_union((("x", "y"), ("y", "z"), ("z", "x")))
    with raises(["align: aligns by name, but dim 1 of ('a', None) is unnamed", "tensors: ('a', None), ('a',)", "refine_names"]):
        N.align_union((("a", None), ("a",)))


@given(st.lists(name_tuples(named=True), min_size=1, max_size=3))
def test_align_union_is_consistent_with_every_order(all_names):
    try:
        out = N.align_union(tuple(all_names))
    except NamesError:
        return
    assert sorted(out) == sorted({n for names in all_names for n in names})
    for names in all_names:
        assert [n for n in out if n in names] == list(names)


def test_permute():
    names = ("a", None, "c")
    assert N.permute(names, ("c", 1, "a")) == ((2, 1, 0), ("c", None, "a"))
    assert N.permute(names, (2, 0, 1)) == ((2, 0, 1), ("c", "a", None))
    assert N.permute(names, ("c", ...)) == ((2, 0, 1), ("c", "a", None))
    with raises(["permute: got 2 dims ('a', 'c') for a tensor with 3 dims ('a', None, 'c')", "'...'"]):
        N.permute(names, ("a", "c"))
    with raises(["permute: '...' can only be combined with names"]):
        N.permute(names, (0, ...))
    with raises(["permute: no dims named ['z']"]):
        N.permute(names, ("z", ...))
    with raises(["permute: dims", "name the same dim twice"]):
        N.permute(names, ("a", 0, 1))


def test_transpose():
    assert N.transpose(("a", "b", "c"), "a", "c") == ((2, 1, 0), ("c", "b", "a"))
    assert N.transpose(("a", "b", "c"), -1, -2) == ((0, 2, 1), ("a", "c", "b"))
    assert N.transpose(("a", "b"), "a", "a") == ((0, 1), ("a", "b"))
    with raises(["transpose: no dim named 'z'"]):
        N.transpose(("a", "b"), "z", "a")


# ----------------------------------------------------------------------------- reshapes


def test_flatten():
    names = ("N", "C", "H", "W")
    assert N.flatten(names, ("H", "W"), "HW") == (2, 4, ("N", "C", "HW"))
    assert N.flatten(names, ("C", "H"), "H") == (1, 3, ("N", "H", "W"))  # may reuse a flattened name
    with raises(["flatten: dims ('W', 'H') must be consecutive and in order in ('N', 'C', 'H', 'W')"]):
        N.flatten(names, ("W", "H"), "x")
    with raises(["must be consecutive"]):
        N.flatten(names, ("C", "W"), "x")
    with raises(["flatten: dims cannot be empty"]):
        N.flatten(names, (), "x")
    with raises(["flatten: the new name 'N' is already a dim of ('N', 'C', 'H', 'W')"]):
        N.flatten(names, ("H", "W"), "N")


def test_unflatten():
    assert N.unflatten(("a", "b"), 1, ("x", "y")) == ("a", "x", "y")
    assert N.unflatten(("a", "b"), 1, ("b", "y")) == ("a", "b", "y")
    with raises(["unflatten: the new name 'a' is already a dim of ('a', 'b')"]):
        N.unflatten(("a", "b"), 1, ("a", "y"))
    with raises(["unflatten: the new sizes must be non-empty"]):
        N.unflatten(("a", "b"), 1, ())


def test_broadcast_to():
    assert N.broadcast_to(("b",), ("a", "b")) == ("a", "b")
    assert N.broadcast_to(("b",), (None, None)) == (None, "b")
    with raises(["broadcast_to: cannot broadcast 2 dims ('a', 'b') to 1 dims"], ValueError):
        N.broadcast_to(("a", "b"), ("b",))
    with raises(["broadcast_to: dims ('a',) and ('b',) do not match"]):
        N.broadcast_to(("a",), ("b",))


# ----------------------------------------------------------------------------- joins


def test_cat():
    assert N.cat((("a", None), (None, "b")), "a") == (0, ("a", "b"))
    assert N.cat((("a", "b"), ("a", "b")), -1) == (1, ("a", "b"))
    with raises(["cat: the tensors' names must match dim by dim", "('a', 'b'), ('b', 'a')", "rename"]):
        N.cat((("a", "b"), ("b", "a")), 0)
    with raises(["cat: all tensors must have the same number of dims"], ValueError):
        N.cat((("a",), ("a", "b")), 0)
    with raises(["cat: zero-dimensional tensors cannot be concatenated"], ValueError):
        N.cat(((), ()), 0)


def test_stack():
    assert N.stack((("a",), ("a",)), "k") == (0, ("k", "a"))
    assert N.stack((("a",), (None,)), -1) == (1, ("a", None))
    assert N.stack((("a",), ("a",)), 0) == (0, (None, "a"))
    with raises(["stack: the new dim name 'a' is already a dim of ('a',)"]):
        N.stack((("a",), ("a",)), "a")
    with raises(["stack: the tensors' names must match dim by dim"]):
        N.stack((("a",), ("b",)), "k")
    with raises(["stack: all tensors must have the same number of dims"], ValueError):
        N.stack((("a",), ()), "k")


# ----------------------------------------------------------------------------- contractions


def test_matmul():
    assert N.matmul(("b", "i", "j"), ("j", "k")) == ("b", "i", "k")
    assert N.matmul(("i", None), (None, "k")) == ("i", "k")
    assert N.matmul(("i", "j"), ("j",)) == ("i",)
    assert N.matmul(("j",), ("j", "k")) == ("k",)
    assert N.matmul(("j",), ("j",)) == ()
    assert N.matmul(("b", None, "i", "j"), (None, "h", "j", "k")) == ("b", "h", "i", "k")
    with raises(["matmul: the contracted dims differ: 'j' (last dim of ('i', 'j')) vs 'x' "
                 "(second-to-last dim of ('x', 'k'))", "nt.dot(..., over=...)"]):
        N.matmul(("i", "j"), ("x", "k"))
    with raises(["(only dim of ('x',))"]):
        N.matmul(("i", "j"), ("x",))
    with raises(["matmul: ('i', 'j') @ ('j', 'i') would give duplicate names ('i', 'i')"]):
        N.matmul(("i", "j"), ("j", "i"))
    with raises(["matmul: both operands need at least 1 dim"], ValueError):
        N.matmul((), ("a",))
    with raises(["misaligned: 'k'", "A batch dim of one operand is a matrix dim of the other"]):
        N.matmul(("k", "i", "j"), ("j", "k"))
    with raises(["matmul: dims ('a',) and ('b',) do not match"]):
        N.matmul(("a", "i", "j"), ("b", "j", "k"))


def test_contract():
    ids, out_ids, out = N.contract((("b", "i", "j"), ("b", "j", "k")), ("j",), None)
    assert ids == ((0, 1, 2), (0, 2, 3))
    assert out_ids == (0, 1, 3)
    assert out == ("b", "i", "k")
    assert N.contract((("b", "i", "j"), ("b", "j", "k")), ("j",), ("k", "b", "i"))[1:] == ((3, 0, 1), ("k", "b", "i"))
    with raises(["dot: contracts by name, but dim 0 of (None, 'j') is unnamed", "refine_names"]):
        N.contract(((None, "j"), ("j",)), ("j",), None)
    with raises(["dot: cannot contract over 'z': no operand has it (operands: ('j',), ('j',))"]):
        N.contract((("j",), ("j",)), ("z",), None)
    with raises(["dot: over=('j', 'j') lists a name twice"]):
        N.contract((("j",), ("j",)), ("j", "j"), None)
    with raises(["dot: out=('i',) must list exactly the dims that are not contracted: ('i', 'k')"]):
        N.contract((("i", "j"), ("j", "k")), ("j",), ("i",))


def test_outer():
    assert N.outer(("i",), ("j", None)) == ("i", "j", None)
    with raises(["outer: ('i',) and ('i',) share the name 'i'", "nt.dot"]):
        N.outer(("i",), ("i",))


def test_parse_einsum():
    refined, out = N.parse_einsum("batch seq d, d out -> batch seq out", ((None, None, None), (None, "out")))
    assert refined == (("batch", "seq", "d"), ("d", "out"))
    assert out == ("batch", "seq", "out")
    assert N.parse_einsum("ij,jk->ik", ((None, None), (None, None))) == ((("i", "j"), ("j", "k")), ("i", "k"))
    with raises(["einsum: the spec 'ij,jk' needs '->'"], ValueError):
        N.parse_einsum("ij,jk", ((None, None), (None, None)))
    with raises(["einsum: the spec 'i->i' has 1 operands but 2 tensors were given"], ValueError):
        N.parse_einsum("i->i", ((None,), (None,)))
    with raises(["einsum: the spec gives 1 dims ('i',) for an operand with names (None, None)"]):
        N.parse_einsum("i->i", ((None, None),))
    with raises(["einsum: cannot refine ('x',) to ('i',)"]):
        N.parse_einsum("i->i", (("x",),))
    with raises(["einsum: the spec '...ij,jk->...ik' uses '...'", "name every dim"], ValueError):
        N.parse_einsum("...ij,jk->...ik", ((None, None), (None, None)))


# ----------------------------------------------------------------------------- indexing


def test_index():
    names = ("a", "b", "c")
    S, I, NEW = ("slice",), ("int",), ("new",)
    assert N.index(names, (I, S, S)) == ("b", "c")
    assert N.index(("a", "b"), (NEW, I, S)) == (None, "b")
    assert N.index(names, (S, ("array", ("k",)), S)) == ("a", "k", "c")
    assert N.index(names, (("array", (None,)), S, S)) == names  # a lone unnamed 1-D index keeps the dim's name
    assert N.index(names, (("array", ("k",)), S, ("array", ("k",)))) == ("k", "b")  # separated: in front
    assert N.index(names, (("mask", 2, (None, None)), S)) == (None, "c")
    with raises(["getitem: indexing ('a', 'b', 'c') with index tensors named ('c',)", "would repeat a name",
                 "rename the index tensor"]):
        N.index(names, (("array", ("c",)), S, S))
    with raises(["getitem: dims ('a', 'b') and ('b', 'a') do not match"]):
        N.index(names, (("mask", 2, ("b", "a")), S))


def test_gather():
    assert N.gather(("a", "b"), 1, ("a", "k")) == ("a", "k")
    assert N.gather(("a", "b"), 1, (None, None)) == ("a", "b")
    assert N.gather((None, "b"), 1, ("a", None)) == ("a", "b")
    with raises(["gather: the index's names ('x', 'k') do not match the input's ('a', 'b') outside dim 1: "
                 "'a' vs 'x'"]):
        N.gather(("a", "b"), 1, ("x", "k"))
    with raises(["gather: the index must have the same number of dims as the input"], ValueError):
        N.gather(("a", "b"), 1, ("k",))


def test_replace():
    assert N.replace(("a", "b", "c"), 1, ("x", "y"), "index_select") == ("a", "x", "y", "c")
    assert N.replace(("a", "b"), 0, (), "select") == ("b",)
    with raises(["index_select: replacing dim 1 ('b') of ('a', 'b', 'c') by ('a',) would repeat a name"]):
        N.replace(("a", "b", "c"), 1, ("a",), "index_select")


def test_index_select():
    assert N.index_select(("a", "b"), 1, ("k",)) == ("a", "k")  # a named index replaces the dim's name
    assert N.index_select(("a", "b"), 1, (None,)) == ("a", "b")  # an unnamed one keeps it
    with raises(["index_select: replacing dim 1 ('b') of ('a', 'b') by ('a',) would repeat a name"]):
        N.index_select(("a", "b"), 1, ("a",))


def test_masked_and_inplace():
    assert N.masked(("a", "b"), ("b",)) == ("a", "b")
    assert N.masked(("a", None), (None, "b")) == ("a", "b")
    with raises(["masked_fill: the mask has more dims ('x', 'a') than the tensor ('a',)"], ValueError):
        N.masked(("a",), ("x", "a"))
    with raises(["masked_fill: dims ('a', 'b') and ('a',) do not match"]):
        N.masked(("a", "b"), ("a",))
    assert N.inplace(("a", None), ("b",), "add_") == ("a", "b")
    with raises(["add_: the other operand ('x', 'a') has more dims than self ('a',)", "cannot grow self"],
                ValueError):
        N.inplace(("a",), ("x", "a"), "add_")
    with raises(["add_: dims ('a',) and ('b',) do not match"]):
        N.inplace(("a",), ("b",), "add_")


# ----------------------------------------------------------------------------- attention


def test_attention_is_its_dims_then_their_layout():
    q, k, v = ("batch", "head", "seq", "d"), ("key", "batch", "d", "head"), ("head", "key", "value")
    dims = N.attention_dims(q, k, v, "d", "key")
    assert dims == (("batch", "head"), "seq", "value")
    plan = N.attention(q, k, v, "d", "key")
    assert plan == N.attention_layout(q, k, v, "d", "key", *dims)
    assert plan == ((0, 1, 2, 3), (1, 3, 0, 2), (-1, 0, 1, 2),  # v lacks 'batch': a size-1 dim (-1)
                    ("batch", "head", "seq", "value"), ("batch", "head", "seq", "key"))
    assert N.attention(q, k, v, "d", "key") is plan  # cached: it is planned on every forward


def test_attention_query_dim_and_error_order():
    q, kv = ("batch", "head", "seq", "d"), ("batch", "key", "d")  # multi-query: k and v lack 'head'
    assert N.attention_dims(q, kv, kv, "d", "key", "seq") == (("batch", "head"), "seq", "d")
    with raises(["op: cannot infer the queries' sequence dim: q has 2 dims", "'head', 'seq'"]):
        N.attention(q, kv, kv, "d", "key", None, "op")
    # unnamed dims first, then the arguments' names, then where dim and key_dim are
    with raises(["op: attention matches q, k and v by name, but dim 0 of v is unnamed"]):
        N.attention(q, ("key",), (None,), "x", "1bad", None, "op")
    with raises(["op: invalid dim name '1bad'"]):
        N.attention(q, ("key",), ("key",), "x", "1bad", None, "op")
    with raises(["op: dim='x' must be the feature dim that q and k share"]):
        N.attention(q, ("key",), ("key",), "x", "key", "nope", "op")


@given(st.data())
def test_attention_sources_take_each_operand_to_its_working_layout(data):
    batch = tuple(data.draw(st.permutations(("a", "b", "c")))[:data.draw(st.integers(0, 3))])
    k_batch = tuple(n for n in batch if data.draw(st.booleans()))
    v_batch = tuple(n for n in batch if data.draw(st.booleans()))
    q = tuple(data.draw(st.permutations(batch + ("seq", "d"))))
    k = tuple(data.draw(st.permutations(k_batch + ("key", "d"))))
    v = tuple(data.draw(st.permutations(v_batch + ("key", "e"))))
    inferable = k_batch == batch  # else q has dims besides 'seq' that k lacks: query_dim= says which
    query_dim = data.draw(st.sampled_from((None, "seq"))) if inferable else "seq"
    q_src, k_src, v_src, out, weights = N.attention(q, k, v, "d", "key", query_dim)
    q_batch = tuple(n for n in q if n in batch)

    def layout(names, src):
        return tuple(names[s] if s >= 0 else None for s in src)

    assert layout(q, q_src) == q_batch + ("seq", "d")
    assert layout(k, k_src) == tuple(n if n in k else None for n in q_batch) + ("key", "d")
    assert layout(v, v_src) == tuple(n if n in v else None for n in q_batch) + ("key", "e")
    assert out == tuple("e" if n == "d" else n for n in q)
    assert weights == q_batch + ("seq", "key")
