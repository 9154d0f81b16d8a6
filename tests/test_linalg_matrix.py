"""nt.linalg: values against PyTorch's torch.linalg, the name rules (matrix dims by name, anywhere), gradients
and second gradients, errors, shape dry runs, and the Array API namespace's linalg."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import linalg as LA
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

T = ("b", "row", "col")


def _t(a, names=T, grad=False):
    return nt.tensor(a, names=names, requires_grad=grad)


def _close(x, y, tol=1e-9):
    np.testing.assert_allclose(x.numpy(), y.detach().numpy(), rtol=tol, atol=tol)


def _spd(rng, n=4, batch=(2,)):
    a = rng.standard_normal(batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


# ----------------------------------------------------------------------------- values against PyTorch


def test_square_functions_match_torch(rng):
    a = rng.standard_normal((2, 4, 4))
    s = _spd(rng)
    ta, ts = torch.tensor(a), torch.tensor(s)
    _close(LA.inv(_t(a)), torch.linalg.inv(ta))
    _close(LA.det(_t(a)), torch.linalg.det(ta))
    sign, logabsdet = LA.slogdet(_t(a))
    _close(sign, torch.linalg.slogdet(ta).sign)
    _close(logabsdet, torch.linalg.slogdet(ta).logabsdet)
    _close(nt.logdet(_t(s)), torch.logdet(ts))
    assert math.isnan(nt.logdet(_t(np.diag([-1.0, 2.0]), names=None)).item())
    _close(LA.cholesky(_t(s)), torch.linalg.cholesky(ts))
    _close(LA.cholesky(_t(s), upper=True), torch.linalg.cholesky(ts, upper=True))
    w, v = LA.eigh(_t(s))
    _close(w, torch.linalg.eigh(ts).eigenvalues)
    _close(abs(v), torch.linalg.eigh(ts).eigenvectors.abs())
    _close(LA.eigvalsh(_t(s)), torch.linalg.eigvalsh(ts))
    # UPLO="U" reads the upper triangle: garbage below the diagonal is ignored
    upper_only = np.triu(s) + np.tril(rng.standard_normal(s.shape), -1)
    _close(LA.eigvalsh(_t(upper_only), "U"), torch.linalg.eigvalsh(torch.tensor(upper_only), "U"))
    for n in (-3, -1, 0, 1, 2, 5):
        _close(LA.matrix_power(_t(a), n), torch.linalg.matrix_power(ta, n))
    _close(LA.trace(_t(a)), torch.diagonal(ta, dim1=-2, dim2=-1).sum(-1))
    _close(LA.trace(_t(a), 1), torch.diagonal(ta, 1, dim1=-2, dim2=-1).sum(-1))


@pytest.mark.parametrize("shape", [(2, 5, 3), (2, 3, 5), (3, 3)])
def test_rectangular_functions_match_torch(rng, shape):
    a = rng.standard_normal(shape)
    names = T[-len(shape):]
    t, ta = _t(a, names), torch.tensor(a)
    q, r = LA.qr(t)
    tq, tr = torch.linalg.qr(ta)
    signs = np.sign(np.diagonal(r.numpy(), axis1=-2, axis2=-1)) * np.sign(np.diagonal(tr.numpy(), axis1=-2, axis2=-1))
    np.testing.assert_allclose(q.numpy() * signs[..., None, :], tq.numpy(), atol=1e-9)
    np.testing.assert_allclose(r.numpy() * signs[..., :, None], tr.numpy(), atol=1e-9)
    qc, rc = LA.qr(t, mode="complete")
    assert qc.shape == torch.linalg.qr(ta, mode="complete").Q.shape
    assert_close(qc @ rc, a)
    q_r, r_r = LA.qr(t, mode="r")
    assert q_r.shape == (0,) and r_r.shape == tr.shape
    for full in (True, False):
        u, s, vh = LA.svd(t, full)
        tu, ts, tvh = torch.linalg.svd(ta, full)
        assert u.shape == tu.shape and vh.shape == tvh.shape
        _close(s, ts)
        k = s.shape[-1]
        assert_close((u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :], a)
    _close(LA.svdvals(t), torch.linalg.svdvals(ta))
    _close(LA.pinv(t), torch.linalg.pinv(ta))
    _close(LA.pinv(t, atol=0.5), torch.linalg.pinv(ta, atol=0.5))
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        _close(LA.matrix_norm(t, ord), torch.linalg.matrix_norm(ta, ord))
        _close(LA.matrix_norm(t, ord, keepdim=True), torch.linalg.matrix_norm(ta, ord, keepdim=True))
    low_rank = a[..., :, :1] @ a[..., :1, :]
    _close(LA.matrix_rank(_t(low_rank, names)), torch.linalg.matrix_rank(torch.tensor(low_rank)))
    _close(LA.matrix_rank(t, atol=1.0, rtol=0.0), torch.linalg.matrix_rank(ta, atol=1.0, rtol=0.0))
    _close(LA.matrix_rank(t), torch.linalg.matrix_rank(ta))
    assert LA.matrix_rank(t).dtype == nt.int64


def test_matrix_rank_hermitian_and_pinv_of_rank_deficient(rng):
    x = rng.standard_normal((4, 2))
    a = x @ x.T  # rank 2, symmetric
    assert LA.matrix_rank(_t(a, None), hermitian=True).item() == 2
    _close(LA.pinv(_t(a, None), hermitian=True), torch.linalg.pinv(torch.tensor(a), hermitian=True))
    _close(LA.pinv(_t(a, None)), torch.linalg.pinv(torch.tensor(a)))


def test_solve_matches_torch(rng):
    a = rng.standard_normal((2, 4, 4))
    ta = torch.tensor(a)
    for b_shape, left in [((2, 4, 3), True), ((4, 3), True), ((2, 4), True), ((4,), True), ((2, 3, 4), False),
                          ((1, 4, 2), True)]:
        b = rng.standard_normal(b_shape)
        _close(LA.solve(_t(a), nt.tensor(b), left=left), torch.linalg.solve(ta, torch.tensor(b), left=left))


def test_vector_functions_match_torch(rng):
    x, y = rng.standard_normal((5, 3)), rng.standard_normal((2, 1, 3))
    tx, ty = torch.tensor(x), torch.tensor(y)
    _close(LA.cross(nt.tensor(x[None]), nt.tensor(y)), torch.linalg.cross(tx[None], ty))
    assert_close(LA.cross(nt.tensor(x), nt.tensor(y)), np.cross(x, y))  # PyTorch wants equal ndims; NumPy broadcasts
    _close(LA.cross(nt.tensor(x.T), nt.tensor(x.T[::-1].copy()), dim=0), torch.linalg.cross(tx.T, tx.T.flip(0), dim=0))
    _close(LA.vecdot(nt.tensor(x), nt.tensor(y)), torch.linalg.vecdot(tx, ty))
    for ord in (2, 1, 3, 0, math.inf, -math.inf, 0.5):
        _close(LA.vector_norm(nt.tensor(y), ord), torch.linalg.vector_norm(ty, ord))
        _close(LA.vector_norm(nt.tensor(y), ord, (0, 2), True), torch.linalg.vector_norm(ty, ord, (0, 2), True))
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 3, 5))
    ta, tb = torch.tensor(a), torch.tensor(b)
    _close(nt.tensordot(nt.tensor(a), nt.tensor(b), dims=([1, 2], [1, 0])), torch.tensordot(ta, tb, dims=([1, 2], [1, 0])))
    _close(nt.tensordot(nt.tensor(a), nt.tensor(b[:, 0, :]), 1), torch.tensordot(ta, tb[:, 0, :], 1))
    _close(nt.tensordot(nt.tensor(a), nt.tensor(b), 0), torch.tensordot(ta, tb, 0))
    _close(LA.matmul(nt.tensor(a), nt.tensor(b[:, 0, :])), ta @ tb[:, 0, :])
    _close(LA.outer(nt.tensor(x[0]), nt.tensor(y[0, 0])), torch.outer(tx[0], ty[0, 0]))


@pytest.mark.filterwarnings("ignore::UserWarning")  # PyTorch deprecates torch.qr, torch.svd, torch.cholesky
def test_top_level_spellings_match_torch(rng):
    a, s, r = rng.standard_normal((2, 4, 4)), _spd(rng), rng.standard_normal((5, 3))
    ta, ts, tr = torch.tensor(a), torch.tensor(s), torch.tensor(r)
    _close(nt.det(_t(a)), torch.det(ta))
    _close(nt.inverse(_t(a)), torch.inverse(ta))
    _close(nt.slogdet(_t(a)).logabsdet, torch.slogdet(ta).logabsdet)
    _close(nt.matrix_power(_t(a), 2), torch.matrix_power(ta, 2))
    _close(nt.cholesky(_t(s), True), torch.cholesky(ts, True))
    _close(nt.pinverse(nt.tensor(r)), torch.pinverse(tr))
    _close(nt.pinverse(nt.tensor(r), 0.9), torch.pinverse(tr, 0.9))
    _close(nt.trace(nt.tensor(r)), torch.trace(tr))
    count = nt.trace(nt.arange(9).reshape(3, 3))
    assert count.dtype == nt.int64 and count.item() == 12
    with pytest.raises(ValueError, match=r"trace: expected a matrix \(2 dims\), got 3 dims"):
        nt.trace(_t(a))
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    _close(nt.cross(nt.tensor(x), nt.tensor(y)), torch.cross(torch.tensor(x), torch.tensor(y), dim=0))
    _close(nt.cross(nt.tensor(x.T), nt.tensor(y.T), 1), torch.cross(torch.tensor(x.T), torch.tensor(y.T), 1))
    with pytest.raises(ValueError, match="cross: no dim of size 3"):
        nt.cross(nt.ones(2), nt.ones(2))
    for some in (True, False):
        u, sv, v = nt.svd(nt.tensor(r, names=("row", "col")), some)
        tu, tsv, tv = torch.svd(tr, some)
        assert (u.shape, v.shape) == (tu.shape, tv.shape) and v.names == ("col", None)
        _close(sv, tsv)
        assert_close((u[:, :3] * sv) @ v.mT, r)
        q, qr_r = nt.qr(nt.tensor(r), some)
        assert (q.shape, qr_r.shape) == tuple(x.shape for x in torch.qr(tr, some))
    u, sv, v = nt.svd(nt.tensor(r, names=("row", "col")), compute_uv=False, name="k")
    tu, tsv, tv = torch.svd(tr, compute_uv=False)
    assert (u.names, sv.names, v.names) == (("row", "k"), ("k",), ("col", "k"))
    assert (u.shape, v.shape) == (tu.shape, tv.shape) and not u.numpy().any() and not v.numpy().any()
    _close(sv, tsv)


def test_norm_and_multi_dot_match_torch(rng):
    a = rng.standard_normal((2, 3, 4))
    t, ta = _t(a), torch.tensor(a)
    for ord, dim in [(None, None), (None, (0, 2)), ("fro", (1, 2)), ("nuc", ("row", "col")), (math.inf, (-2, -1)),
                     (3, 1), (3, "col")]:
        tdim = tuple(T.index(d) if isinstance(d, str) else d for d in dim) if isinstance(dim, tuple) else \
            T.index(dim) if isinstance(dim, str) else dim
        _close(LA.norm(t, ord, dim), torch.linalg.norm(ta, ord, tdim))
        _close(LA.norm(t, ord, dim, keepdim=True), torch.linalg.norm(ta, ord, tdim, keepdim=True))
    for ord in (2, "fro", -1):
        _close(LA.norm(t[0], ord), torch.linalg.norm(ta[0], ord))
    _close(LA.norm(t[0, 0], 1), torch.linalg.norm(ta[0, 0], 1))
    assert LA.norm(t, "fro", ("b", "col")).names == ("row",)
    with pytest.raises(ValueError, match="linalg.norm: with ord=2 and dim=None, A must be 1-D or 2-D"):
        LA.norm(t, 2)
    with pytest.raises(ValueError, match="linalg.norm: ord='nuc' is a matrix norm"):
        LA.norm(t, "nuc", "col")
    m = [rng.standard_normal(s) for s in [(3,), (3, 4), (4, 2), (2,)]]
    _close(LA.multi_dot([nt.tensor(x) for x in m]), torch.linalg.multi_dot([torch.tensor(x) for x in m]))
    named = LA.multi_dot([nt.tensor(m[1], names=("i", "j")), nt.tensor(m[2], names=("j", "k"))])
    assert named.names == ("i", "k")
    with pytest.raises(ValueError, match=r"linalg.multi_dot: tensors\[1\] must be 2-D"):
        LA.multi_dot([nt.tensor(m[1]), nt.tensor(m[3]), nt.tensor(m[3])])
    with pytest.raises(nt.NamesError, match="linalg.multi_dot: .*contracted dims differ"):
        LA.multi_dot([nt.tensor(m[1], names=("i", "j")), nt.tensor(m[2], names=("x", "k"))])


@given(data=st.data())
def test_tensordot_name_rule(data):
    shape, names = data.draw(nts.named_shapes(min_dims=1, max_dims=3))
    k = data.draw(st.integers(0, len(shape)))
    pairs = data.draw(st.permutations(range(len(shape))))[:k]
    other_free = data.draw(nts.names(2, pool=("p", "q", "r")))
    b_names = tuple(names[i] if data.draw(st.booleans()) else None for i in pairs) + other_free
    b_shape = tuple(shape[i] for i in pairs) + (2, 3)
    a, b = data.draw(nts.arrays(shape)), data.draw(nts.arrays(b_shape))
    by_name = tuple(names[i] if names[i] is not None and data.draw(st.booleans()) else i for i in pairs)
    out = nt.tensordot(nt.tensor(a, names=names), nt.tensor(b, names=b_names), dims=(by_name, tuple(range(k))))
    assert out.names == tuple(n for i, n in enumerate(names) if i not in pairs) + other_free
    assert_close(out, np.tensordot(a, b, axes=(list(pairs), list(range(k)))), atol=1e-9)


def test_diagonal_and_matrix_transpose(rng):
    a = rng.standard_normal((2, 3, 4))
    t = _t(a)
    d = LA.diagonal(t, offset=1)
    assert d.names == ("b", None)
    _close(d, torch.linalg.diagonal(torch.tensor(a), offset=1))
    assert LA.diagonal(t, dim1="b", dim2="col", out_name="k").names == ("row", "k")
    assert LA.matrix_transpose(t).names == ("b", "col", "row")
    assert LA.matrix_transpose(t, dims=("b", "col")).names == ("col", "row", "b")
    assert_close(LA.matrix_transpose(t), np.swapaxes(a, -1, -2))


# ----------------------------------------------------------------------------- name rules


@st.composite
def matrix_case(draw, square=True):
    """A named tensor of 2 to 4 dims, two of which (by name or int) are the matrix dims; square matrices are
    made diagonally dominant (invertible).  Also the array with the batch dims first, then the matrix dims."""
    ndim = draw(st.integers(2, 4))
    names = draw(nts.names(ndim))
    r, c = draw(st.permutations(range(ndim)))[:2]
    shape = [draw(st.integers(1, 3)) for _ in range(ndim)]
    if square:
        shape[c] = shape[r]
    a = draw(nts.arrays(tuple(shape)))
    dims = tuple(names[i] if names[i] is not None and draw(st.booleans()) else i - draw(st.sampled_from([0, ndim]))
                 for i in (r, c))
    order = [i for i in range(ndim) if i not in (r, c)] + [r, c]
    moved = np.transpose(a, order)
    if square:
        moved = moved + 4 * np.eye(shape[r])
        a = np.transpose(moved, np.argsort(order))
    batch = tuple(names[i] for i in order[:-2])
    return a, names, dims, moved, batch, names[r], names[c]


@given(case=matrix_case(), k=st.sampled_from([None, "k"]))
def test_square_name_rules(case, k):
    a, names, dims, moved, batch, row, col = case
    t = nt.tensor(a, names=names)
    out = LA.inv(t, dims=dims)
    assert out.names == batch + (row, col)
    assert_close(out, np.linalg.inv(moved), atol=1e-8)
    assert LA.det(t, dims=dims).names == batch
    assert_close(LA.det(t, dims=dims), np.linalg.det(moved), atol=1e-8)
    assert LA.matrix_power(t, 2, dims=dims).names == batch + (row, col)
    assert_close(LA.matrix_power(t, 2, dims=dims), moved @ moved, atol=1e-8)
    assert LA.trace(t, dims=dims).names == batch
    assert LA.eigvalsh(t, dims=dims).names == batch + (None,)
    if k not in names:
        w, v = LA.eigh(t, dims=dims, name=k)
        assert w.names == batch + (k,) and v.names == batch + (row, k)


@given(case=matrix_case(square=False))
def test_rectangular_name_rules(case):
    a, names, dims, moved, batch, row, col = case
    t = nt.tensor(a, names=names)
    assert LA.pinv(t, dims=dims).names == batch + (col, row)
    assert_close(LA.pinv(t, dims=dims), np.linalg.pinv(moved), atol=1e-8)
    u, s, vh = LA.svd(t, False, dims=dims)
    assert (u.names, s.names, vh.names) == (batch + (row, None), batch + (None,), batch + (None, col))
    assert_close(s, np.linalg.svd(moved, compute_uv=False), atol=1e-8)
    assert LA.svdvals(t, dims=dims).names == batch + (None,)
    q, r = LA.qr(t, dims=dims)
    assert (q.names, r.names) == (batch + (row, None), batch + (None, col))
    assert_close(q @ r, moved, atol=1e-8)
    assert LA.matrix_rank(t, dims=dims).names == batch
    assert LA.matrix_norm(t, "nuc", dim=dims).names == batch
    assert LA.matrix_norm(t, 1, dim=dims, keepdim=True).names == names
    assert_close(LA.matrix_norm(t, 1, dim=dims), np.linalg.norm(moved, 1, axis=(-2, -1)), atol=1e-8)


def test_factor_names_and_batch_order():
    t = nt.zeros({"row": 3, "b": 2, "col": 4, "h": 5}) + nt.eye(3, 4)[:, None, :, None]
    u, s, vh = LA.svd(t, dims=("row", "col"), name="k")
    assert (u.names, s.names, vh.names) == (("b", "h", "row", "k"), ("b", "h", "k"), ("b", "h", "k", "col"))
    assert u.shape == (2, 5, 3, 3) and vh.shape == (2, 5, 4, 4)
    q, r = LA.qr(t, dims=("row", "col"), name="k")
    assert (q.names, r.names) == (("b", "h", "row", "k"), ("b", "h", "k", "col"))


def test_solve_names():
    a = nt.eye(3, names=("i", "j"), dtype=nt.float64) * 2
    x = LA.solve(a, nt.ones(3, 5, names=("i", "batch"), dtype=nt.float64))  # B's rows meet A's rows
    assert x.names == ("j", "batch")
    assert_close(x, np.full((3, 5), 0.5))
    v = LA.solve(a, nt.ones(3, names=("i",), dtype=nt.float64))
    assert v.names == ("j",)
    # batch dims unify; an unnamed A passes B's names through
    ab = nt.ones(4, 3, 3, names=("batch", None, None), dtype=nt.float64) + nt.eye(3, dtype=nt.float64)
    assert LA.solve(ab, nt.ones(3, 2, names=("i", "k"), dtype=nt.float64)).names == ("batch", "i", "k")
    assert LA.solve(a, nt.ones(2, 3, names=("k", "j"), dtype=nt.float64), left=False).names == ("k", "i")
    # A's matrix dims anywhere, by name
    at = nt.ones(3, 4, 3, names=("i", "batch", "j"), dtype=nt.float64) + nt.eye(3, dtype=nt.float64)[:, None, :]
    assert LA.solve(at, nt.ones(4, 3, names=("batch", "i"), dtype=nt.float64), dims=("i", "j")).names == ("batch", "j")


# ----------------------------------------------------------------------------- gradients


def _leaf(a, names=T):
    return nt.tensor(a, names=names, requires_grad=True)


def _check(fn, *inputs):
    assert gradcheck(fn, *inputs)
    assert gradgradcheck(fn, *inputs)


def test_gradients_of_inverse_and_determinants(rng):
    a = _leaf(rng.standard_normal((2, 3, 3)) + 3 * np.eye(3))
    _check(LA.inv, a)
    _check(LA.det, a)
    _check(lambda x: LA.slogdet(x).logabsdet, a)
    _check(lambda x: LA.matrix_power(x, 3), a)
    _check(lambda x: LA.matrix_power(x, -2), a)
    _check(LA.trace, a)
    # matrix dims given by name, not last: the gradient comes back in the input's layout and names
    c = _leaf(np.moveaxis(rng.standard_normal((2, 3, 3)) + 3 * np.eye(3), 1, 0), ("row", "b", "col"))
    _check(lambda x: LA.inv(x, dims=("row", "col")), c)
    x = c.detach().requires_grad_()
    LA.det(x, dims=("row", "col")).sum().backward()
    assert x.grad.names == ("row", "b", "col")


def test_gradients_of_solve(rng):
    a = _leaf(rng.standard_normal((2, 3, 3)) + 3 * np.eye(3))
    b = _leaf(rng.standard_normal((3, 2)), ("row", "k"))
    _check(LA.solve, a, b)
    v = _leaf(rng.standard_normal((2, 3)), ("b", "row"))
    _check(LA.solve, a, v)
    _check(lambda x, y: LA.solve(x, y, left=False), a, _leaf(rng.standard_normal((1, 2, 3)), (None, None, "col")))


def _squared_factors(result):
    """A decomposition's factors, squared where they are vectors: gauge-invariant (the signs drop out)."""
    if isinstance(result, nt.Tensor):
        result = LA.svd(result, False)
    if isinstance(result, LA.EighResult):
        return result.eigenvalues, result.eigenvectors ** 2
    return result.U ** 2, result.S, result.Vh ** 2


def test_gradients_of_cholesky_and_eigh(rng):
    x = _leaf(rng.standard_normal((2, 3, 3)))

    def sym(t):
        return t @ t.mT.rename(None) + 3 * nt.eye(3, dtype=nt.float64)

    _check(lambda t: LA.cholesky(sym(t.rename(None))), x)
    _check(lambda t: LA.cholesky(sym(t.rename(None)), upper=True), x)
    _check(lambda t: LA.eigvalsh(sym(t.rename(None))), x)
    _check(lambda t: _squared_factors(LA.eigh(sym(t.rename(None)))), x)


@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (2, 3, 4)])
def test_gradients_of_qr_svd_pinv(rng, shape):
    a = _leaf(rng.standard_normal(shape), T[-len(shape):])
    _check(lambda t: list(LA.qr(t)), a)
    _check(LA.svdvals, a)
    _check(_squared_factors, a)
    _check(lambda t: LA.svd(t)[1], a)
    _check(LA.pinv, a)
    for ord in ("fro", "nuc", 2, -2, 1, math.inf):
        _check(lambda t: LA.matrix_norm(t, ord), a)


def test_gradient_of_full_svd_uses_the_first_columns(rng):
    a = _leaf(rng.standard_normal((4, 2)), ("row", "col"))
    _check(lambda t: LA.svd(t, True).U[:, :2] ** 2, a)


def test_gradients_of_vector_functions(rng):
    x = _leaf(rng.standard_normal((4, 3)), ("n", "xyz"))
    y = _leaf(rng.standard_normal((3,)), ("xyz",))
    _check(LA.cross, x, y)
    _check(LA.vecdot, x, y)
    _check(lambda t: LA.vector_norm(t, 3, "xyz"), x)
    _check(LA.vector_norm, x)
    w = _leaf(rng.standard_normal((3, 2)), ("xyz", "out"))
    _check(lambda s, t: nt.tensordot(s, t, 1), x, w)
    _check(lambda s, t: nt.tensordot(s, t, dims=(("xyz",), ("xyz",))), x, w)


# ----------------------------------------------------------------------------- errors


def test_errors():
    sq = nt.ones(2, 3, 3, names=T, dtype=nt.float64)
    rect = nt.ones(2, 3, 4, names=T, dtype=nt.float64)
    with pytest.raises(ValueError, match=r"linalg.inv: A must be a square matrix .* sizes 3 and 4"):
        LA.inv(rect)
    with pytest.raises(ValueError, match="linalg.det: expects a matrix or a batch of matrices"):
        LA.det(nt.ones(3, dtype=nt.float64))
    with pytest.raises(nt.NamesError, match="linalg.det: no dim named 'x'"):
        LA.det(sq, dims=("x", "col"))
    with pytest.raises(nt.NamesError, match="linalg.inv: dims=.* name the same dim twice"):
        LA.inv(sq, dims=("row", -2))
    with pytest.raises(TypeError, match=r"linalg.inv: dims must be a pair \(row, col\)"):
        LA.inv(sq, dims="row")
    with pytest.raises(TypeError, match=r"linalg.inv: A must be a float32, float64, complex64 or complex128 tensor, "
                                        r"got .*int64.*\.double\(\)"):
        LA.inv(nt.ones(3, 3, dtype=nt.int64))
    with pytest.raises(TypeError, match="linalg.vector_norm: x must be a float32, float64, complex64 or complex128"):
        LA.vector_norm(nt.ones(3, dtype=nt.int64))
    with pytest.raises(ValueError, match="linalg.inv: Singular matrix"):
        LA.inv(nt.zeros(2, 2, dtype=nt.float64))
    with pytest.raises(ValueError, match="linalg.cholesky: .*not positive definite"):
        LA.cholesky(-nt.eye(2, dtype=nt.float64))
    with pytest.raises(nt.NamesError, match="linalg.svd: name='row' for the new dim .* choose another name"):
        LA.svd(rect, name="row")
    with pytest.raises(nt.NamesError, match="linalg.solve: A's row dim 'row' .* meets B's dim 'k' .* names must be equal"):
        LA.solve(sq, nt.ones(3, 2, names=("k", None), dtype=nt.float64))
    with pytest.raises(nt.NamesError, match="linalg.solve: X would name two dims 'col'.* Rename B's dim"):
        LA.solve(sq, sq)
    with pytest.raises(nt.NamesError, match="linalg.solve: dims .* do not match at position -1"):
        LA.solve(sq, nt.ones(2, 3, 1, names=("other", "row", None), dtype=nt.float64))
    with pytest.raises(ValueError, match=r"linalg.solve: B of shape \(2, 2\) .* does not fit A's 3 x 3 matrices"):
        LA.solve(sq, nt.ones(2, 2, dtype=nt.float64))
    with pytest.raises(ValueError, match="linalg.qr: mode must be one of"):
        LA.qr(rect, mode="raw")
    with pytest.raises(ValueError, match="linalg.eigh: UPLO must be 'L' or 'U'"):
        LA.eigh(sq, "X")
    with pytest.raises(ValueError, match="linalg.matrix_norm: ord must be one of"):
        LA.matrix_norm(sq, 3)
    with pytest.raises(ValueError, match="linalg.vector_norm: ord must be a number"):
        LA.vector_norm(sq, "fro")
    with pytest.raises(ValueError, match="linalg.cross: both operands need size 3"):
        LA.cross(rect, rect)
    with pytest.raises(nt.NamesError, match="linalg.cross: dims .* do not match"):
        LA.cross(nt.ones(3, names=("a",)), nt.ones(3, names=("b",)))
    with pytest.raises(nt.NamesError, match="tensordot: the contracted dims differ: dim 2 \\('col'\\)"):
        nt.tensordot(rect, nt.ones(4, 2, names=("k", None), dtype=nt.float64), 1)
    with pytest.raises(nt.NamesError, match="tensordot: the result would have a's other dims .* share the name 'b'"):
        nt.tensordot(rect, nt.ones(4, 2, names=("col", "b"), dtype=nt.float64), 1)
    with pytest.raises(ValueError, match="tensordot: contracted dims of different sizes, 4 and 5"):
        nt.tensordot(rect, nt.ones(5, dtype=nt.float64), 1)
    with pytest.raises(ValueError, match="tensordot: dims=4 must be between 0"):
        nt.tensordot(rect, rect, 4)
    with pytest.raises(ValueError, match="linalg.svd: driver='gesvd'"):
        LA.svd(rect, driver="gesvd")
    with pytest.raises(TypeError, match="linalg.matrix_power: n must be an int"):
        LA.matrix_power(sq, 1.5)


def test_gradient_errors(rng):
    a = _leaf(rng.standard_normal((4, 2)), ("row", "col"))
    q, r = LA.qr(a, mode="complete")
    with pytest.raises(NotImplementedError, match="linalg.qr: the gradient of mode='complete'"):
        (q.sum() + r.sum()).backward()
    q, r = LA.qr(a, mode="r")
    assert q.shape == (0,) and not r.requires_grad


# ----------------------------------------------------------------------------- dry runs, float32, Array API


def test_dry_run():
    def fn(a, b):
        u, s, vh = LA.svd(a, False, dims=("row", "col"), name="k")
        x = LA.solve(LA.inv(b) + LA.cholesky(b), vh.rename(k="row", col="rhs"))
        return u, s, x, LA.det(b), LA.pinv(a, dims=("row", "col")), LA.eigh(b).eigenvectors, LA.qr(a, dims=("row", "col"))

    trace = nt.trace_shapes(fn, nt.spec({"row": 5, "batch": 2, "col": 3}), nt.spec({"batch": 2, "row": 3, "col": 3}))
    u, s, x, d, p, v, (q, r) = trace.result
    assert (u.names, u.shape) == (("batch", "row", "k"), (2, 5, 3))
    assert (s.names, s.shape) == (("batch", "k"), (2, 3))
    assert (x.names, x.shape) == (("batch", "col", "rhs"), (2, 3, 3))
    assert (d.names, p.names, p.shape) == (("batch",), ("batch", "col", "row"), (2, 3, 5))
    assert v.shape == (2, 3, 3) and (q.shape, r.shape) == ((2, 5, 3), (2, 3, 3))
    assert "linalg.svd" in trace.ops

    def more(a, b):
        return (LA.svdvals(a, dims=("row", "col")), LA.slogdet(b).logabsdet, LA.matrix_rank(a, dims=("row", "col")),
                LA.matrix_norm(a, "nuc", dim=("row", "col"), keepdim=True), LA.eigvalsh(b), LA.matrix_power(b, -3),
                LA.cross(b, b), nt.tensordot(a, b.rename(None), dims=(("col",), (1,))), LA.trace(b))

    shapes = [(r.names, r.shape) for r in nt.trace_shapes(more, nt.spec({"row": 5, "batch": 2, "col": 3}),
                                                           nt.spec({"batch": 2, "row": 3, "col": 3})).result]
    assert shapes == [(("batch", None), (2, 3)), (("batch",), (2,)), (("batch",), (2,)),
                      (("row", "batch", "col"), (1, 2, 1)), (("batch", None), (2, 3)), (("batch", "row", "col"), (2, 3, 3)),
                      (("batch", "row", "col"), (2, 3, 3)), (("row", "batch", None, None), (5, 2, 2, 3)),
                      (("batch",), (2,))]


def test_float32_stays_float32(rng):
    a = nt.tensor(rng.standard_normal((3, 3)).astype(np.float32) + 3 * np.eye(3, dtype=np.float32))
    for out in (LA.inv(a), LA.det(a), LA.svdvals(a), LA.pinv(a), LA.qr(a).Q, LA.eigh(a @ a.mT).eigenvalues,
                LA.solve(a, a), LA.matrix_norm(a, 2)):
        assert out.dtype == nt.float32


def test_array_api_linalg(rng):
    a = rng.standard_normal((2, 3, 3)) + 3 * np.eye(3)
    t = _t(a)
    xp = t.__array_namespace__()
    assert xp.linalg.inv(t).names == T
    assert_close(xp.linalg.vector_norm(t, axis="col", keepdims=True, ord=1), np.abs(a).sum(-1, keepdims=True))
    assert_close(xp.linalg.matrix_norm(t, ord="fro"), np.linalg.norm(a, axis=(-2, -1)))
    assert xp.linalg.cross(t, t, axis="row").names == T
    assert_close(xp.linalg.vecdot(t, t, axis="b"), (a * a).sum(0))
    u = t.rename(None)
    assert_close(xp.linalg.tensordot(t, u, axes=([0, 1], [0, 1])), np.tensordot(a, a, axes=([0, 1], [0, 1])))
    assert_close(xp.tensordot(t, u, axes=(["b", "row"], [0, 1])), np.tensordot(a, a, axes=([0, 1], [0, 1])))
    assert xp.tensordot(t, u.permute(2, 0, 1), axes=1).names == ("b", "row", None, None)
    assert_close(xp.linalg.trace(t, offset=1), np.trace(a, 1, -2, -1))
    assert_close(xp.linalg.matrix_rank(t), np.linalg.matrix_rank(a))
    assert_close(xp.linalg.svd(t).S, np.linalg.svd(a).S)
    assert_close(xp.linalg.svd(t).U.shape, (2, 3, 3))
    assert_close(xp.linalg.pinv(t), np.linalg.pinv(a))
    assert_close(xp.linalg.solve(t, u), np.eye(3)[None].repeat(2, 0), atol=1e-10)
    c = nt.tensor(rng.standard_normal((3, 3, 3)) + 3 * np.eye(3), names=T)
    x = xp.linalg.solve(c, nt.tensor(np.eye(3)))  # a matrix, the standard's rule (PyTorch's: 3 vectors)
    assert x.names == ("b", "col", None)
    assert_close(x, np.linalg.inv(c.numpy()))
    assert_close(xp.linalg.diagonal(t), np.diagonal(a, axis1=-2, axis2=-1))
    assert xp.linalg.matrix_transpose(t).names == ("b", "col", "row")
