"""Arguments are checked the same way whatever was called before, and every refusal names the op.

The name rules are cached on their arguments, and a cache compares keys with ``==``: ``(0.0,)``
and ``(True,)`` equal ``(0,)``, and ``np.str_("a")`` equals ``"a"``. These tests call the good form
first and the bad one after, the order in which a cache hit would let the bad one through, and
check that names given as NumPy strings come out as Python strings.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt

pytestmark = pytest.mark.usefixtures("backend")


def x23():
    return nt.zeros(2, 3, names=("a", "b"))


def x13():
    return nt.zeros(1, 3, names=("a", "b"))


# (op as messages name it, a call with a good dims tuple, the same call with one entry of another type)
HISTORY = [
    ("sum", lambda t, d: t.sum(d)),
    ("amax", lambda t, d: t.amax(d, keepdim=True)),
    ("var", lambda t, d: t.var(d)),
    ("logsumexp", lambda t, d: t.logsumexp(d)),
    ("permute", lambda t, d: t.permute(*d, *[i for i in range(2) if i not in d])),
    ("flatten", lambda t, d: t.flatten((d[0], 1) if d[0] == 0 else (0, d[0]), "c")),
    ("flip", lambda t, d: t.flip(d)),
    ("roll", lambda t, d: t.roll((1,) * len(d), d)),
    ("squeeze", lambda t, d: x13().squeeze(d)),
    ("layer_norm", lambda t, d: nt.nn.functional.layer_norm(t, dim=d)),
]


@pytest.mark.parametrize("op, call", HISTORY, ids=[h[0] for h in HISTORY])
@pytest.mark.parametrize("odd", [0.0, False, np.False_, np.float64(0.0), "0"], ids=repr)
def test_a_refused_dim_stays_refused_after_a_good_call(op, call, odd):
    with pytest.raises((TypeError, nt.NamesError)) as before:
        call(x23(), (odd,))
    call(x23(), (0,))  # caches the plan of (0,), which equals (0.0,) and (False,)
    with pytest.raises(type(before.value)) as after:
        call(x23(), (odd,))
    assert str(after.value) == str(before.value)
    assert str(after.value).startswith(f"{op}: ")


@given(st.data())
def test_dims_tuples_are_checked_whatever_came_before(data):
    """Any reduction over a random tuple of dims with one entry swapped for a float or a bool of equal
    value: refused before and after the good tuple ran."""
    ndim = data.draw(st.integers(1, 4))
    names = tuple(data.draw(st.permutations("abcdef"))[:ndim])
    t = nt.zeros(*(2,) * ndim, names=names)
    dims = tuple(data.draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)))
    at = data.draw(st.integers(0, len(dims) - 1))
    odd = data.draw(st.sampled_from([float, np.float64, bool, np.bool_]))
    if odd in (bool, np.bool_) and dims[at] > 1:
        return  # no bool equals 2 or more
    bad = dims[:at] + (odd(dims[at]),) + dims[at + 1:]
    op = data.draw(st.sampled_from(["sum", "mean", "amin", "std", "any"]))
    for _ in range(2):
        with pytest.raises(TypeError, match=f"{op}: a dim must be a name"):
            getattr(t, op)(bad)
        assert getattr(t, op)(dims).names == tuple(n for i, n in enumerate(names) if i not in dims)


NUMPY_STR_NAMES = {
    "rename": lambda s: x23().rename(s("p"), "q"),
    "rename by mapping": lambda s: x23().rename(a=s("p")),
    "refine_names": lambda s: nt.zeros(2, 3).refine_names(s("p"), "q"),
    "names=": lambda s: nt.zeros(2, 3, names=(s("p"), "q")),
    "flatten": lambda s: x23().flatten(("a", "b"), s("p")),
    "unflatten": lambda s: x23().unflatten("b", ((s("p"), 3), ("q", 1))),
    "unsqueeze": lambda s: x23().unsqueeze(0, s("p")),
    "stack": lambda s: nt.stack([x23(), x23()], s("p")),
    "reshape": lambda s: x23().reshape(6, names=(s("p"),)),
    "align_to": lambda s: x23().align_to(s("b"), "a", s("p")),
    "dot": lambda s: nt.dot(x23(), x23().rename(b="p"), over="a", out=(s("b"), "p")),
}


@pytest.mark.parametrize("make", NUMPY_STR_NAMES.values(), ids=NUMPY_STR_NAMES.keys())
def test_names_given_as_numpy_strs_come_out_as_strs(make):
    for s in (np.str_, str, np.str_):  # and a plain call after a NumPy one must not get NumPy's strs back
        names = make(s).names
        assert all(type(n) is str for n in names if n is not None), names
        assert "np.str_" not in repr(names)


LOOSE = [
    (lambda: x23().sum("a", keepdim="yes"), TypeError, "sum: keepdim must be a bool, got str 'yes'"),
    (lambda: x23().mean("a", keepdim=1), TypeError, "mean: keepdim must be a bool, got int 1"),
    (lambda: x23().max("a", keepdim=[]), TypeError, "max: keepdim must be a bool, got list []"),
    (lambda: x23().argmax(keepdim="no"), TypeError, "argmax: keepdim must be a bool"),
    (lambda: x23().std("a", keepdim=None), TypeError, "std: keepdim must be a bool, got NoneType None"),
    (lambda: x23().std("a", correction="x"), TypeError, "std: correction must be a number, got str 'x'"),
    (lambda: x23().var("a", unbiased=0), TypeError, "var: unbiased must be a bool, got int 0"),
    (lambda: x23().sort("a", descending="yes"), TypeError, "sort: descending must be a bool, got str 'yes'"),
    (lambda: x23().argsort("a", stable=1), TypeError, "argsort: stable must be a bool, got int 1"),
    (lambda: x23().topk(1, "a", largest="no"), TypeError, "topk: largest must be a bool, got str 'no'"),
    (lambda: nt.full((2,), None), TypeError, "full: fill_value must be a number or a bool, got NoneType None"),
    (lambda: nt.full((2,), "x"), TypeError, "full: fill_value must be a number or a bool, got str 'x'"),
    (lambda: nt.full_like(x23(), None), TypeError, "full_like: fill_value must be a number or a bool"),
    (lambda: nt.randint(0, 2**70, (2,)), ValueError, "randint: [low, high) = [0, 1180591620717411303424) is out "
                                                     "of the range of int64"),
    (lambda: nt.randint(0, 2**40, (2,), dtype=nt.int32), ValueError, "out of the range of int32"),
    (lambda: nt.randint(0, 2.5, (2,)), TypeError, "randint: high must be an int, got float 2.5"),
    (lambda: nt.linspace(0, 1, -1), ValueError, "linspace: steps must be >= 0, got -1"),
    (lambda: nt.linspace(0, 1, 2.5), TypeError, "linspace: steps must be an int, got float 2.5"),
    (lambda: nt.linspace("a", 1, 2), TypeError, "linspace: start must be a number, got str 'a'"),
    (lambda: nt.arange("a"), TypeError, "arange: end must be a number, got str 'a'"),
    (lambda: nt.eye(-2), ValueError, "eye: sizes must be >= 0, got -2"),
    (lambda: x23() + "x", TypeError, "add: unsupported operand of type str"),
    (lambda: nt.where(x23() > 0, x23(), "x"), TypeError, "where: unsupported operand of type str"),
    # NumPy would stack (values, indices) into an unnamed constant: x - x.max(dim) must not run
    (lambda: x23() - x23().max("b"), TypeError, "sub: unsupported operand of type ValuesIndices holding tensors"),
    (lambda: x23().max("b") * x23(), TypeError, "take one, e.g. .values"),
    (lambda: nt.maximum(x23(), x23().min("b")), TypeError, "maximum: unsupported operand of type ValuesIndices"),
    (lambda: x23() + [x23(), 1.0], TypeError, "add: unsupported operand of type list holding tensors"),
    (lambda: x23() * (1.0, [x23()]), TypeError, "Stack them first (nt.stack)"),
]


@pytest.mark.parametrize("call, error, fragment", LOOSE, ids=[f[2].split(":")[0] + str(i) for i, f in enumerate(LOOSE)])
def test_loose_arguments_are_refused_with_the_op_named(call, error, fragment):
    with pytest.raises(error) as e:
        call()
    assert fragment in str(e.value)


def test_numpy_bools_are_bools():
    assert x23().sum("a", keepdim=np.True_).names == ("a", "b")
    assert nt.full((2,), np.True_).dtype is nt.bool_
    assert x23().sort("a", descending=np.False_).values.names == ("a", "b")


@pytest.mark.parametrize("make, op", [
    (lambda: nt.zeros(10**6, 10**6), "zeros"),
    (lambda: nt.randn(10**6, 10**6), "randn"),
    (lambda: nt.full((10**6, 10**6), 1.0), "full"),
    (lambda: nt.arange(0, 1e15), "arange"),
])
def test_a_tensor_too_big_for_memory_names_the_op_and_the_shape(make, op):
    with pytest.raises((MemoryError, ValueError)) as e:
        make()
    assert str(e.value).startswith(f"{op}: ") and "shape (" in str(e.value)
