"""nt.rearrange / nt.reduce / nt.repeat: values against NumPy (and einops where installed), the name
rule under Hypothesis, gradients, views, the error messages and a meta-backend dry run."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import t64

pytestmark = pytest.mark.usefixtures("backend")

NP_REDUCTIONS = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}


def test_head_split_and_merge():
    x = t64((2, 5, 12), ("batch", "seq", "embed"))
    a = x.detach().numpy()
    heads = nt.rearrange(x, "batch seq embed=(head d) -> batch head seq d", head=3)
    assert heads.names == ("batch", "head", "seq", "d")
    assert_close(heads.detach().numpy(), a.reshape(2, 5, 3, 4).transpose(0, 2, 1, 3))
    back = nt.rearrange(heads, "batch head seq d -> batch seq embed=(head d)")
    assert back.names == ("batch", "seq", "embed")
    assert_close(back.detach().numpy(), a)


def test_unlabelled_group_is_unnamed_and_single_word_group_keeps_its_word():
    x = t64((2, 3, 4), ("a", "b", "c"))
    assert nt.rearrange(x, "a b c -> a (b c)").names == ("a", None)
    assert nt.rearrange(x, "a b c -> (a) (c) b").names == ("a", "c", "b")
    # a left group without a label splits a named dim; its parts are named by their words
    assert nt.rearrange(x, "a b (c1 c2) -> c1 a b c2", c1=2).names == ("c1", "a", "b", "c2")


def test_unnamed_dims_take_the_words():
    x = t64((2, 3), (None, "b"))
    y = nt.rearrange(x, "a b -> b a")
    assert y.names == ("b", "a")
    assert_close(y.detach().numpy(), x.detach().numpy().T)


def test_ellipsis_keeps_the_unlisted_dims_and_their_names():
    x = t64((2, 3, 4, 6), ("batch", None, "seq", "embed"))
    a = x.detach().numpy()
    y = nt.rearrange(x, "batch ... embed=(h d) -> h batch ... d", h=2)
    assert y.names == ("h", "batch", None, "seq", "d")
    assert_close(y.detach().numpy(), a.reshape(2, 3, 4, 2, 3).transpose(3, 0, 1, 2, 4))
    assert nt.rearrange(x, "... -> ...").names == x.names


@pytest.mark.parametrize("reduction", sorted(NP_REDUCTIONS))
def test_reduce_values(reduction):
    x = t64((2, 6, 3), ("batch", "seq", "embed"))
    a = x.detach().numpy()
    y = nt.reduce(x, "batch seq embed -> embed batch", reduction)
    assert y.names == ("embed", "batch")
    assert_close(y.detach().numpy(), NP_REDUCTIONS[reduction](a, axis=1).T)
    pooled = nt.reduce(x, "batch (seq pair) embed -> batch seq embed", reduction, pair=2)
    assert pooled.names == ("batch", "seq", "embed")
    assert_close(pooled.detach().numpy(), NP_REDUCTIONS[reduction](a.reshape(2, 3, 2, 3), axis=2))


def test_reduce_mean_of_ints_is_float64():
    x = nt.tensor(np.arange(6).reshape(2, 3), names=("a", "b"))
    y = nt.reduce(x, "a b -> a", "mean")
    assert y.dtype == nt.float64
    assert_close(y.detach().numpy(), np.array([1.0, 4.0]))


def test_repeat_values_and_names():
    x = t64((3, 4), ("seq", "embed"))
    a = x.detach().numpy()
    y = nt.repeat(x, "seq embed -> batch seq embed", batch=2)
    assert y.names == ("batch", "seq", "embed")
    assert_close(y.detach().numpy(), np.broadcast_to(a, (2, 3, 4)))
    z = nt.repeat(x, "seq embed -> seq wide=(embed copy)", copy=2)
    assert z.names == ("seq", "wide")
    assert_close(z.detach().numpy(), np.repeat(a, 2, axis=1))
    w = nt.repeat(x, "seq embed -> (copy seq) embed", copy=2)
    assert w.names == (None, "embed")
    assert_close(w.detach().numpy(), np.tile(a, (2, 1)))


def test_rearrange_is_a_view_of_its_input():
    x = nt.zeros((2, 3), names=("a", "b"))
    y = nt.rearrange(x, "a b -> b a")
    y.add_(1)
    assert_close(x.detach().numpy(), np.ones((2, 3)))


def test_plan_is_cached():
    x = t64((2, 6), ("a", "b"))
    nt.rearrange(x, "a (b c) -> c a b", c=3)
    hits = _names.rearrange_plan.cache_info().hits
    nt.rearrange(x, "a (b c) -> c a b", c=3)
    assert _names.rearrange_plan.cache_info().hits == hits + 1


@st.composite
def _patterns(draw):
    """A tensor's shape and names, a pattern that splits one dim and permutes, and its NumPy reference."""
    shape, names = draw(nts.named_shapes(min_dims=1, max_dims=4))
    words = [n if n is not None else f"w{i}" for i, n in enumerate(names)]
    split = draw(st.integers(0, len(shape) - 1))
    part = draw(st.sampled_from([p for p in (1, 2, 3, 4) if shape[split] % p == 0]))
    left = list(words)
    left[split] = f"{words[split]}=(p0 p1)"
    elementary = words[:split] + ["p0", "p1"] + words[split + 1:]
    order = draw(st.permutations(range(len(elementary))))
    merge = draw(st.booleans()) and len(order) > 1
    right = [elementary[i] for i in order]
    if merge:
        right = ["merged=(" + " ".join(right[:2]) + ")"] + right[2:]
    pattern = " ".join(left) + " -> " + " ".join(right)
    split_shape = shape[:split] + (part, shape[split] // part) + shape[split + 1:]

    def reference(a):
        out = a.reshape(split_shape).transpose(order)
        return out.reshape((-1,) + out.shape[2:]) if merge else out

    out_names = tuple(elementary[i] for i in order)
    out_names = (("merged",) + out_names[2:]) if merge else out_names
    return shape, names, pattern, part, reference, out_names


@settings(max_examples=40, deadline=None)
@given(_patterns(), st.integers(0, 2**31))
def test_name_rule_and_values_random_patterns(case, seed):
    shape, names, pattern, part, reference, out_names = case
    a = np.random.default_rng(seed).uniform(-1, 1, size=shape)
    y = nt.rearrange(nt.tensor(a, names=names), pattern, p0=part)
    assert y.names == out_names
    assert_close(y.detach().numpy(), reference(a))


def test_against_einops():
    einops = pytest.importorskip("einops")
    a = np.random.default_rng(0).uniform(-1, 1, size=(2, 6, 4))
    x = nt.tensor(a)
    cases = [
        ("rearrange", "b (h d) s -> b h s d", "b (h d) s -> b h s d", {"h": 2}, ()),
        ("rearrange", "b s e -> b (s e)", "b s e -> b (s e)", {}, ()),
        ("rearrange", "b ... e -> e b ...", "b ... e -> e b ...", {}, ()),
        ("repeat", "b s e -> b s c e", "b s e -> b s c e", {"c": 3}, ()),
        ("repeat", "b s e -> b (s c) e", "b s e -> b (s c) e", {"c": 2}, ()),
    ] + [("reduce", "b (s p) e -> b s e", "b (s p) e -> b s e", {"p": 2}, (r,)) for r in NP_REDUCTIONS]
    for fn, ours, theirs, sizes, extra in cases:
        got = getattr(nt, fn)(x, ours, *extra, **sizes)
        assert_close(got.detach().numpy(), getattr(einops, fn)(a, theirs, *extra, **sizes))


def test_gradcheck_rearrange_and_repeat():
    x = t64((2, 3, 4), ("batch", "seq", "embed"))
    assert gradcheck(lambda t: nt.rearrange(t, "batch seq embed=(h d) -> d batch h seq", h=2), x)
    assert gradgradcheck(lambda t: nt.rearrange(t, "batch seq embed -> e2=(embed batch) seq"), x)
    assert gradcheck(lambda t: nt.repeat(t, "batch seq embed -> batch (seq c) embed k", c=2, k=3), x)
    assert gradgradcheck(lambda t: nt.repeat(t, "... -> c ...", c=2), x)


@pytest.mark.parametrize("reduction", sorted(NP_REDUCTIONS))
def test_gradcheck_reduce(reduction):
    x = t64((2, 4, 3), ("batch", "seq", "embed"))
    assert gradcheck(lambda t: nt.reduce(t, "batch (seq p) embed -> embed batch", reduction, p=2), x)
    assert gradgradcheck(lambda t: nt.reduce(t, "batch seq embed -> batch", reduction), x)


def test_gradient_has_the_input_names():
    x = t64((2, 6), (None, "embed"))
    (g,) = nt.grad(nt.rearrange(x, "b embed=(h d) -> d h b", h=2).sum(), [x])
    # the word 'b' named the dim inside the op only: the gradient is x's, unnamed dim included
    assert g.names == (None, "embed")


@pytest.mark.parametrize("call, error, fragments", [
    (lambda x: nt.rearrange(x, "b seq embed -> seq b embed"), nt.NamesError,
     ["rearrange: the pattern names dim 0 'b'", "named 'batch'", "('batch', 'seq', 'embed')",
      "'b seq embed -> seq b embed'", "use the dim's name, or rename it"]),
    (lambda x: nt.rearrange(x, "batch seq hidden=(h d) -> batch seq h d", h=2), nt.NamesError,
     ["rearrange: the pattern names dim 2 'hidden'", "named 'embed'", "leave the group unnamed"]),
    (lambda x: nt.rearrange(x, "batch seq -> seq batch"), nt.NamesError,
     ["rearrange: the pattern's left side gives 2 dims but the tensor has 3", "'...' for the dims not listed"]),
    (lambda x: nt.rearrange(x, "batch ... -> batch ... seq"), nt.NamesError,
     ["rearrange: 'seq' is a word of the pattern and the name of dim 1, which '...' covers"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch embed"), ValueError,
     ["rearrange: seq on the left is missing on the right", "nt.reduce"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch seq embed k"), ValueError,
     ["rearrange: k on the right is not on the left", "nt.repeat"]),
    (lambda x: nt.repeat(x, "batch seq embed -> batch seq embed k"), ValueError,
     ["repeat: the new dim 'k' needs its size", "k=..."]),
    (lambda x: nt.rearrange(x, "batch seq (h d) -> batch seq h d"), ValueError,
     ["rearrange: the sizes of h, d in the group (h d) are unknown", "h=..."]),
    (lambda x: nt.rearrange(x, "batch seq (h d) -> batch seq h d", h=5), ValueError,
     ["rearrange: the group (h d) with sizes {'h': 5} cannot split dim 2 of size 4"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch seq embed", seq=7), ValueError,
     ["rearrange: seq=7 but dim 1 has size 3"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch seq embed", zzz=7), ValueError,
     ["rearrange: the size zzz=7 is for no word"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch seq seq"), ValueError,
     ["rearrange: the word 'seq' appears twice"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> embed=(batch seq) embed"), nt.NamesError,
     ["would repeat a name", "Name the group differently"]),
    (lambda x: nt.rearrange(x, "batch seq embed"), ValueError, ["rearrange: the pattern", "needs one '->'"]),
    (lambda x: nt.rearrange(x, "batch seq (embed -> batch seq embed"), ValueError,
     ["a group '(...)' must be closed"]),
    (lambda x: nt.rearrange(x, "batch seq embed -> batch seq embed 1"), ValueError, ["'1', which is not a word"]),
    (lambda x: nt.rearrange(x, "... seq embed -> seq embed"), ValueError, ["'...' on one side only"]),
    (lambda x: nt.rearrange(x, "batch seq e=embed -> batch seq e"), ValueError, ["'=' must join a name and a group"]),
    (lambda x: nt.reduce(x, "batch seq embed -> batch", "median"), ValueError,
     ["reduce: the reduction must be one of sum, mean, max, min, prod"]),
    (lambda x: nt.repeat(x, "batch seq embed -> batch seq embed k", k=2.0), TypeError,
     ["repeat: the size k=2.0 must be an int >= 0"]),
    (lambda x: nt.rearrange(x, 3), TypeError, ["rearrange: the pattern must be a str"]),
])
def test_errors(call, error, fragments):
    x = t64((2, 3, 4), ("batch", "seq", "embed"))
    with pytest.raises(error) as info:
        call(x)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_meta_dry_run():
    x = nt.spec({"batch": 8, "seq": 128, "embed": 512})
    trace = nt.trace_shapes(lambda t: nt.reduce(
        nt.repeat(nt.rearrange(t, "batch seq embed=(head d) -> batch head seq d", head=8), "... -> k ...", k=2),
        "k batch head seq d -> batch seq embed=(head d)", "max"), x)
    assert trace.result.names == ("batch", "seq", "embed")
    assert trace.result.shape == (8, 128, 512)
    with pytest.raises(nt.NamesError, match="rearrange: the pattern names dim 0 'b'"):
        nt.trace_shapes(lambda t: nt.rearrange(t, "b seq embed -> seq b embed"), x)
