"""Complex numbers: the API's values against NumPy and PyTorch, names kept, gradients in PyTorch's convention
(against torch.autograd and the complex-aware gradcheck), and the errors."""

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.testing import assert_close, gradcheck, gradgradcheck
from namedtensor.testing import strategies as nts

pytestmark = pytest.mark.usefixtures("backend")

rng = np.random.default_rng(0)
Z = (rng.standard_normal((2, 3)) + 1j * rng.standard_normal((2, 3))).astype(np.complex128)
W = (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4))).astype(np.complex128)
X = rng.standard_normal(3)


def z(requires_grad=False, dtype=nt.complex128):
    return nt.tensor(Z, names=("batch", "feat"), dtype=dtype, requires_grad=requires_grad)


def test_parts_and_conjugate_match_numpy():
    t = z()
    for got, want in ((t.real, Z.real), (t.imag, Z.imag), (t.conj(), np.conj(Z)), (t.angle(), np.angle(Z)),
                      (t.abs(), np.abs(Z)), (nt.real(t), Z.real), (nt.imag(t), Z.imag), (nt.conj(t), np.conj(Z)),
                      (nt.angle(t), np.angle(Z)), (nt.resolve_conj(t), Z)):
        assert got.names == ("batch", "feat")
        assert_close(got.numpy(), want, rtol=1e-12)
    assert t.real.dtype is nt.float64 and z(dtype=nt.complex64).imag.dtype is nt.float32
    assert z(dtype=nt.complex64).abs().dtype is nt.float32
    r = nt.tensor(X, names=("feat",))
    assert r.real is r and r.conj() is r and nt.resolve_conj(r) is r  # PyTorch's: no-ops on real tensors
    assert_close(nt.tensor([-2.0, 0.0, 3.0, float("nan")]).angle().numpy(), np.array([np.pi, 0, 0, np.nan]))
    assert nt.tensor([-2, 3]).angle().dtype is nt.float64


def test_parts_are_read_only_copies():
    t = z()
    # PyTorch's t.real is a view: a write into it changes t.  Here the parts are copies, so a write raises
    # instead of silently missing t
    for part in (t.real, t.imag, nt.view_as_real(t)):
        with pytest.raises(ValueError, match="cannot write into this tensor .* real, imag and view_as_real are "
                                             "copies"):
            part[0, 0] = 100.0
        with pytest.raises(ValueError, match="mul_: cannot write into this tensor"):
            part.mul_(2)
    assert t[0, 0].item() == Z[0, 0]
    re = t.real.clone()
    re[0, 0] = 100.0  # a clone is writable
    assert re[0, 0].item() == 100.0 and t[0, 0].item() == Z[0, 0]


def test_complex_polar_and_views_match_torch():
    re, im = nt.tensor(X, names=("feat",)), nt.tensor(X[::-1].copy(), names=("feat",))
    out = nt.complex(re, im)
    assert out.dtype is nt.complex128 and out.names == ("feat",)
    assert_close(out.numpy(), torch.complex(torch.tensor(X), torch.tensor(X[::-1].copy())).numpy())
    r = nt.tensor(np.abs(X), names=("feat",))
    assert_close(nt.polar(r, re).numpy(), torch.polar(torch.tensor(np.abs(X)), torch.tensor(X)).numpy())
    assert nt.complex(re.float(), 0.5).dtype is nt.complex64  # a number broadcasts
    v = nt.view_as_real(z(), name="part")
    assert v.names == ("batch", "feat", "part") and v.shape == (2, 3, 2)
    assert_close(v.numpy(), torch.view_as_real(torch.tensor(Z)).numpy())
    assert nt.view_as_real(z()).names == ("batch", "feat", None)
    back = nt.view_as_complex(v)
    assert back.names == ("batch", "feat") and back.dtype is nt.complex128
    assert_close(back.numpy(), Z)
    assert nt.view_as_complex(nt.view_as_real(z(dtype=nt.complex64))).dtype is nt.complex64


def test_names_unify_in_complex_and_polar():
    a = nt.tensor(np.ones((2, 3)), names=("batch", None))
    b = nt.tensor(np.ones(3), names=("feat",))
    assert nt.complex(a, b).names == ("batch", "feat")
    assert nt.polar(a, b).names == ("batch", "feat")
    with pytest.raises(nt.NamesError, match="^complex: dims"):
        nt.complex(a, nt.tensor(np.ones(3), names=("batch",)))


@given(data=st.data(), shape_names=nts.named_shapes(min_dims=0, max_dims=3),
       name=st.sampled_from([None, "part", "seq"]))
def test_view_as_real_rule(data, shape_names, name):
    shape, names = shape_names
    a = data.draw(nts.arrays(shape, "complex128"))
    t = nt.tensor(a, names=names)
    if name is not None and name in names:
        with pytest.raises(nt.NamesError, match=f"view_as_real: the new dim name '{name}' is already a dim"):
            nt.view_as_real(t, name=name)
        return
    out = nt.view_as_real(t, name=name)
    assert out.names == names + (name,) and out.shape == shape + (2,)
    np.testing.assert_array_equal(out.numpy(), np.stack([a.real, a.imag], axis=-1))
    back = nt.view_as_complex(out)
    assert back.names == names
    np.testing.assert_array_equal(back.numpy(), a)
    assert _names.view_as_complex(out.names, tuple(out.shape)) == names


def test_conjugate_transposes():
    t = z()
    assert t.H.names == ("feat", "batch")
    assert_close(t.H.numpy(), Z.conj().T)
    b = nt.tensor(np.stack([Z, Z]), names=("n", "batch", "feat"))
    assert b.mH.names == ("n", "feat", "batch")
    assert_close(b.mH.numpy(), np.conj(np.swapaxes(np.stack([Z, Z]), -1, -2)))
    with pytest.raises(ValueError, match=r"^H: the conjugate transpose of a matrix needs 2 dims, got 3.*\.mH"):
        b.H
    with pytest.raises(ValueError, match="^mH: needs at least 2 dims, got 1"):
        nt.tensor(X).mH


def test_is_complex():
    assert z().is_complex() and nt.is_complex(z()) and not nt.tensor(X).is_complex()
    assert nt.complex64.is_complex and not nt.float64.is_complex


def test_arithmetic_matches_numpy():
    t, w = z(), nt.tensor(W, names=("feat", "out"))
    for got, want in ((t * 2j, Z * 2j), (t / (t + 1), Z / (Z + 1)), (t.exp(), np.exp(Z)), (t.log(), np.log(Z)),
                      (t @ w, Z @ W), (t.sum("feat"), Z.sum(1)), (t.mean(), Z.mean()), (-t, -Z),
                      (t - t.conj(), Z - Z.conj()), (t.sqrt(), np.sqrt(Z)), (t.square(), Z * Z)):
        assert_close(got.numpy(), want, rtol=1e-10)
    assert (t @ w).names == ("batch", "out")


# functions of complex (and real) tensors, named and unnamed alike in both libraries
GRAD_CASES = {
    "mul": (lambda a, b: a * b, ("z", "z2")),
    "div": (lambda a, b: a / (b + 3), ("z", "z2")),
    "add_sub_neg": (lambda a, b: -(a + b) - a * 2j, ("z", "z2")),
    "exp_log": (lambda a: (a.exp() + 1).log(), ("z",)),
    "matmul": (lambda a, b: a @ b, ("z", "w")),
    "sum_mean": (lambda a: a.sum(1) * a.mean(0)[0], ("z",)),
    "abs": (lambda a: a.abs(), ("z",)),
    "angle": (lambda a: a.angle(), ("z",)),
    "real_imag_conj": (lambda a: a.real * a.imag + a.conj(), ("z",)),
    "complex": (lambda x, y: torch_or_nt(x).complex(x, y * 2), ("x", "x2")),
    "polar": (lambda x, y: torch_or_nt(x).polar(x.exp(), y), ("x", "x2")),
    "view_as_real": (lambda a: torch_or_nt(a).view_as_real(a * a), ("z",)),
    "view_as_complex": (lambda x: torch_or_nt(x).view_as_complex(x.reshape(3, 2)).exp(), ("x6",)),
    "real_times_complex": (lambda x, a: x * a, ("x", "z")),
    "to_complex": (lambda x: x.to(torch_or_nt(x).complex128) * (1 + 2j), ("x",)),
    "sqrt_sin_cos_tanh": (lambda a: (a.sqrt() + a.sin() * a.cos()).tanh(), ("z",)),
    "square_reciprocal": (lambda a: a.square() + (a + 3).reciprocal(), ("z",)),
}


def torch_or_nt(t):
    return torch if isinstance(t, torch.Tensor) else nt


def _inputs():
    r = np.random.default_rng(1)

    def c(*shape):
        return r.standard_normal(shape) + 1j * r.standard_normal(shape)

    return {"z": c(2, 3), "z2": c(2, 3), "w": c(3, 2), "x": r.standard_normal(3), "x2": r.standard_normal(3),
            "x6": r.standard_normal(6)}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradients_match_torch(case):
    fn, which = GRAD_CASES[case]
    data = _inputs()
    ours = [nt.tensor(data[k], requires_grad=True) for k in which]
    theirs = [torch.tensor(data[k], requires_grad=True) for k in which]
    out, ref = fn(*ours), fn(*theirs)
    cot = np.random.default_rng(2).standard_normal(tuple(ref.shape))
    if ref.is_complex():
        cot = cot + 1j * np.random.default_rng(3).standard_normal(tuple(ref.shape))
        # a real loss of a complex output: Re(sum(conj(cot) * out)), whose output gradient is cot
        loss, ref_loss = (out * nt.tensor(np.conj(cot))).sum().real, (ref * torch.tensor(np.conj(cot))).sum().real
    else:
        loss, ref_loss = (out * nt.tensor(cot)).sum(), (ref * torch.tensor(cot)).sum()
    grads = nt.grad(loss, ours)
    ref_grads = torch.autograd.grad(ref_loss, theirs)
    for g, rg, x in zip(grads, ref_grads, ours):
        assert g.dtype is x.dtype and g.names == x.names
        assert_close(g.numpy(), rg.numpy(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_gradcheck_perturbs_real_and_imaginary_parts(case):
    fn, which = GRAD_CASES[case]
    data = _inputs()
    names = {"z": ("a", "b"), "z2": ("a", "b"), "w": ("b", "c"), "x": ("b",), "x2": ("b",), "x6": (None,)}
    if case in ("matmul", "sum_mean", "view_as_complex"):  # positional dims in the function
        names = {k: (None,) * len(v) for k, v in names.items()}
    inputs = [nt.tensor(data[k], names=names[k], requires_grad=True) for k in which]
    assert gradcheck(fn, *inputs)
    assert gradgradcheck(fn, *inputs)


def test_gradcheck_catches_a_wrong_complex_gradient():
    from namedtensor.autograd.graph import Op, apply

    class _ConjFree(Op):  # mul's backward without the conjugate: right for real, wrong for complex
        name = "bad_mul"
        complex_grad = True

        @staticmethod
        def forward(B, a, factor):
            return a * factor

        @staticmethod
        def backward(node, g):
            return (g * node.params["factor"],)

    x = nt.tensor(np.array([1 + 1j, 2 - 1j]), requires_grad=True)
    with pytest.raises(nt.testing.GradcheckError, match="autograd and central differences disagree"):
        gradcheck(lambda t: apply(_ConjFree, (t,), t.names, factor=2 + 1j), x)
    assert gradcheck(lambda t: t * (2 + 1j), x)  # mul, with the conjugate


def test_real_input_gets_the_real_part_of_a_complex_gradient():
    x = nt.tensor(X, names=("n",), requires_grad=True)
    loss = (x * (2 + 3j)).abs().sum()
    (g,) = nt.grad(loss, [x])
    assert g.dtype is nt.float64 and g.names == ("n",)
    assert_close(g.numpy(), np.sign(X) * abs(2 + 3j))


def test_ops_without_a_complex_gradient_say_so():
    t = z(requires_grad=True)
    with pytest.raises(NotImplementedError, match="^log1p: its gradient is not implemented for complex tensors yet"):
        t.log1p()
    with nt.no_grad():  # the message's advice works
        assert t.log1p().dtype is nt.complex128
    assert t.detach().expm1().dtype is nt.complex128
    with pytest.raises(NotImplementedError, match="^expm1:"):  # a complex input made from a real leaf
        nt.tensor(X, requires_grad=True).to(nt.complex128).expm1()
    with pytest.raises(NotImplementedError, match="^pow:"):  # a real input, a complex output
        nt.tensor(np.abs(X), requires_grad=True) ** 1j


def test_backward_of_a_complex_scalar_needs_a_gradient():
    s = z(requires_grad=True).sum()
    with pytest.raises(RuntimeError, match="^backward: a gradient can only be created implicitly for a real scalar"):
        s.backward()
    s.real.backward()  # the message's advice works


def test_errors():
    r = nt.tensor(X, names=("n",))
    with pytest.raises(TypeError, match=r"^imag: not defined for a real tensor \(nt.float64\)"):
        r.imag
    with pytest.raises(TypeError, match="^view_as_real: needs a complex tensor, got nt.float64"):
        nt.view_as_real(r)
    with pytest.raises(ValueError, match=r"^view_as_complex: the last dim must hold the real and imaginary parts "
                                         r"\(size 2\); got names \('n',\) and shape \(3,\)"):
        nt.view_as_complex(r)
    with pytest.raises(TypeError, match="^view_as_complex: needs a float32 or float64 tensor, got nt.int64"):
        nt.view_as_complex(nt.zeros(2, dtype=nt.int64))
    with pytest.raises(TypeError, match="^complex: real and imag must be float32 or float64 tensors of one dtype"):
        nt.complex(r, r.float())
    with pytest.raises(TypeError, match="^polar: abs and angle must be float32 or float64"):
        nt.polar(r.long(), r.long())
    with pytest.raises(TypeError, match="^complex: at least one operand must be a Tensor"):
        nt.complex(1.0, 2.0)
    with pytest.raises(TypeError, match="^sort: complex numbers have no order"):
        z().sort("feat")
    with pytest.raises(TypeError, match="^random_: draws integers, which a complex tensor"):
        z().random_()
    with pytest.raises(TypeError, match="^setitem: cannot write a complex value into a tensor of dtype nt.float64"):
        r[0] = 1j
    with pytest.raises(ValueError, match=r"^plot\(\): complex values"):
        z().plot()


def test_casting_complex_to_real_warns_and_keeps_the_real_part():
    with pytest.warns(UserWarning, match="to: casting complex values to nt.float64 discards the imaginary part"):
        out = z().to(nt.float64)
    assert_close(out.numpy(), Z.real)
    assert nt.tensor([0j, 1j, 1 + 0j]).bool().tolist() == [False, True, True]  # nonzero, as PyTorch
    x = nt.tensor(X, requires_grad=True)
    assert gradcheck(lambda t: t.to(nt.complex128) * (1 - 2j), x)


def test_dry_run_through_the_meta_backend():
    def fn(t, w):
        return nt.view_as_real((t @ w).exp(), name="part").sum("out"), t.angle(), t.H

    s = nt.spec(("batch", "feat"), (2, 3), nt.complex64)
    w = nt.spec(("feat", "out"), (3, 4), nt.complex64)
    trace = nt.trace_shapes(fn, s, w)
    (a, b, c) = fn(s, w)
    assert (a.names, a.shape, a.dtype) == (("batch", "part"), (2, 2), nt.float32)
    assert (b.dtype, c.names, c.dtype) == (nt.float32, ("feat", "batch"), nt.complex64)
    assert "view_as_real" in str(trace)


def test_array_api_namespace_has_the_complex_functions():
    xp = z().__array_namespace__()
    assert_close(xp.real(z()).numpy(), Z.real)
    assert_close(xp.imag(z()).numpy(), Z.imag)
    assert_close(xp.conj(z()).numpy(), Z.conj())
    r = nt.tensor(X)
    assert xp.real(r) is not r and xp.real(r).dtype is nt.float64  # a copy of a real array
    assert xp.complex128 is nt.complex128 and xp.isdtype(xp.complex64, "complex floating")


def test_numpy_functions_keep_names():
    t = z()
    for got, want in ((np.conj(t), Z.conj()), (np.real(t), Z.real), (np.imag(t), Z.imag), (np.angle(t), np.angle(Z)),
                      (np.angle(t, deg=True), np.angle(Z, deg=True)), (np.abs(t), np.abs(Z)), (np.exp(t), np.exp(Z))):
        assert isinstance(got, nt.Tensor) and got.names == ("batch", "feat")
        assert_close(got.numpy(), want, rtol=1e-12)
    assert np.iscomplexobj(t) and not np.isrealobj(t) and np.isrealobj(nt.tensor(X))


def test_order_comparisons_refuse_complex_numbers():
    t = z()
    for fn, name in ((lambda: t < 1, "lt"), (lambda: t.le(t), "le"), (lambda: nt.ones(3) > 1j, "gt"),
                     (lambda: t >= 0, "ge"), (lambda: t.clip(0, 1), "clip"), (lambda: t.clamp(max=1), "clip")):
        with pytest.raises(TypeError, match=f"^{name}: complex numbers have no order"):
            fn()
    assert (t == t).all().item() and not (t != t).any().item()  # equality is defined
    assert (t.abs() < 10).all().item()  # the message's advice works
