"""The GPU kernel tests of ``test_cuda_kernels.py``, run on the CPU: the kernels' CUDA sources compiled
by g++ behind the CUDA emulation of ``tests/cuda_emulator.py``, launched by the unchanged
:mod:`namedtensor.backends.cuda_kernels` through a stand-in for CuPy.

This executes every kernel's indexing, masking, tiling, barriers and warp shuffles, and the launchers'
grids and tables, on machines without a GPU.  It does not replace the GPU run (no NVRTC, no real
scheduling, registers or shared-memory limits): see the emulator's docstring.  Skipped, saying so,
where g++ is missing.
"""

import shutil

import numpy as np
import pytest

import cuda_emulator
import namedtensor as nt
from namedtensor.backends import cuda_kernels as ck
from namedtensor.compiler import cuda_codegen
from test_cuda_kernels import *  # noqa: F403  (the tests; the `cp` fixture is replaced below)

if shutil.which("g++") is None:
    pytest.skip("g++ is not on the PATH: the CUDA emulation cannot be built", allow_module_level=True)

pytestmark = []  # not `gpu`: these run on the CPU


@pytest.fixture(scope="module")
def cp():
    fake = cuda_emulator.FakeCupy(cuda_emulator.build(cuda_emulator.default_workdir()))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(ck, "_cupy", lambda: fake)
        for cache in ("_modules", "_functions", "_tables"):
            mp.setattr(ck, cache, {})
        yield fake


# ----------------------------------------------------------------------------- nt.compile's generated kernels


class _EmulatedCupyBackend:
    """What the generated kernels ask of the CuPy backend, on the emulator's arrays."""

    name = "cupy"

    def __init__(self, xp):
        self.xp = xp

    def rowdot(self, a, b):
        return np.sum(np.asarray(a) * np.asarray(b), axis=-1, keepdims=True)

    def sum(self, a, axis, keepdims):
        return np.sum(np.asarray(a), axis=axis, keepdims=keepdims)

    def multiply(self, a, b):
        return np.multiply(np.asarray(a), np.asarray(b))


@pytest.mark.parametrize("how", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("keys", [5, 40, 300])  # fewer keys than a warp's threads, more than one each, more than a block's
@pytest.mark.parametrize("along", ["key", "query", "head"])  # the last dim (a row per block), a middle one, the first
def test_a_chain_ending_in_a_softmax_is_one_generated_kernel_each_way(cp, how, dtype, keys, along):
    from test_compile import cuda_fused_nodes

    rng = np.random.default_rng(keys)
    s = rng.standard_normal((2, 3, keys)).astype(dtype)
    s[0, 1, 2] = np.nan  # NaN wins the row's max, as in NumPy
    mask = np.where(rng.random((3, keys)) < 0.3, -np.inf if how == "softmax" else -30.0, 0.0).astype(dtype)
    mask[2] = -np.inf if how == "softmax" else mask[2]  # a row with no key: NaN, as eagerly
    if along != "key":  # a column with no key along the softmax's dim: NaN too
        mask[:, 3] = -np.inf if how == "softmax" else mask[:, 3]
    scale = (rng.random(keys) + 0.5).astype(dtype)
    fn = lambda s, mask, scale: getattr((s * 0.3 + mask) * scale, how)(along)  # inputs of three shapes
    args = [nt.tensor(s, names=("head", "query", "key")), nt.tensor(mask, names=("query", "key")),
            nt.tensor(scale, names=("key",))]
    (node,) = cuda_fused_nodes(fn, *args)
    assert node.op.chain.label() == f"mul+add+mul+{how}"
    B = _EmulatedCupyBackend(cp)
    forward = cuda_codegen.forward_kernel(node.op.chain, node.args, node.outputs)
    (y,) = forward(B, [cp.asarray(a) for a in (s, mask, scale)])
    tensors = [a.requires_grad_() for a in args]
    with np.errstate(invalid="ignore"):
        want = fn(*tensors)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    assert y.dtype == dtype and y.shape == want.shape
    np.testing.assert_allclose(np.asarray(y), want.detach().numpy(), **tol)  # NaN where eager has NaN

    g = rng.standard_normal(want.shape).astype(dtype)
    with np.errstate(invalid="ignore"):
        grads_want = nt.grad(want, tensors, grad_outputs=nt.tensor(g, names=want.names))
    backward = cuda_codegen.backward_kernel(node.op.chain, node.args, node.outputs)
    grads = backward(B, [cp.asarray(a) for a in (s, mask, scale)] + [y], [cp.asarray(g)])
    axis = ("head", "query", "key").index(along)
    for got, expected, a in zip(grads, grads_want, (s, mask, scale)):
        full = np.asarray(got)  # at the chain's shape: the fused op sums it to the input's
        summed = full.sum(axis=tuple(range(full.ndim - expected.ndim))) if full.ndim > expected.ndim else full
        summed = summed.sum(axis=tuple(d for d in range(summed.ndim) if expected.shape[d] == 1 < summed.shape[d]),
                            keepdims=True)
        near = dict(tol)
        if a.ndim < 3 - axis:  # broadcast along the softmax's dim: a sum that is 0 exactly, within its terms' rounding
            near["atol"] += 16 * np.finfo(dtype).eps * (full.size // expected.numpy().size) * np.nanmax(np.abs(full))
        np.testing.assert_allclose(summed, expected.numpy(), **near)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_operands_with_one_gradient_formula_share_one_output_of_the_generated_backward(cp, dtype):
    from test_compile import cuda_fused_nodes

    rng = np.random.default_rng(0)
    h, o = rng.standard_normal((2, 3, 4)).astype(dtype), rng.standard_normal((3, 4)).astype(dtype)
    fn = lambda h, o: (h + o).exp() * 2.0  # o broadcast along h's first dim
    args = [nt.tensor(h, names=("b", "s", "d")), nt.tensor(o, names=("s", "d"))]
    (node,) = cuda_fused_nodes(fn, *args)
    tensors = [a.requires_grad_() for a in args]
    want = fn(*tensors)
    g = rng.standard_normal(want.shape).astype(dtype)
    grads_want = nt.grad(want, tensors, grad_outputs=nt.tensor(g, names=want.names))
    backward = cuda_codegen.backward_kernel(node.op.chain, node.args, node.outputs)
    gh, go = backward(_EmulatedCupyBackend(cp), [cp.asarray(h), cp.asarray(o)], [cp.asarray(g)])
    assert gh is go  # written once, at the chain's shape: the fused op sums o's share to its shape
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-12}
    np.testing.assert_allclose(np.asarray(gh), grads_want[0].numpy(), **tol)
    np.testing.assert_allclose(np.asarray(go).sum(axis=0), grads_want[1].numpy(), **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_rounding_sign_and_finiteness_run_as_numpy_computes_them(cp, dtype):
    from test_compile import cuda_fused_nodes

    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 3.7, -3.7, 1e20], dtype)
    fn = lambda x: (x.floor() + x.ceil() * 2.0 + x.round() * 4.0 + nt.trunc(x) * 8.0 + nt.frac(x) + x.sign() * 16.0
                    + nt.where(nt.isnan(x), 1.0, x) + nt.where(nt.isinf(x), 2.0, x) + nt.where(nt.isfinite(x), x, 3.0))
    x = nt.tensor(a, names=("i",))
    (node,) = cuda_fused_nodes(fn, x)
    forward = cuda_codegen.forward_kernel(node.op.chain, node.args, node.outputs)
    (y,) = forward(_EmulatedCupyBackend(cp), [cp.asarray(a)])
    with np.errstate(invalid="ignore"):
        want = fn(x).numpy()
    np.testing.assert_array_equal(np.asarray(y), want)  # NaN where eager has NaN
    x.requires_grad_()
    g = np.linspace(1, 2, len(a)).astype(dtype)
    with np.errstate(invalid="ignore"):
        (gw,) = nt.grad(fn(x), (x,), nt.tensor(g, names=("i",)))
    backward = cuda_codegen.backward_kernel(node.op.chain, node.args, node.outputs)
    (gx,) = backward(_EmulatedCupyBackend(cp), [cp.asarray(a)], [cp.asarray(g)])
    np.testing.assert_array_equal(np.asarray(gx), gw.numpy())  # frac's gradient, g; the others' 0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nan_to_num_logaddexp_log2_and_exp2_run_as_numpy_computes_them(cp, dtype):
    from test_compile import cuda_fused_nodes

    a = np.array([np.nan, np.inf, -np.inf, 0.0, 1.5, -3.0, 1e30, 20.0, -20.0], dtype)
    b = np.array([1.0, np.inf, -np.inf, 0.0, 1.5, np.nan, 1.0, 3.0, -19.5], dtype)
    fn = lambda x, y: nt.nan_to_num(x, 1.5, 7.0) * 2.0 + nt.logaddexp(x, y) + x.log2() + nt.exp2(y)
    args = [nt.tensor(a, names=("i",)), nt.tensor(b, names=("i",))]
    (node,) = cuda_fused_nodes(fn, *args)
    forward = cuda_codegen.forward_kernel(node.op.chain, node.args, node.outputs)
    (out,) = forward(_EmulatedCupyBackend(cp), [cp.asarray(a), cp.asarray(b)])
    with np.errstate(all="ignore"):
        want = fn(*args).numpy()
    np.testing.assert_allclose(np.asarray(out), want, rtol=3e-7 if dtype == "float32" else 5e-16, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_logical_ops_masks_and_copysign_run_as_numpy_computes_them(cp, dtype):
    from test_compile import cuda_fused_nodes

    a = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -3.0, 0.0, 2.0], dtype)
    b = np.array([1.0, 0.0, -np.inf, -0.0, 0.0, np.nan, -1.0, 2.0, -0.0], dtype)

    def fn(x, y):
        mask = (nt.logical_and(x, y) & (x < y) | ~nt.logical_or(x * 2.0, y)) ^ nt.logical_xor(x > 0, nt.logical_not(y))
        return nt.where(mask, nt.copysign(x * 1.0, y), nt.copysign(y, x) + 1.0)

    args = [nt.tensor(a, names=("i",)), nt.tensor(b, names=("i",))]
    (node,) = cuda_fused_nodes(fn, *args)
    forward = cuda_codegen.forward_kernel(node.op.chain, node.args, node.outputs)
    (out,) = forward(_EmulatedCupyBackend(cp), [cp.asarray(a), cp.asarray(b)])
    want = fn(*args).numpy()
    np.testing.assert_array_equal(np.asarray(out), want)  # NaNs where NumPy's are
    np.testing.assert_array_equal(np.signbit(np.asarray(out)), np.signbit(want))
