"""Contractions: matmul/@, nt.dot (by name), nt.einsum (over names), nt.outer.

Values against NumPy (matmul, einsum), the name rules of docs/design.md, "Name rules,
family by family" (contractions: matmul by position, dot/einsum/outer by name), gradients
(gradcheck/gradgradcheck, named, with broadcast batch dims and 1-D operands) and the error
messages.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.ops.linalg import dot, einsum, matmul, outer
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts
from helpers import t64

pytestmark = pytest.mark.usefixtures("backend")


# ----------------------------------------------------------------------------- matmul: values and names


@st.composite
def matmul_cases(draw):
    """Two operands that matmul: 1-D or N-D, batch dims broadcast (size 1 or fewer dims), every
    dim named or not at random; all names distinct, so every case is valid.  Returns the
    arrays, their names and the expected output names."""
    pool = draw(st.permutations(nts.NAME_POOL))
    nbatch = draw(st.integers(0, 2))
    batch = [draw(st.integers(1, 3)) for _ in range(nbatch)]
    n, k, m = (draw(st.integers(1, 3)) for _ in range(3))
    bnames, (nn, kn, mn) = pool[:nbatch], pool[nbatch:nbatch + 3]

    def maybe(name):
        return name if draw(st.booleans()) else None

    def operand(rows, row_name, cols, col_name, one_d):
        if one_d:
            return (k,), (maybe(kn),)
        kb = draw(st.integers(0, nbatch))
        sizes = tuple(s if draw(st.booleans()) else 1 for s in batch[nbatch - kb:])
        return sizes + (rows, cols), tuple(maybe(x) for x in bnames[nbatch - kb:]) + (row_name, col_name)

    a_1d, b_1d = draw(st.integers(0, 3)) == 3, draw(st.integers(0, 3)) == 3
    sa, na = operand(n, maybe(nn), k, maybe(kn), a_1d)
    sb, nb = operand(k, maybe(kn), m, maybe(mn), b_1d)
    if a_1d and b_1d:
        expected = ()
    elif a_1d:
        expected = nb[:-2] + nb[-1:]
    elif b_1d:
        expected = na[:-1]
    else:
        ba, bb = na[:-2], nb[:-2]
        width = max(len(ba), len(bb))
        ba, bb = (None,) * (width - len(ba)) + ba, (None,) * (width - len(bb)) + bb
        expected = tuple(x if x is not None else y for x, y in zip(ba, bb)) + (na[-2], nb[-1])
    arr_a = draw(nts.arrays(sa))
    arr_b = draw(nts.arrays(sb))
    return arr_a, na, arr_b, nb, expected


@given(matmul_cases())
def test_matmul_matches_numpy_and_names(case):
    a, na, b, nb, expected = case
    ta, tb = nt.tensor(a, names=na), nt.tensor(b, names=nb)
    out = ta @ tb
    assert out.names == expected
    assert_close(out.numpy(), np.matmul(a, b), rtol=1e-12, atol=1e-12)
    assert matmul(ta, tb).names == expected
    assert ta.matmul(tb).names == expected


@given(matmul_cases())
def test_matmul_gradient_names_and_values(case):
    a, na, b, nb, _ = case
    ta = nt.tensor(a, names=na, requires_grad=True)
    tb = nt.tensor(b, names=nb, requires_grad=True)
    out = ta @ tb
    g = np.random.default_rng(0).uniform(-1, 1, size=out.shape)
    ga, gb = nt.grad(out, [ta, tb], grad_outputs=nt.tensor(g, names=out.names))
    assert ga.names == na and gb.names == nb
    # the vjp by NumPy: promote 1-D operands, then sum the broadcast batch dims away
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g.reshape(g.shape + (1,)) if b.ndim == 1 else g
    g2 = g2.reshape(g2.shape[:-1] + (1,) + g2.shape[-1:]) if a.ndim == 1 else g2
    want_a = _sum_to(np.matmul(g2, np.swapaxes(b2, -1, -2)), a2.shape)
    want_b = _sum_to(np.matmul(np.swapaxes(a2, -1, -2), g2), b2.shape)
    assert_close(ga.numpy().reshape(a2.shape), want_a, rtol=1e-10, atol=1e-10)
    assert_close(gb.numpy().reshape(b2.shape), want_b, rtol=1e-10, atol=1e-10)


def _sum_to(x, shape):
    lead = x.ndim - len(shape)
    x = x.sum(tuple(range(lead))) if lead else x
    return x.sum(tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1), keepdims=True)


@pytest.mark.parametrize("na, nb, expected", [
    (("A", "B", "C", "D"), ("B", "D", "F"), ("A", "B", "C", "F")),   # PyTorch's doc example, names made to agree
    (("C", "A", "B"), (None, None, "B", "X"), (None, "C", "A", "X")),
    (("N", "A", "B"), ("N", "B", "C"), ("N", "A", "C")),
    ((None, "A", "B"), ("N", "B", "C"), ("N", "A", "C")),
    (("N", "A", None), (None, None), ("N", "A", None)),
    (("N", "A", "B"), ("B",), ("N", "A")),
    (("B",), ("N", "B", "C"), ("N", "C")),
    (("B",), (None,), ()),
])
def test_matmul_name_rule(na, nb, expected):
    a, b = nt.ones(*[2] * len(na), names=na), nt.ones(*[2] * len(nb), names=nb)
    assert (a @ b).names == expected


def test_matmul_with_numpy_arrays_both_sides():
    a = t64((2, 3), ("n", "k"), requires_grad=False)
    w = np.arange(12.0).reshape(3, 4)
    assert (a @ w).names == ("n", None)
    assert_close((a @ w).numpy(), a.numpy() @ w)
    left = np.arange(6.0).reshape(3, 2)
    assert (left @ a).names == (None, "k")
    assert_close((left @ a).numpy(), left @ a.numpy())


def test_matmul_promotes_float_widths_and_grads_keep_dtypes():
    a = nt.tensor(np.ones((2, 3), dtype=np.float32), names=("n", "k"), requires_grad=True)
    b = t64((3, 4), ("k", "m"))
    out = a @ b
    assert out.dtype is nt.float64
    ga, gb = nt.grad(out.sum(), [a, b])
    assert ga.dtype is nt.float32 and gb.dtype is nt.float64
    assert ga.names == ("n", "k") and gb.names == ("k", "m")


def test_matmul_int():
    a = nt.tensor(np.arange(6).reshape(2, 3), names=("n", "k"))
    b = nt.tensor(np.arange(3), names=("k",))
    out = a @ b
    assert out.dtype is nt.int64 and out.names == ("n",)
    assert out.tolist() == (np.arange(6).reshape(2, 3) @ np.arange(3)).tolist()


# ----------------------------------------------------------------------------- matmul: gradients

GRAD_CASES = [
    ((2, 3, 4), ("b", "n", "k"), (4, 2), ("k", "m")),
    ((2, 1, 3, 2), ("b", None, "n", "k"), (3, 2, 2), ("h", "k", "m")),   # broadcast batch dims
    ((1, 3, 2), (None, "n", "k"), (2, 2, 3), ("b", "k", "m")),           # size-1 batch dim broadcasts
    ((3,), ("k",), (2, 3, 2), ("b", "k", "m")),                          # 1-D @ N-D
    ((2, 2, 3), ("b", "n", "k"), (3,), ("k",)),                          # N-D @ 1-D
    ((3,), ("k",), (3,), (None,)),                                        # 1-D @ 1-D
    ((2, 3), None, (3, 2), None),                                         # unnamed
]


@pytest.mark.parametrize("sa, na, sb, nb", GRAD_CASES)
def test_matmul_gradcheck(sa, na, sb, nb):
    assert gradcheck(matmul, t64(sa, na, 1), t64(sb, nb, 2))


@pytest.mark.parametrize("sa, na, sb, nb", GRAD_CASES[:6])
def test_matmul_gradgradcheck(sa, na, sb, nb):
    assert gradgradcheck(matmul, t64(sa, na, 1), t64(sb, nb, 2))


def test_matmul_grad_of_one_operand_only():
    a = t64((2, 3), ("n", "k"))
    b = t64((3, 2), ("k", "m"), requires_grad=False)
    assert gradcheck(lambda x: x @ b, a)
    assert gradcheck(lambda x: b.rename("n", "k") @ x.rename("k", "m"), a.rename("k", "m"))


# ----------------------------------------------------------------------------- matmul: errors


def test_matmul_contracted_names_must_match():
    a, b = nt.ones(2, 3, names=("n", "k")), nt.ones(3, 4, names=("j", "m"))
    with pytest.raises(nt.NamesError, match=r"matmul: the contracted dims differ: 'k' \(last dim of \('n', 'k'\)\) "
                                            r"vs 'j' \(second-to-last dim of \('j', 'm'\)\)"):
        a @ b
    with pytest.raises(nt.NamesError, match="rename one of them"):
        nt.ones(4, 2, 3, names=("A", "C", "D")) @ nt.ones(3, 5, names=("E", "F"))
    with pytest.raises(nt.NamesError, match=r"'k' \(last dim of .*'j' \(only dim of \('j',\)\)"):
        a @ nt.ones(3, names=("j",))


def test_matmul_duplicate_output_names():
    with pytest.raises(nt.NamesError, match=r"matmul: \('n', 'k'\) @ \('k', 'n'\) would give duplicate names "
                                            r"\('n', 'n'\); rename"):
        nt.ones(2, 3, names=("n", "k")) @ nt.ones(3, 2, names=("k", "n"))


def test_matmul_batch_dims_do_not_match():
    with pytest.raises(nt.NamesError, match=r"matmul: dims \('N',\) and \('M',\) do not match at position -1"):
        nt.ones(2, 3, 4, names=("N", "A", "B")) @ nt.ones(2, 4, 5, names=("M", "B", "C"))


def test_matmul_misaligned_batch_dims():
    with pytest.raises(nt.NamesError, match="misaligned: 'N'"):
        nt.ones(2, 3, 4, names=("N", "A", "B")) @ nt.ones(2, 1, 4, 5, names=("N", None, "B", "C"))
    # a batch dim of one operand is a matrix dim of the other
    with pytest.raises(nt.NamesError, match="misaligned.*A batch dim of one operand is a matrix dim"):
        nt.ones(2, 3, 4, names=("N", "A", "K")) @ nt.ones(4, 2, names=("K", "N"))


def test_matmul_shape_errors():
    with pytest.raises(ValueError, match=r"matmul: the contracted dims have different sizes: 3 \(last dim of a, "
                                         r"shape \(2, 3\)\) vs 4"):
        nt.ones(2, 3, names=("n", "k")) @ nt.ones(4, 5, names=("k", "m"))
    with pytest.raises(ValueError, match=r"the batch dims do not broadcast: .* \(2 vs 3\)"):
        nt.ones(2, 1, 2) @ nt.ones(3, 2, 1)
    with pytest.raises(ValueError, match="both operands need at least 1 dim"):
        nt.ones(()) @ nt.ones(3)


def test_matmul_dtype_and_operand_errors():
    with pytest.raises(TypeError, match="matmul: operands must all be floating point or all integer, got nt.float32, "
                                        "nt.int64"):
        nt.ones(2, 3) @ nt.tensor(np.ones((3, 2), dtype=np.int64))
    with pytest.raises(TypeError, match="matmul: operands must all be floating point or all integer"):
        nt.tensor([[True]]) @ nt.tensor([[True]])
    with pytest.raises(TypeError, match=r"matmul: operands need at least 1 dim, got the scalar 2.0; use \*"):
        nt.ones(3) @ 2.0


# ----------------------------------------------------------------------------- dot: values and names

LETTERS = "abcdefghij"


@st.composite
def dot_cases(draw):
    """1-3 fully named operands over a few names with fixed sizes; ``over`` a random subset of the names
    that two operands or more share; ``out`` either None or a random order of the kept names."""
    pool = draw(st.permutations(nts.NAME_POOL))[:5]
    sizes = {n: draw(st.integers(1, 3)) for n in pool}
    n_ops = draw(st.integers(1, 3))
    ops = []
    for _ in range(n_ops):
        names = draw(st.permutations(pool))[:draw(st.integers(1, 3))]
        ops.append(tuple(names))
    seen = []
    for names in ops:
        seen.extend(n for n in names if n not in seen)
    shared = [n for n in seen if sum(n in names for names in ops) >= 2]
    over = tuple(n for n in shared if draw(st.booleans()))
    kept = [n for n in seen if n not in over]
    out = tuple(draw(st.permutations(kept))) if draw(st.booleans()) else None
    arrays = [draw(nts.arrays(tuple(sizes[n] for n in names))) for names in ops]
    return ops, arrays, over, out, seen, kept


def _np_einsum(ops, arrays, out_names, seen):
    letter = {n: LETTERS[i] for i, n in enumerate(seen)}
    spec = ",".join("".join(letter[n] for n in names) for names in ops) + "->" + "".join(letter[n] for n in out_names)
    return np.einsum(spec, *arrays)


@given(dot_cases())
def test_dot_matches_numpy_einsum(case):
    ops, arrays, over, out, seen, kept = case
    tensors = [nt.tensor(a, names=n) for n, a in zip(ops, arrays)]
    res = dot(*tensors, over=over, out=out)
    want_names = out if out is not None else tuple(kept)
    assert res.names == want_names
    assert_close(res.numpy(), _np_einsum(ops, arrays, want_names, seen), rtol=1e-10, atol=1e-10)


def test_dot_batch_dims_and_order():
    q = t64((2, 3, 4), ("batch", "seq", "embed"), requires_grad=False)
    k = t64((2, 5, 4), ("batch", "key", "embed"), 1, requires_grad=False)
    s = dot(q, k, over="embed")
    assert s.names == ("batch", "seq", "key")
    assert_close(s.numpy(), np.einsum("bse,bke->bsk", q.numpy(), k.numpy()))
    s2 = dot(q, k, over=("embed",), out=("key", "batch", "seq"))
    assert s2.names == ("key", "batch", "seq")
    assert_close(s2.numpy(), np.einsum("bse,bke->kbs", q.numpy(), k.numpy()))
    assert dot([q, k], over=["embed", "batch"]).names == ("seq", "key")
    assert dot(q, k, over=("batch", "embed")).names == ("seq", "key")


@pytest.mark.parametrize("operands, over, fragments", [
    # a typo in one operand's names: summing w over its 'D' would be a silent wrong answer
    ([("B", "T", "E"), ("D", "O")], "D", ["cannot contract over 'D'", "only operand 1 ('D', 'O') has it",
                                          "operand 0 ('B', 'T', 'E') lacks it", ".sum('D')"]),
    ([("B", "T", "E"), ("E", "O"), ("B", "O")], ("E", "T"), ["over 'T'", "only operand 0",
                                                              "operand 1 ('E', 'O'), operand 2 ('B', 'O') lacks it"]),
    ([("batch", "seq")], "seq", ["only operand 0 ('batch', 'seq') has it", "it is the only operand"]),
])
def test_dot_over_a_dim_of_one_operand_is_an_error(operands, over, fragments):
    tensors = [nt.zeros(*(2,) * len(n), names=n) for n in operands]
    with pytest.raises(nt.NamesError) as e:
        dot(*tensors, over=over)
    for f in fragments:
        assert f in str(e.value)


# ----------------------------------------------------------------------------- dot: gradients


def test_dot_gradcheck():
    q = t64((2, 3, 2), ("batch", "seq", "embed"), 1)
    k = t64((2, 2, 2), ("batch", "key", "embed"), 2)
    assert gradcheck(lambda a, b: dot(a, b, over="embed"), q, k)
    assert gradcheck(lambda a, b: dot(a, b, over=("embed", "batch"), out=("key", "seq")), q, k)


def test_einsum_gradcheck_name_in_one_operand_only():
    # einsum says what it sums: 'x' is summed in the first operand alone (dot refuses that), and its
    # gradient is constant along 'x' (a broadcast)
    a = t64((2, 3), ("x", "y"), 1)
    b = t64((3, 2), ("y", "z"), 2)
    assert gradcheck(lambda a, b: nt.einsum("x y, y z -> z", a, b), a, b)
    c = t64((2,), ("z",), 3)
    assert gradcheck(lambda a, b, c: dot(a, b, c, over=("y",)), a, b, c)


def test_dot_gradgradcheck():
    a = t64((2, 3), ("x", "y"), 1)
    b = t64((3, 2), ("y", "z"), 2)
    assert gradgradcheck(lambda a, b: dot(a, b, over="y"), a, b)
    assert gradgradcheck(lambda a, b: nt.einsum("x y, y z -> z", a, b), a, b)


def test_dot_mixed_float_widths():
    a = nt.tensor(np.ones((2, 3), dtype=np.float32), names=("x", "y"), requires_grad=True)
    b = t64((3,), ("y",))
    out = dot(a, b, over="y")
    assert out.dtype is nt.float64
    ga, gb = nt.grad(out.sum(), [a, b])
    assert (ga.dtype, gb.dtype) == (nt.float32, nt.float64)


# ----------------------------------------------------------------------------- dot: errors


def test_dot_errors():
    a = nt.ones(2, 3, names=("x", "y"))
    with pytest.raises(nt.NamesError, match=r"dot: contracts by name, but dim 1 of \('x', None\) is unnamed"):
        dot(a, nt.ones(2, 3, names=("x", None)), over="x")
    with pytest.raises(nt.NamesError, match=r"dot: cannot contract over 'w': no operand has it"):
        dot(a, over="w")
    b = nt.ones(3, 4, names=("y", "z"))
    with pytest.raises(nt.NamesError, match=r"dot: out=\('x', 'y'\) must list exactly the dims that are not "
                                            r"contracted: \('x', 'z'\)"):
        dot(a, b, over="y", out=("x", "y"))
    assert dot(a, b, over="y", out=("z", "x")).names == ("z", "x")
    with pytest.raises(nt.NamesError, match="lists a name twice"):
        dot(a, b, over=("y", "y"))
    with pytest.raises(ValueError, match=r"dot: dim 'y' has size 3 in the operand with names \('x', 'y'\) "
                                         r"\(shape \(2, 3\)\) but size 4 .*must have one size"):
        dot(a, nt.ones(4, names=("y",)), over="y")
    with pytest.raises(TypeError, match="dot: over must be a dim name or a tuple of names"):
        dot(a, over=1)
    with pytest.raises(TypeError, match="dot: expected Tensors"):
        dot(a, np.ones(3), over="y")
    with pytest.raises(TypeError, match="dot: operands must all be floating point or all integer"):
        dot(a, nt.tensor(np.ones(3, dtype=np.int64), names=("y",)), over="y")
    many = [nt.ones(1, names=(f"d{i}",)) for i in range(53)]
    with pytest.raises(ValueError, match="dot: 53 distinct dims; at most 52 can take part in one contraction"):
        dot(*many, over=())


# ----------------------------------------------------------------------------- einsum


@st.composite
def einsum_cases(draw):
    """A word spec over random names; operands unnamed, partly or fully named with the spec's words."""
    pool = draw(st.permutations(nts.NAME_POOL))[:5]
    sizes = {n: draw(st.integers(1, 3)) for n in pool}
    ops = [tuple(draw(st.permutations(pool))[:draw(st.integers(1, 3))]) for _ in range(draw(st.integers(1, 3)))]
    seen = []
    for names in ops:
        seen.extend(n for n in names if n not in seen)
    out = tuple(n for n in draw(st.permutations(seen)) if draw(st.booleans()))
    given_names = [tuple(n if draw(st.booleans()) else None for n in names) for names in ops]
    arrays = [draw(nts.arrays(tuple(sizes[n] for n in names))) for names in ops]
    return ops, given_names, arrays, out, seen


@given(einsum_cases())
def test_einsum_matches_numpy(case):
    ops, given_names, arrays, out, seen = case
    spec = ", ".join(" ".join(names) for names in ops) + " -> " + " ".join(out)
    tensors = [nt.tensor(a, names=n) for a, n in zip(arrays, given_names)]
    res = einsum(spec, *tensors)
    assert res.names == out
    assert_close(res.numpy(), _np_einsum(ops, arrays, out, seen), rtol=1e-10, atol=1e-10)


def test_einsum_compact_spec_reads_letters():
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    res = einsum("ij,jk->ik", nt.tensor(a), nt.tensor(b))
    assert res.names == ("i", "k")
    assert_close(res.numpy(), a @ b)
    assert einsum("ij->", nt.tensor(a)).names == ()
    assert einsum("ij->ji", nt.tensor(a)).names == ("j", "i")


def test_einsum_words_and_arrays():
    x = t64((2, 3, 4), ("batch", "seq", None), requires_grad=False)
    w = np.arange(8.0).reshape(4, 2)
    res = einsum("batch seq d, d out -> batch seq out", x, w)
    assert res.names == ("batch", "seq", "out")
    assert_close(res.numpy(), np.einsum("bsd,do->bso", x.numpy(), w))


def test_einsum_gradcheck():
    x = t64((2, 3), ("b", None), 1)
    w = t64((3, 2), (None, "m"), 2)
    assert gradcheck(lambda x, w: einsum("b k, k m -> m b", x, w), x, w)
    assert gradcheck(lambda x, w: einsum("bk,km->b", x, w), x, w)
    assert gradgradcheck(lambda x, w: einsum("b k, k m -> b m", x, w), x, w)


def test_einsum_errors():
    x = nt.ones(2, 3, names=("b", "k"))
    with pytest.raises(ValueError, match=r"einsum: the spec 'b k' needs '->'"):
        einsum("b k", x)
    with pytest.raises(ValueError, match="einsum: the spec 'b k, k m -> b m' has 2 operands but 1 tensors"):
        einsum("b k, k m -> b m", x)
    with pytest.raises(nt.NamesError, match=r"einsum: cannot refine \('b', 'k'\) to \('b', 'j'\)"):
        einsum("b j -> b", x)
    with pytest.raises(nt.NamesError, match=r"einsum: the spec gives 3 dims"):
        einsum("b k c -> b", x)
    with pytest.raises(nt.NamesError, match=r"einsum: the output dim 'z' of 'b k -> b z' is not a dim of any operand"):
        einsum("b k -> b z", x)
    with pytest.raises(nt.NamesError, match="einsum: duplicate dim name 'b'"):
        einsum("b k -> b b", x)
    with pytest.raises(ValueError, match="einsum: dim 'k' has size 3 .* but size 2"):
        einsum("b k, k -> b", x, nt.ones(2))
    with pytest.raises(TypeError, match="einsum: the spec must be a str"):
        einsum(x, x)


# ----------------------------------------------------------------------------- outer


@given(nts.named_shapes(0, 2), nts.named_shapes(0, 2), st.integers(0, 2**32 - 1))
def test_outer_matches_numpy(sa, sb, seed):
    (shape_a, na), (shape_b, nb) = sa, sb
    nb = tuple(None if n in na else n for n in nb)
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=shape_a), rng.normal(size=shape_b)
    res = outer(nt.tensor(a, names=na), nt.tensor(b, names=nb))
    assert res.names == na + nb
    assert_close(res.numpy(), np.multiply.outer(a, b), rtol=1e-12, atol=1e-12)


def test_outer_gradcheck_and_errors():
    a, b = t64((3,), ("x",), 1), t64((2, 2), ("y", None), 2)
    assert gradcheck(outer, a, b)
    assert gradgradcheck(outer, a, b)
    assert a.outer(b).names == ("x", "y", None)
    with pytest.raises(nt.NamesError, match=r"outer: \('x',\) and \('y', 'x'\) share the name 'x'"):
        outer(a, nt.ones(2, 3, names=("y", "x")))


@pytest.mark.parametrize("a, b", [
    (("head",), ("head", None, None)),       # a vector's dim, contracted, is b's batch dim
    (("x", "k"), (None, "k")),                # a's contracted dim is b's column dim
    (("k", None), ("k", "j")),                # b's contracted dim is a's row dim
])
def test_matmul_a_shared_name_has_one_role(a, b):
    """A name in both operands names the contracted pair or batch dims at one position; anywhere else it
    would stand for two different dims."""
    x, y = nt.ones(*(2,) * len(a), names=a), nt.ones(*(2,) * len(b), names=b)
    with pytest.raises(nt.NamesError, match="matmul: .* are misaligned: .*The contracted dim of one operand has "
                                            "the name of another dim of the other"):
        x @ y
    # the contracted pair itself may share its name
    assert (nt.ones(2, 2, names=("i", "k")) @ nt.ones(2, names=("k",))).names == ("i",)
