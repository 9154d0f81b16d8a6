"""Named[...] annotations and @check_names: accepted calls, rejected calls and their messages."""
# ruff: noqa: F821 - the strings in Named["batch", ...] are dim names, not forward references

from __future__ import annotations

import functools
import typing
from typing import Annotated, Optional, Tuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.checking import Named, NamesSpec, check_names
from namedtensor.testing import strategies as nts


def t(*named_sizes):
    """t(("batch", 2), (None, 3)): a zero tensor with those names and sizes."""
    names = tuple(n for n, _ in named_sizes)
    shape = tuple(s for _, s in named_sizes)
    return nt.tensor(np.zeros(shape), names=names)


# --------------------------------------------------------------------------- the annotation


def test_named_is_annotated_tensor():
    hint = Named["batch", "seq"]
    assert typing.get_origin(hint) is typing.Annotated
    assert typing.get_args(hint) == (nt.Tensor, NamesSpec("batch", "seq"))


def test_get_type_hints_sees_tensor():
    def f(x: Named["batch", ...], m: Optional[Named["batch"]] = None) -> Named["batch"]:
        return x

    hints = typing.get_type_hints(f)
    assert hints["x"] is nt.Tensor and hints["return"] is nt.Tensor
    assert hints["m"] == Optional[nt.Tensor]
    extras = typing.get_type_hints(f, include_extras=True)
    assert extras["x"].__metadata__ == (NamesSpec("batch", ...),)


def test_string_form_long_form_and_repr():
    assert Named["batch seq embed"] == Named["batch", "seq", "embed"]
    assert Named[nt.Tensor, "batch", ...] == Named["batch", ...] == Annotated[nt.Tensor, NamesSpec("batch", ...)]
    assert Named[nt.Tensor, "batch seq"] == Named["batch", "seq"]
    assert Named["batch ... embed"] == Named["batch", ..., "embed"]
    assert Named["batch"] == Named["batch",]
    assert repr(NamesSpec("batch", None, ...)) == "Named['batch', None, ...]"


@pytest.mark.parametrize("bad, match", [
    (("1x",), "invalid dim name '1x'"),
    (("a", 3), "must be a str or None"),
    (("a", ..., "b", ...), "at most once"),
    (("a", "b", "a"), "'a' appears twice"),
])
def test_bad_specs_fail_at_subscription(bad, match):
    with pytest.raises(nt.NamesError, match=match):
        Named[bad]


def test_named_is_not_instantiable_and_spec_is_immutable():
    with pytest.raises(TypeError, match="is an annotation"):
        Named()
    with pytest.raises(AttributeError, match="immutable"):
        NamesSpec("a").names = ("b",)
    with pytest.raises(nt.NamesError, match="at most once"):
        NamesSpec(..., "a", ...)


# --------------------------------------------------------------------------- match_spec


@pytest.mark.parametrize("names, spec, axes", [
    (("a", "b", "c"), ("a", "b", "c"), (0, 1, 2)),
    (("a", "b", "c"), (..., "c"), (2,)),
    (("a", "b", "c"), ("a", ...), (0,)),
    (("a", "b", "c"), ("a", ..., "c"), (0, 2)),
    (("a", "c"), ("a", ..., "c"), (0, 1)),
    (("a", None), ("a", None), (0, 1)),
    ((), (...,), ()),
    (("a", "b"), ("b", "a"), None),
    (("a", "b"), ("a",), None),
    (("a",), ("a", ..., "a2"), None),
    (("a", "b"), ("a", None), None),
    ((None, "b"), ("a", "b"), None),
])
def test_match_spec(names, spec, axes):
    assert _names.match_spec(names, spec) == axes


# --------------------------------------------------------------------------- successes


def test_exact_ellipsis_and_none_dims():
    @check_names
    def f(x: Named["batch", "seq", "embed"], y: Named[..., "embed"], z: Named["batch", ...],
          w: Named["batch", ..., "embed"], u: Named[None, "embed"]) -> Named["batch", "embed"]:
        return x.sum("seq")

    x = t(("batch", 2), ("seq", 3), ("embed", 4))
    out = f(x, t(("embed", 4)), t(("batch", 2), ("k", 5)), x, t((None, 7), ("embed", 4)))
    assert out.names == ("batch", "embed")


def test_optional_argument_and_defaults():
    @check_names
    def f(x: Named["batch"], mask: Optional[Named["batch"]] = None) -> Named["batch"]:
        return x if mask is None else x * mask

    x = t(("batch", 3))
    assert f(x).names == ("batch",)
    assert f(x, None).names == ("batch",)
    assert f(x, mask=x).names == ("batch",)
    with pytest.raises(nt.NamesError, match="argument 'mask' expected names Named\\['batch'\\]"):
        f(x, mask=t(("seq", 3)))


def test_tuple_returns():
    @check_names
    def split(x: Named["a", "b"]) -> Tuple[Named["a"], Named["b"], int]:
        return x.sum("b"), x.sum("a"), 1

    a, b, n = split(t(("a", 2), ("b", 3)))
    assert (a.names, b.names, n) == (("a",), ("b",), 1)

    @check_names
    def many(x: Named["a", "b"]) -> Tuple[Named["a"], ...]:
        return (x.sum("b"), x.sum("a"))

    with pytest.raises(nt.NamesError, match=r"the return value \[1\] expected names Named\['a'\]"):
        many(t(("a", 2), ("b", 3)))

    @check_names
    def rows(x: Named["a", "b"]) -> Tuple[Named["b"], ...]:
        return x.unbind("a")

    assert [r.names for r in rows(t(("a", 2), ("b", 3)))] == [("b",), ("b",)]

    @check_names
    def short_rows(x: Named["a", "b"]) -> Tuple[Named["b"], ...]:
        return tuple(r[:2] for r in x.unbind("a"))

    with pytest.raises(nt.NamesError, match=(r"short_rows: size conflict on dim 'b': argument 'x' has 'b' of size 3 "
                                             r".*the return value \[0\] has 'b' of size 2")):
        short_rows(t(("a", 2), ("b", 3)))

    @check_names
    def pair(x: Named["a"]) -> Tuple[Named["a"], Named["a"]]:
        return (x,)

    with pytest.raises(TypeError, match="pair: the return value must be a tuple of 2 items, got 1"):
        pair(t(("a", 2)))


def test_methods_and_forward_references():
    class Layer:
        @check_names
        def __call__(self, x: Named["batch", "embed"]) -> Named["batch"]:
            return x.sum("embed")

        @check_names
        def me(self, x: Named["batch"]) -> Layer:
            return self

    layer = Layer()
    assert layer(t(("batch", 2), ("embed", 3))).names == ("batch",)
    with pytest.raises(nt.NamesError, match="Layer.__call__: argument 'x'"):
        layer(t(("embed", 3), ("batch", 2)))
    assert layer.me(t(("batch", 1))) is layer


def test_static_class_methods_and_keyword_only():
    class Ops:
        @staticmethod
        @check_names
        def total(x: Named["batch", ...]) -> Named["batch"]:
            return x.sum(tuple(range(1, x.ndim))) if x.ndim > 1 else x

        @classmethod
        @check_names
        def scale(cls, x: Named["batch"], *, by: Named["batch"]) -> Named["batch"]:
            return x * by

    x = t(("batch", 2), ("seq", 3))
    assert Ops.total(x).names == ("batch",)
    assert Ops().scale(t(("batch", 2)), by=t(("batch", 2))).names == ("batch",)
    with pytest.raises(nt.NamesError, match="Ops.scale: size conflict on dim 'batch'.*'by' has 'batch' of size 3"):
        Ops.scale(t(("batch", 2)), by=t(("batch", 3)))
    with pytest.raises(TypeError, match="too many positional arguments"):  # a bad call fails as Python's
        Ops.scale(t(("batch", 2)), t(("batch", 2)))


def test_star_args():
    @check_names
    def total(*xs: Named["batch"]) -> Named["batch"]:
        return functools.reduce(lambda a, b: a + b, xs)

    assert total(t(("batch", 2)), t(("batch", 2))).names == ("batch",)
    with pytest.raises(nt.NamesError, match=r"argument '\*xs'\[1\] has 'batch' of size 3"):
        total(t(("batch", 2)), t(("batch", 3)))


def test_annotated_with_names_spec_is_checked():
    @check_names
    def f(x: Annotated[nt.Tensor, NamesSpec("batch", ...)]) -> Annotated[nt.Tensor, "other metadata"]:
        return x

    assert f(t(("batch", 2))).names == ("batch",)
    with pytest.raises(nt.NamesError, match=r"f: argument 'x' expected names Named\['batch', \.\.\.\]"):
        f(t(("seq", 2)))


def test_wraps_preserves_metadata():
    def f(x: Named["a"]) -> Named["a"]:
        """Doc."""
        return x

    g = check_names(f)
    assert g.__name__ == "f" and g.__doc__ == "Doc." and g.__wrapped__ is f
    assert typing.get_type_hints(g)["x"] is nt.Tensor


# --------------------------------------------------------------------------- failures and their messages


@check_names
def attend(q: Named["batch", "seq", "embed"], k: Named["batch", "key", "embed"]) -> Named["batch", "seq", "key"]:
    return nt.einsum("bse,bke->bsk", q.rename(None), k.rename(None)).rename("batch", "seq", "key")


def test_attend_accepts():
    q, k = t(("batch", 2), ("seq", 3), ("embed", 4)), t(("batch", 2), ("key", 5), ("embed", 4))
    assert attend(q, k).names == ("batch", "seq", "key")


def test_wrong_names_message():
    k = t(("batch", 2), ("key", 5), ("embed", 4))
    with pytest.raises(nt.NamesError) as e:
        attend(t(("batch", 2), ("time", 3), ("embed", 4)), k)
    msg = str(e.value)
    assert "attend: argument 'q' expected names Named['batch', 'seq', 'embed']" in msg
    assert "got names ('batch', 'time', 'embed') with shape (2, 3, 4)" in msg
    assert "must match in order" in msg


def test_wrong_order_and_missing_dims():
    k = t(("batch", 2), ("key", 5), ("embed", 4))
    with pytest.raises(nt.NamesError, match=r"got names \('seq', 'batch', 'embed'\) with shape \(3, 2, 4\)"):
        attend(t(("seq", 3), ("batch", 2), ("embed", 4)), k)
    with pytest.raises(nt.NamesError, match=r"argument 'q' .* got names \('batch', 'embed'\) with shape \(2, 4\)"):
        attend(t(("batch", 2), ("embed", 4)), k)
    with pytest.raises(nt.NamesError, match=r"got names \(None, None, None\)"):
        attend(nt.tensor(np.zeros((2, 3, 4))), k)


def test_size_conflict_across_arguments():
    q = t(("batch", 2), ("seq", 3), ("embed", 4))
    with pytest.raises(nt.NamesError) as e:
        attend(q, t(("batch", 2), ("key", 5), ("embed", 6)))
    msg = str(e.value)
    assert "attend: size conflict on dim 'embed'" in msg
    assert "argument 'q' has 'embed' of size 4 (shape (2, 3, 4))" in msg
    assert "argument 'k' has 'embed' of size 6 (shape (2, 5, 6))" in msg


def test_size_conflict_between_argument_and_return():
    @check_names
    def f(x: Named["batch", "seq"]) -> Named["batch"]:
        return nt.zeros(x.shape[0] + 1, names=("batch",))

    with pytest.raises(nt.NamesError, match=(r"f: size conflict on dim 'batch': argument 'x' has 'batch' of size 2 "
                                             r".*the return value has 'batch' of size 3")):
        f(t(("batch", 2), ("seq", 3)))


def test_wrong_return_names():
    @check_names
    def f(x: Named["batch", "seq"]) -> Named["batch"]:
        return x.sum("batch")

    with pytest.raises(nt.NamesError, 
                       match=r"f: the return value expected names Named\['batch'\], got names \('seq',\)"):
        f(t(("batch", 2), ("seq", 3)))


def test_non_tensor_is_type_error():
    @check_names
    def f(x: Named["batch"]) -> Named["batch"]:
        return x

    with pytest.raises(TypeError, match=r"f: argument 'x' must be a Tensor with names Named\['batch'\], got list"):
        f([1.0, 2.0])
    with pytest.raises(TypeError, match="argument 'x' must be a Tensor"):
        f(None)  # None passes only for Optional[Named[...]]

    @check_names
    def g(x: Named["batch"]) -> Tuple[Named["batch"], Named["batch"]]:
        return x

    with pytest.raises(TypeError, match="g: the return value must be a tuple, got Tensor"):
        g(t(("batch", 2)))


def test_unannotated_and_other_annotations_are_untouched():
    @check_names
    def f(x, n: int, y: nt.Tensor) -> int:
        return n

    assert f("anything", 3, "not checked") == 3


# --------------------------------------------------------------------------- properties


@given(nts.named_shapes(max_dims=4), st.data())
def test_own_spec_accepts_and_rename_rejects(shape_names, data):
    shape, names = shape_names
    x = nt.tensor(np.zeros(shape), names=names)
    i = data.draw(st.integers(0, len(names)))
    j = data.draw(st.integers(i, len(names)))
    for spec in (names, names[:i] + (...,) + names[j:]):
        f = check_names(_identity_with(spec))
        assert f(x) is x
    if names:
        ax = data.draw(st.integers(0, len(names) - 1))
        renamed = names[:ax] + ("other" if names[ax] is None else None,) + names[ax + 1 :]
        with pytest.raises(nt.NamesError, match="expected names"):
            check_names(_identity_with(names))(x.rename(*renamed))


def _identity_with(spec):
    """``v -> v`` annotated ``Named[spec]`` in and out (set directly: a postponed annotation can't see ``spec``)."""
    def f(v):
        return v

    f.__annotations__ = {"v": Named[spec], "return": Named[spec]}
    return f
