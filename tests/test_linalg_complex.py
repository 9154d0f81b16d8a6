"""nt.linalg on complex matrices (and the contractions on mixed integer dtypes): values against torch.linalg and
numpy.linalg for complex64 and complex128, names as for real inputs, gradients in PyTorch's convention checked
by central differences (real and imaginary parts), second gradients, and against torch.autograd on the same
data; dry runs give real dtypes where PyTorch does."""

import math

import numpy as np
import pytest
import torch

import namedtensor as nt
from namedtensor import linalg as LA
from namedtensor.autograd.graph import Op, apply
from namedtensor.ops import linalg as contractions
from namedtensor.ops import matrix
from namedtensor.testing import assert_close, gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

T = ("b", "row", "col")
COMPLEX = [nt.complex64, nt.complex128]
TOL = {nt.complex64: 2e-4, nt.complex128: 1e-9}
NP = {nt.complex64: np.complex64, nt.complex128: np.complex128}


def _c(rng, shape, dtype=nt.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(NP[dtype])


def _hpd(rng, n=3, batch=(2,), dtype=nt.complex128):
    """Hermitian positive-definite matrices."""
    a = _c(rng, batch + (n, n), dtype)
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(NP[dtype])


def _t(a, names=T, grad=False):
    return nt.tensor(a, names=names[-np.ndim(a):] if names else None, requires_grad=grad)


def _close(x, y, tol):
    y = y.detach().resolve_conj().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
    assert x.shape == y.shape
    np.testing.assert_allclose(x.numpy(), y, rtol=tol, atol=tol)


def _names_of(a):
    return T[-np.ndim(a):]


def _result_names(fn, a):
    out = fn(nt.tensor(a, names=_names_of(a)))
    return [o.names for o in (out if isinstance(out, tuple) else (out,))]


# ----------------------------------------------------------------------------- values against torch and NumPy


@pytest.mark.parametrize("dtype", COMPLEX)
def test_square_functions_match_torch_and_numpy(rng, dtype):
    tol = TOL[dtype]
    a = _c(rng, (2, 3, 3), dtype) + 3 * np.eye(3, dtype=NP[dtype])
    h = _hpd(rng, dtype=dtype)
    ta, th = torch.tensor(a), torch.tensor(h)
    t, th_nt = _t(a), _t(h)
    inv = LA.inv(t)
    assert inv.dtype == dtype and inv.names == T
    _close(inv, torch.linalg.inv(ta), tol)
    _close(inv, np.linalg.inv(a), tol)
    det = LA.det(t)
    assert det.dtype == dtype and det.names == ("b",)
    _close(det, torch.linalg.det(ta), tol)
    _close(det, np.linalg.det(a), tol)
    sign, logabsdet = LA.slogdet(t)
    assert (sign.dtype, logabsdet.dtype) == (dtype, nt.float32 if dtype == nt.complex64 else nt.float64)
    _close(sign, torch.linalg.slogdet(ta).sign, tol)
    _close(logabsdet, torch.linalg.slogdet(ta).logabsdet, tol)
    _close(nt.logdet(t), torch.logdet(ta), tol)
    for upper in (False, True):
        lo = LA.cholesky(th_nt, upper=upper)
        assert lo.names == T
        _close(lo, torch.linalg.cholesky(th, upper=upper), tol)
    _close(nt.cholesky(th_nt, True), torch.linalg.cholesky(th).mH, tol)  # torch.cholesky's upper: L^H
    w, v = LA.eigh(th_nt, name="k")
    assert (w.dtype, v.dtype) == (logabsdet.dtype, dtype)
    assert (w.names, v.names) == (("b", "k"), ("b", "row", "k"))
    _close(w, torch.linalg.eigh(th).eigenvalues, tol)
    _close(w, np.linalg.eigvalsh(h), tol)
    # eigenvectors up to a phase each: |V| and V diag(w) V^H = A
    _close(v.abs(), torch.linalg.eigh(th).eigenvectors.abs(), 10 * tol)
    vv = v.rename(None)
    _close((vv * w.rename(None).unsqueeze(-2)) @ vv.mH, h, 10 * tol)
    # UPLO="U" reads the upper triangle of a Hermitian matrix: anything below the diagonal is ignored
    upper_only = np.triu(h) + np.tril(_c(rng, h.shape, dtype), -1)
    _close(LA.eigvalsh(_t(upper_only), "U"), torch.linalg.eigvalsh(torch.tensor(upper_only), "U"), tol)
    _close(LA.eigh(_t(upper_only), "U").eigenvalues, np.linalg.eigvalsh(upper_only, "U"), tol)
    assert LA.eigvalsh(th_nt).names == ("b", None)
    for n in (-2, -1, 0, 1, 3):
        _close(LA.matrix_power(t, n), torch.linalg.matrix_power(ta, n), 10 * tol)
    _close(LA.trace(t), torch.diagonal(ta, dim1=-2, dim2=-1).sum(-1), tol)
    _close(LA.trace(t, -1), np.trace(a, -1, -2, -1), tol)
    _close(nt.trace(t[0]), torch.trace(ta[0]), tol)
    b = _c(rng, (3, 2), dtype)
    x = LA.solve(t, _t(b, ("row", "k")))
    assert x.names == ("b", "col", "k")
    np.testing.assert_allclose(a @ x.numpy(), np.broadcast_to(b, (2, 3, 2)), atol=10 * tol)
    y = _c(rng, (2, 3), dtype)
    _close(LA.solve(t, _t(y, ("b", "row"))), torch.linalg.solve(ta, torch.tensor(y)), tol)
    _close(LA.solve(t, _t(y[:, None, :], ("b", None, "col")), left=False),
           torch.linalg.solve(ta, torch.tensor(y[:, None, :]), left=False), tol)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape", [(2, 4, 3), (2, 3, 4), (3, 3)])
def test_rectangular_functions_match_torch_and_numpy(rng, dtype, shape):
    tol = TOL[dtype]
    real = nt.float32 if dtype == nt.complex64 else nt.float64
    a = _c(rng, shape, dtype)
    ta, t = torch.tensor(a), _t(a)
    names = _names_of(a)
    q, r = LA.qr(t, name="k")
    assert (q.names, r.names) == (names[:-1] + ("k",), names[:-2] + ("k", names[-1]))
    tq, tr = torch.linalg.qr(ta)
    _close(q, tq, 10 * tol)  # both LAPACK's Householder QR: R's diagonal is real, same signs
    _close(r, tr, 10 * tol)
    _close(q @ r.rename(None), a, tol)
    qc, rc = LA.qr(t, mode="complete")
    _close(qc, torch.linalg.qr(ta, mode="complete").Q, 10 * tol)
    _close(qc.mH @ qc, np.broadcast_to(np.eye(shape[-2]), qc.shape[:-2] + (shape[-2],) * 2), tol)
    for full in (True, False):
        u, s, vh = LA.svd(t, full, name="k")
        assert (u.dtype, s.dtype, vh.dtype) == (dtype, real, dtype)
        assert (u.names, s.names, vh.names) == (names[:-1] + ("k",), names[:-2] + ("k",), names[:-2] + ("k", names[-1]))
        tu, ts, tvh = torch.linalg.svd(ta, full)
        _close(s, ts, tol)
        _close(s, np.linalg.svd(a, compute_uv=False), tol)
        # the singular vectors up to a phase each: A = U diag(S) Vh with Vh the conjugate transpose of V
        k = min(shape[-2:])
        uk, vhk = u.numpy()[..., :k], vh.numpy()[..., :k, :]
        np.testing.assert_allclose((uk * s.numpy()[..., None, :]) @ vhk, a, atol=10 * tol)
        np.testing.assert_allclose(abs(uk), abs(tu.numpy()[..., :k]), atol=10 * tol)
        np.testing.assert_allclose(abs(vhk), abs(tvh.numpy()[..., :k, :]), atol=10 * tol)
    _close(LA.svdvals(t), torch.linalg.svdvals(ta), tol)
    assert LA.svdvals(t).dtype == real
    u, s, v = nt.svd(t)
    assert v.names == names[:-2] + (names[-1], None)
    np.testing.assert_allclose((u.numpy() * s.numpy()[..., None, :]) @ np.conj(np.swapaxes(v.numpy(), -1, -2)), a,
                               atol=10 * tol)
    p = LA.pinv(t)
    assert p.names == names[:-2] + (names[-1], names[-2]) and p.dtype == dtype
    _close(p, torch.linalg.pinv(ta), 10 * tol)
    _close(p, np.linalg.pinv(a), 10 * tol)
    _close(nt.pinverse(t), torch.pinverse(ta), 10 * tol)
    assert (LA.matrix_rank(t).numpy() == torch.linalg.matrix_rank(ta).numpy()).all()
    for ord in ("fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf):
        out = LA.matrix_norm(t, ord)
        assert out.dtype == real and out.names == names[:-2]
        _close(out, torch.linalg.matrix_norm(ta, ord), tol)
    assert LA.matrix_norm(t, "nuc", keepdim=True).names == names
    for ord in (2, 1, 3.5, 0, math.inf, -math.inf):
        out = LA.vector_norm(t, ord, "col")
        assert out.dtype == real and out.names == names[:-1]
        _close(out, torch.linalg.vector_norm(ta, ord, -1), tol)
    _close(LA.norm(t), torch.linalg.norm(ta), tol)
    _close(nt.norm(t, 2, "row"), torch.norm(ta, 2, -2), tol)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_vector_functions_and_views_match_torch(rng, dtype):
    tol = TOL[dtype]
    x, y = _c(rng, (4, 3), dtype), _c(rng, (3,), dtype)
    tx, ty = _t(x, ("n", "xyz")), _t(y, ("xyz",))
    d = LA.vecdot(tx, ty)
    assert d.names == ("n",) and d.dtype == dtype
    _close(d, torch.linalg.vecdot(torch.tensor(x), torch.tensor(y)), tol)
    _close(d, (np.conj(x) * y).sum(-1), tol)  # the first operand is conjugated
    c = LA.cross(tx, ty)
    assert c.names == ("n", "xyz")
    _close(c, torch.linalg.cross(torch.tensor(x), torch.tensor(y).expand(4, 3)), tol)
    o = LA.outer(ty, _t(x[0], ("k",)))
    assert o.names == ("xyz", "k")
    _close(o, np.outer(y, x[0]), tol)  # no conjugation, as torch.outer and the standard
    w = _c(rng, (3, 2), dtype)
    td = nt.tensordot(tx, _t(w, ("xyz", "out")), 1)
    assert td.names == ("n", "out")
    _close(td, torch.tensordot(torch.tensor(x), torch.tensor(w), 1), tol)
    _close(nt.einsum("n xyz, xyz out -> n out", tx, _t(w, ("xyz", "out"))), x @ w, tol)
    m = _t(_c(rng, (2, 3, 4), dtype))
    mt = LA.matrix_transpose(m)
    assert mt.names == ("b", "col", "row")
    _close(mt, np.swapaxes(m.numpy(), -1, -2), 0)  # a transpose, not the conjugate transpose
    _close(LA.diagonal(m), np.diagonal(m.numpy(), axis1=-2, axis2=-1), 0)
    _close(LA.multi_dot([m[0], m[1].mT.rename(None), ty]), m.numpy()[0] @ m.numpy()[1].T @ y, tol)


def test_complex_names_follow_the_real_rules(rng):
    a = _c(rng, (2, 3, 3))
    h = _hpd(rng)
    for fn, arg in [(LA.inv, a), (LA.det, a), (LA.slogdet, a), (LA.pinv, a), (LA.eigh, h), (LA.eigvalsh, h),
                    (LA.cholesky, h), (LA.qr, a), (LA.svd, a), (LA.svdvals, a), (LA.matrix_rank, a),
                    (LA.trace, a), (LA.matrix_norm, a), (LA.vector_norm, a)]:
        # the real matrices of the same shape and names get the same names
        assert _result_names(fn, arg) == _result_names(fn, arg.real.copy()), fn.__name__
    # matrix dims by name, anywhere: batch dims first, as for real matrices
    moved = nt.tensor(np.moveaxis(a, 1, 0), names=("row", "b", "col"))
    assert LA.inv(moved, dims=("row", "col")).names == ("b", "row", "col")
    _close(LA.det(moved, dims=("row", "col")), np.linalg.det(a), 1e-9)


# ----------------------------------------------------------------------------- gradients


def _leaf(a, names=T):
    return nt.tensor(a, names=names[-np.ndim(a):], requires_grad=True)


def _weights(outs, seed=7):
    r = np.random.default_rng(seed)
    ws = []
    for o in outs:
        w = r.uniform(0.5, 1.5, o.shape) * r.choice((-1.0, 1.0), o.shape)
        if o.dtype in (nt.complex64, nt.complex128):
            w = w + 1j * r.uniform(0.5, 1.5, o.shape)
        ws.append(w)
    return ws


def _as_list(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _matches_torch(fn, torch_fn, *arrays, names=None, tol=1e-8):
    """``fn`` on named leaves and ``torch_fn`` on torch leaves of the same data: the gradients of
    ``Re(sum(out * w))``, for fixed weights ``w``, agree (PyTorch's convention for complex inputs)."""
    leaves = [nt.tensor(a, names=n, requires_grad=True) for a, n in zip(arrays, names or [None] * len(arrays))]
    outs = _as_list(fn(*leaves))
    ws = _weights(outs)
    total = None
    for o, w in zip(outs, ws):
        term = (o * nt.tensor(w, names=o.names)).sum().real
        total = term if total is None else total + term
    got = nt.grad(total, leaves)
    tl = [torch.tensor(a, requires_grad=True) for a in arrays]
    touts = _as_list(torch_fn(*tl))
    ttotal = sum((o * torch.tensor(w)).sum().real for o, w in zip(touts, ws))
    want = torch.autograd.grad(ttotal, tl)
    for g, x, t in zip(got, leaves, want):
        assert g.names == x.names and g.dtype == x.dtype
        np.testing.assert_allclose(g.numpy(), t.resolve_conj().numpy(), rtol=tol, atol=tol)


def _check(fn, *inputs):
    assert gradcheck(fn, *inputs)
    assert gradgradcheck(fn, *inputs)


def _herm(t):
    """A Hermitian positive-definite matrix made from any ``t`` (the functions that read one triangle only
    are differentiated through it)."""
    t = t.rename(None)
    return t @ t.mH + 3 * nt.eye(t.shape[-1], dtype=t.dtype)


def _therm(t):
    return t @ t.mH + 3 * torch.eye(t.shape[-1], dtype=t.dtype)


def test_gradients_of_inverse_determinants_and_solve(rng):
    a = _c(rng, (2, 3, 3)) + 3 * np.eye(3)
    b = _c(rng, (3, 2))
    x = _leaf(a)
    _check(LA.inv, x)
    _check(LA.det, x)
    _check(lambda t: LA.slogdet(t).logabsdet, x)
    _check(lambda t: list(LA.slogdet(t)), x)  # the complex sign turns with A: it has a gradient
    _check(nt.logdet, x)
    _check(lambda t: LA.matrix_power(t, 3), x)
    _check(lambda t: LA.matrix_power(t, -2), x)
    _check(LA.trace, x)
    _check(LA.solve, x, _leaf(b, ("row", "k")))
    _check(lambda s, t: LA.solve(s, t, left=False), x, _leaf(_c(rng, (1, 2, 3)), (None, None, "col")))
    _matches_torch(LA.inv, torch.linalg.inv, a, names=[T])
    _matches_torch(LA.det, torch.linalg.det, a, names=[T])
    _matches_torch(lambda t: list(LA.slogdet(t)), lambda t: list(torch.linalg.slogdet(t)), a, names=[T])
    _matches_torch(nt.logdet, torch.logdet, a, names=[T])
    _matches_torch(lambda t: LA.matrix_power(t, -3), lambda t: torch.linalg.matrix_power(t, -3), a, names=[T])
    _matches_torch(LA.trace, lambda t: torch.diagonal(t, dim1=-2, dim2=-1).sum(-1), a, names=[T])
    _matches_torch(LA.solve, torch.linalg.solve, a, b, names=[T, ("row", "k")])


def test_gradients_of_hermitian_functions(rng):
    a = _c(rng, (2, 3, 3))
    x = _leaf(a)
    _check(lambda t: LA.cholesky(_herm(t)), x)
    _check(lambda t: LA.cholesky(_herm(t), upper=True), x)
    _check(lambda t: LA.eigvalsh(_herm(t)), x)
    # eigenvectors have a phase each: |V| and V f(w) V^H do not depend on it
    _check(lambda t: [LA.eigh(_herm(t)).eigenvalues, LA.eigh(_herm(t)).eigenvectors.abs()], x)
    _matches_torch(lambda t: LA.cholesky(_herm(t)), lambda t: torch.linalg.cholesky(_therm(t)), a, names=[T])
    _matches_torch(lambda t: LA.cholesky(_herm(t), upper=True),
                   lambda t: torch.linalg.cholesky(_therm(t), upper=True), a, names=[T])
    _matches_torch(lambda t: LA.eigvalsh(_herm(t), "U"), lambda t: torch.linalg.eigvalsh(_therm(t), "U"), a,
                   names=[T])

    def projector(w, v):
        return (v * (w * w).unsqueeze(-2)) @ v.mH

    _matches_torch(lambda t: [LA.eigh(_herm(t)).eigenvectors.abs(), projector(*LA.eigh(_herm(t)))],
                   lambda t: [torch.linalg.eigh(_therm(t)).eigenvectors.abs(), projector(*torch.linalg.eigh(_therm(t)))],
                   a, names=[T], tol=1e-7)


def _tsvd_invariant(svd):
    def fn(t):
        u, s, vh = svd(t)
        k = s.shape[-1]
        # |U|, |Vh| and U Vh do not depend on the phases of the singular vectors
        return [u[..., :k].abs(), s, vh[..., :k, :].abs(), u[..., :k] @ vh[..., :k, :]]
    return fn


@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (2, 3, 4)])
def test_gradients_of_qr_svd_pinv_and_norms(rng, shape):
    a = _c(rng, shape)
    names = T[-len(shape):]
    x = _leaf(a, names)
    _check(lambda t: list(LA.qr(t)), x)
    _check(LA.svdvals, x)
    _check(_tsvd_invariant(lambda t: LA.svd(t, False)), x)
    _check(LA.pinv, x)
    for ord in ("fro", "nuc", 2, -2, 1, math.inf):
        _check(lambda t: LA.matrix_norm(t, ord), x)
    _check(lambda t: LA.vector_norm(t, 3, "col"), x)
    _matches_torch(lambda t: list(LA.qr(t)), lambda t: list(torch.linalg.qr(t)), a, names=[names])
    _matches_torch(LA.svdvals, torch.linalg.svdvals, a, names=[names])
    for full in (False, True):
        _matches_torch(_tsvd_invariant(lambda t: LA.svd(t, full)), _tsvd_invariant(lambda t: torch.linalg.svd(t, full)),
                       a, names=[names], tol=1e-7)
    _matches_torch(LA.pinv, torch.linalg.pinv, a, names=[names], tol=1e-7)
    for ord in ("fro", "nuc", 2, -2, -1, math.inf):
        _matches_torch(lambda t: LA.matrix_norm(t, ord), lambda t: torch.linalg.matrix_norm(t, ord), a, names=[names])
    for ord in (2, 1, 3.5, math.inf):
        _matches_torch(lambda t: LA.vector_norm(t, ord, -1), lambda t: torch.linalg.vector_norm(t, ord, -1), a,
                       names=[names])


def test_gradients_of_vector_functions(rng):
    x, y, w = _c(rng, (4, 3)), _c(rng, (3,)), _c(rng, (3, 2))
    xl, yl, wl = _leaf(x, ("n", "xyz")), _leaf(y, ("xyz",)), _leaf(w, ("xyz", "out"))
    _check(LA.cross, xl, yl)
    _check(LA.vecdot, xl, yl)
    _check(lambda s, t: nt.tensordot(s, t, 1), xl, wl)
    _check(lambda s, t: LA.outer(s, t.rename(xyz="k")), yl, yl)
    _check(lambda s, t: nt.einsum("n xyz, xyz out -> out", s, t), xl, wl)
    _check(lambda s, t: s @ t, xl, wl)
    names = [("n", "xyz"), ("xyz",)]
    _matches_torch(LA.cross, lambda s, t: torch.linalg.cross(s, t.expand(4, 3)), x, y, names=names)
    _matches_torch(LA.vecdot, torch.linalg.vecdot, x, y, names=names)
    _matches_torch(lambda s, t: nt.tensordot(s, t, 1), lambda s, t: torch.tensordot(s, t, 1), x, w,
                   names=[("n", "xyz"), ("xyz", "out")])
    _matches_torch(lambda s, t: LA.outer(s, t), torch.outer, y, x[0], names=[("xyz",), ("k",)])
    _matches_torch(lambda s, t: s @ t, torch.matmul, x, w, names=[("n", "xyz"), ("xyz", "out")])


def test_complex_linalg_ops_declare_complex_gradients():
    ops = [matrix._Inv, matrix._Det, matrix._Slogdet, matrix._Solve, matrix._Cholesky, matrix._Eigh,
           matrix._Eigvalsh, matrix._Qr, matrix._Svd, matrix._Svdvals, matrix._Pinv, contractions._Matmul,
           contractions._einsum_op(2)]
    assert all(op.complex_grad for op in ops)


def test_an_op_without_a_complex_gradient_refuses_to_record(rng):
    class _Twice(Op):  # a backward written for real numbers only: no complex_grad
        name = "twice"

        @staticmethod
        def forward(B, x):
            return x * 2

        @staticmethod
        def backward(node, g):
            return (g * 2,)

    x = _leaf(_c(rng, (2, 2)), ("row", "col"))
    with pytest.raises(NotImplementedError, match="^twice: its gradient is not implemented for complex tensors yet"):
        apply(_Twice, (LA.inv(x),), x.names)
    with nt.no_grad():
        assert_close(apply(_Twice, (LA.inv(x),), x.names), 2 * np.linalg.inv(x.detach().numpy()))


def test_gradient_limits_hold_for_complex(rng):
    a = _leaf(_c(rng, (4, 2)), ("row", "col"))
    q, r = LA.qr(a, mode="complete")
    with pytest.raises(NotImplementedError, match="linalg.qr: the gradient of mode='complete'"):
        (q.abs().sum() + r.abs().sum()).backward()


# ----------------------------------------------------------------------------- tolerances, dry runs, float32


def test_tolerance_tensors_per_matrix(rng):
    a = _c(rng, (3, 4, 4))
    a[1, :, 0] = 0
    tol = np.array([0.0, 1.0, 100.0])
    t = _t(a)
    want = torch.linalg.matrix_rank(torch.tensor(a), atol=torch.tensor(tol))
    assert (LA.matrix_rank(t, atol=_t(tol, ("b",))).numpy() == want.numpy()).all()
    _close(LA.pinv(t, atol=_t(tol, ("b",))), torch.linalg.pinv(torch.tensor(a), atol=torch.tensor(tol)), 1e-9)
    _close(LA.pinv(t, rtol=_t(tol / 100, None)), torch.linalg.pinv(torch.tensor(a), rtol=torch.tensor(tol / 100)),
           1e-9)
    xp = t.__array_namespace__()
    assert (xp.linalg.matrix_rank(t, rtol=_t(tol / 10, None)).numpy()
            == torch.linalg.matrix_rank(torch.tensor(a), rtol=torch.tensor(tol / 10)).numpy()).all()
    with pytest.raises(nt.NamesError, match=r"linalg.pinv: dims \('b',\) and \('k',\) do not match"):
        LA.pinv(t, rtol=_t(tol, ("k",)))  # one tolerance per matrix: its names are the batch dims'
    with pytest.raises(TypeError, match="linalg.pinv: a tensor rtol must be real floating point"):
        LA.pinv(t, rtol=_t(tol.astype(np.complex128), None))
    with pytest.raises(TypeError, match="linalg.matrix_rank: atol must be a number, a tensor or None"):
        LA.matrix_rank(t, atol="1")


def test_dry_run_gives_real_dtypes():
    def fn(a):
        u, s, vh = LA.svd(a)
        w, v = LA.eigh(a)
        return (s, LA.svdvals(a), w, LA.eigvalsh(a), LA.slogdet(a).logabsdet, LA.matrix_norm(a), LA.matrix_norm(a, 2),
                LA.vector_norm(a), LA.slogdet(a).sign, LA.det(a), LA.pinv(a), u, v)

    outs = nt.trace_shapes(fn, nt.spec({"b": 2, "row": 3, "col": 3}, dtype=nt.complex64)).result
    assert [o.dtype for o in outs] == [nt.float32] * 8 + [nt.complex64] * 5
    assert outs[0].names == ("b", None)


def test_complex64_stays_complex64(rng):
    a = _t(_c(rng, (3, 3), nt.complex64) + 3 * np.eye(3, dtype=np.complex64), None)
    for out in (LA.inv(a), LA.det(a), LA.pinv(a), LA.qr(a).Q, LA.eigh(a @ a.mH).eigenvectors, LA.solve(a, a),
                LA.svd(a).U, LA.cholesky(a @ a.mH)):
        assert out.dtype == nt.complex64
    for out in (LA.svdvals(a), LA.eigvalsh(a @ a.mH), LA.matrix_norm(a, 2), LA.vector_norm(a)):
        assert out.dtype == nt.float32


# ----------------------------------------------------------------------------- mixed integer dtypes


INTS = [("uint8", "int8"), ("int8", "uint8"), ("uint16", "int16"), ("uint8", "int64"), ("uint32", "int8"),
        ("uint8", "uint16")]


@pytest.mark.parametrize("da, db", INTS)
def test_mixed_integer_contractions_promote_as_numpy(rng, da, db):
    a = rng.integers(-5, 6, (2, 3)).astype(da) if da[0] != "u" else rng.integers(0, 6, (2, 3)).astype(da)
    b = rng.integers(-5, 6, (3, 4)).astype(db) if db[0] != "u" else rng.integers(0, 6, (3, 4)).astype(db)
    ta, tb = nt.tensor(a, names=("i", "j")), nt.tensor(b, names=("j", "k"))
    for got, want in [(ta @ tb, np.matmul(a, b)), (nt.matmul(ta, tb), a @ b),
                      (nt.tensordot(ta, tb, 1), np.tensordot(a, b, 1)),
                      (LA.tensordot(ta, tb, dims=(("j",), ("j",))), np.tensordot(a, b, 1)),
                      (nt.outer(ta[0], tb[:, 0].rename(j="k")), np.outer(a[0], b[:, 0])),
                      (nt.dot(ta, tb, over="j"), a @ b), (nt.einsum("i j, j k -> i k", ta, tb), a @ b)]:
        assert got.dtype.name == want.dtype.name
        np.testing.assert_array_equal(got.numpy(), want)
    assert (ta @ tb).names == ("i", "k")
    xp = ta.__array_namespace__()
    np.testing.assert_array_equal(xp.linalg.outer(ta[0], tb[:, 0].rename(j="k")).numpy(), np.outer(a[0], b[:, 0]))
    v = xp.vecdot(ta, tb[:, 0].rename(None))
    assert v.dtype.name == np.result_type(a, b).name and v.names == ("i",)
    np.testing.assert_array_equal(v.numpy(), (a * b[:, 0]).sum(-1).astype(np.result_type(a, b)))


def test_mixed_kinds_are_refused():
    with pytest.raises(TypeError, match="matmul: uint64 with a signed integer .* has no integer dtype to promote to"):
        nt.ones(2, 2, dtype=nt.uint64) @ nt.ones(2, 2, dtype=nt.int64)
    with pytest.raises(TypeError, match=r"tensordot: operands must all be floating point or all integer, got "
                                        r"nt.int8, nt.float32 \(complex ones go with complex ones\)"):
        nt.tensordot(nt.ones(2, 2, dtype=nt.int8), nt.ones(2, 2), 1)
    with pytest.raises(TypeError, match="outer: operands must all be floating point or all integer"):
        nt.outer(nt.ones(2, dtype=nt.complex64), nt.ones(2))
    with pytest.raises(TypeError, match="matmul: operands must all be floating point or all integer"):
        nt.ones(2, 2, dtype=nt.bool) @ nt.ones(2, 2, dtype=nt.uint8)


def test_array_api_vecdot_follows_the_standard(rng):
    x = nt.tensor(np.array([1j, 2j, 3j]))
    xp = x.__array_namespace__()
    assert xp.linalg.vecdot(x, nt.tensor(np.array([1, 2j, 3]))).item() == pytest.approx(4 - 10j)
    u = nt.tensor(np.array([[200, 100]], dtype=np.uint8), names=("n", "d"))
    assert xp.vecdot(u, u).dtype == nt.uint8  # the promoted dtype, not sum's widening
    assert xp.vecdot(u, u).item() == (200 * 200 + 100 * 100) % 256
    with pytest.raises(ValueError, match="vecdot: the operands must have the same size along axis -1, got 1 and 3"):
        xp.vecdot(nt.ones(2, 1), nt.ones(2, 3))
    assert xp.linalg.vecdot(nt.ones(2, 3, names=("n", "d")), nt.ones(3, names=("d",)), axis="d").names == ("n",)
