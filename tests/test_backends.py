"""Backends and devices: only namedtensor/backends imports NumPy, the erf fallback, switching the CPU
backend, device strings, and the extras every backend adds to its namespace."""

import ast
import math
import pathlib
import re
import types
import warnings

import numpy as np
import pytest
from scipy.special import erf as sp_erf

import namedtensor as nt
from namedtensor import _dtypes, backends
from namedtensor.backends.base import Backend
from namedtensor.backends.numpy_backend import erf_series

PACKAGE = pathlib.Path(nt.__file__).parent
#: modules outside namedtensor/backends allowed to import NumPy: test helpers that build NumPy arrays
NUMPY_ALLOWED = {"namedtensor/testing/strategies.py"}


def _imports_numpy(path: pathlib.Path) -> bool:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            if any(a.name == "numpy" or a.name.startswith("numpy.") for a in node.names):
                return True
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "numpy" or node.module.startswith("numpy."):
                return True
    return False


def test_only_backends_import_numpy():
    offenders = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).as_posix()
        if rel.startswith("namedtensor/backends/"):
            continue
        if _imports_numpy(path):
            offenders.add(rel)
    assert offenders == NUMPY_ALLOWED, (
        f"modules outside namedtensor/backends that import numpy: {sorted(offenders - NUMPY_ALLOWED)} "
        "(call the backend B instead)"
    )


def test_numpy_import_detector(tmp_path):
    for src, found in (("import numpy as np", True), ("from numpy import ones", True), ("import numpy.linalg", True),
                       ("from numpy.random import default_rng", True), ("import numpyish", False),
                       ("from . import numpy_backend", False), ("def f():\n    import numpy\n", True),
                       ("x = 'import numpy'", False)):
        p = tmp_path / "m.py"
        p.write_text(src)
        assert _imports_numpy(p) is found, src


# ----------------------------------------------------------------------------- erf without SciPy


def test_erf_series_matches_math_erf():
    xs = np.concatenate([
        np.linspace(-40, 40, 8001), np.linspace(-3.5, 3.5, 7001),
        [2.5, np.nextafter(2.5, 0), np.nextafter(2.5, 3), -2.5, 0.0, -0.0, 1e-300, -1e-300, 5e-9, 6.0, 26.5,
         27.5, 1e10, -1e10, 1e200, -1e200],
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings for huge |x|
        got = erf_series(xs)
    ref = np.array([math.erf(x) for x in xs])
    err = np.abs(got - ref)
    assert err.max() <= 1e-14, f"max error {err.max()} at x={xs[err.argmax()]}"
    small = np.abs(xs) < 1  # near 0, relative accuracy too (erf(x) ~ 2x/sqrt(pi))
    rel = err[small] / np.maximum(np.abs(ref[small]), 1e-300)
    assert rel.max() <= 1e-14


def test_erf_series_special_values_and_dtypes():
    out = erf_series(np.array([np.inf, -np.inf, np.nan, 0.0]))
    assert out[0] == 1.0 and out[1] == -1.0 and np.isnan(out[2]) and out[3] == 0.0
    f32 = erf_series(np.array([0.5, -1.5], dtype=np.float32))
    assert f32.dtype == np.float32
    np.testing.assert_allclose(f32, sp_erf(np.array([0.5, -1.5])), rtol=1e-6)
    assert erf_series(np.array([1, 2])).dtype == np.float64
    assert abs(float(erf_series(np.float64(0.3))) - math.erf(0.3)) <= 1e-15  # a NumPy scalar works too


@pytest.mark.parametrize("name", ["numpy", "array_api_strict"])
def test_backend_erf(name):
    B = backends._make(name)
    x = np.linspace(-5, 5, 101)
    np.testing.assert_allclose(B.to_numpy(B.erf(B.asarray(x))), sp_erf(x), rtol=1e-14, atol=1e-15)


# ----------------------------------------------------------------------------- choosing backends


def test_use_cpu_backend_switches_new_tensors():
    try:
        strict = backends.use_cpu_backend("array_api_strict")
        assert backends.cpu() is strict and backends.get() is strict and backends.get("cpu") is strict
        t = nt.zeros(2, names=("x",))
        assert t._B is strict and strict.is_array(t.array)
        assert type(t.array).__module__.startswith("array_api_strict")
        assert t.device == "cpu"
        numpy_b = backends.use_cpu_backend("numpy")
        u = nt.zeros(2, names=("x",))
        assert u._B is numpy_b and isinstance(u.array, np.ndarray)
        assert t._B is strict  # existing tensors keep theirs
        assert backends.use_cpu_backend("array_api_strict") is strict  # one instance per backend
    finally:
        backends.use_cpu_backend("numpy")


def test_use_cpu_backend_unknown():
    with pytest.raises(ValueError, match=re.escape("unknown CPU backend 'torch'; choose 'numpy' or "
                                                   "'array_api_strict'")):
        backends.use_cpu_backend("torch")
    assert backends.cpu().name == "numpy"


def test_of_array():
    numpy_b = backends._make("numpy")
    strict = backends._make("array_api_strict")
    assert backends.of_array(np.zeros(2)) is numpy_b
    assert backends.of_array(strict.asarray([1.0])) is strict
    with pytest.raises(TypeError, match="not an array of a known backend: list"):
        backends.of_array([1.0])


def test_parse_device():
    assert backends.parse_device(None) == "cpu"
    assert backends.parse_device(" CPU ") == "cpu"
    assert backends.parse_device("cuda") == "cuda"
    assert backends.parse_device("CUDA:3") == "cuda:3"
    assert backends.parse_device("meta") == "meta"
    for bad in ("gpu", "cuda:", "cuda:-1", "cuda:1.5", "mps"):
        with pytest.raises(ValueError, match=re.escape(f"unknown device {bad!r}; use 'cpu', 'cuda', 'cuda:N' or 'meta'")):
            backends.parse_device(bad)


@pytest.mark.usefixtures("no_cupy")
def test_get_cuda_error_text():
    for device in ("cuda", "cuda:1"):
        with pytest.raises(RuntimeError) as info:
            backends.get(device)
        msg = str(info.value)
        assert f"device {device!r} needs CuPy and an NVIDIA GPU, and CuPy is not installed" in msg
        assert "pip install cupy-cuda12x" in msg


# ----------------------------------------------------------------------------- what every backend provides


@pytest.fixture(params=["numpy", "array_api_strict"])
def B(request):
    return backends._make(request.param)


def _np(B, x):
    return B.to_numpy(x)


def test_repr(B):
    assert repr(B) == f"<{B.name} backend on cpu>"


def test_dtypes_round_trip(B):
    for d in _dtypes.ALL:
        if B.name == "array_api_strict" and d is _dtypes.float16:
            with pytest.raises(TypeError, match="dtype nt.float16 is not available on the array_api_strict backend"):
                B.native(d)
            continue
        arr = B.zeros((2,), dtype=B.native(d))
        assert B.dtype_of(arr) is d
    bad = types.SimpleNamespace(dtype="float128")  # every dtype of the standard is supported: fake another one
    with pytest.raises(TypeError, match="unsupported array dtype float128; namedtensor supports float16"):
        B.dtype_of(bad)


def test_conversion(B):
    x = B.asarray([[1.0, 2.0]])
    assert B.is_array(x) and not B.is_array([1.0])
    assert isinstance(_np(B, x), np.ndarray)
    assert B.item(B.reshape(x[:, :1], (1,))) == 1.0
    assert B.tolist(x) == [[1.0, 2.0]]
    assert B.dtype_of(B.asarray([1, 2], dtype=_dtypes.float64)) is _dtypes.float64
    c = B.asarray(x, copy=True)
    assert _np(B, c).tolist() == [[1.0, 2.0]]
    assert not np.shares_memory(_np(B, c), _np(B, x))


def test_einsum(B):
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    np.testing.assert_allclose(_np(B, B.einsum("ij,jk->ik", B.asarray(a), B.asarray(b))), a @ b, rtol=1e-12)
    big = rng.normal(size=(80, 80))  # the optimised path
    np.testing.assert_allclose(_np(B, B.einsum("ij,jk->ik", B.asarray(big), B.asarray(big))), big @ big,
                               rtol=1e-10)


def test_scatter_add_accumulates_repeats(B):
    idx = B.asarray(np.array([0, 2, 0, 0]))
    vals = B.asarray(np.array([1.0, 2.0, 3.0, 4.0]))
    out = B.scatter_add((3,), None, (idx,), vals)
    np.testing.assert_array_equal(_np(B, out), [8.0, 0.0, 2.0])
    assert B.dtype_of(B.scatter_add((3,), _dtypes.float32, (idx,), vals)) is _dtypes.float32


def test_getitem_setitem(B):
    x = B.asarray(np.arange(6.0).reshape(2, 3))
    np.testing.assert_array_equal(_np(B, B.getitem(x, (1, slice(0, 2)))), [3.0, 4.0])
    np.testing.assert_array_equal(_np(B, B.getitem(x, (slice(None), B.asarray(np.array([2, 0]))))),
                                  [[2.0, 0.0], [5.0, 3.0]])
    B.setitem(x, (0, 1), 10.0)
    B.setitem(x, (slice(None), B.asarray(np.array([2]))), B.asarray(np.array([[7.0], [8.0]])))
    np.testing.assert_array_equal(_np(B, x), [[0.0, 10.0, 7.0], [3.0, 4.0, 8.0]])


def test_pad_tril_triu(B):
    x = B.asarray(np.arange(1.0, 5.0).reshape(2, 2))
    np.testing.assert_array_equal(_np(B, B.pad(x, ((1, 0), (0, 2)), -1.0)),
                                  np.pad(np.arange(1.0, 5.0).reshape(2, 2), ((1, 0), (0, 2)), constant_values=-1.0))
    m = np.arange(9.0).reshape(3, 3)
    np.testing.assert_array_equal(_np(B, B.tril(B.asarray(m), 0)), np.tril(m))
    np.testing.assert_array_equal(_np(B, B.triu(B.asarray(m), 1)), np.triu(m, 1))


def test_logaddexp_and_its_fallback(B):
    a = np.array([-np.inf, 0.0, 1000.0, np.inf, 3.0])
    b = np.array([-np.inf, 0.0, 1000.0, -np.inf, -2.0])
    expected = np.logaddexp(a, b)
    np.testing.assert_allclose(_np(B, B.logaddexp(B.asarray(a), B.asarray(b))), expected, rtol=1e-14)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # log(0) for -inf inputs
        fallback = Backend.logaddexp(B, B.asarray(a), B.asarray(b))  # for namespaces without logaddexp
    np.testing.assert_allclose(_np(B, fallback), expected, rtol=1e-14)


def test_random(B):
    B.seed(7)
    r1 = _np(B, B.rand((50,), _dtypes.float64))
    n1 = _np(B, B.randn((50,), _dtypes.float32))
    i1 = _np(B, B.randint(-3, 3, (50,), _dtypes.int32))
    B.seed(7)
    np.testing.assert_array_equal(_np(B, B.rand((50,), _dtypes.float64)), r1)
    np.testing.assert_array_equal(_np(B, B.randn((50,), _dtypes.float32)), n1)
    np.testing.assert_array_equal(_np(B, B.randint(-3, 3, (50,), _dtypes.int32)), i1)
    assert r1.dtype == np.float64 and n1.dtype == np.float32 and i1.dtype == np.int32
    assert 0 <= r1.min() and r1.max() < 1 and -3 <= i1.min() and i1.max() < 3
    if B.name == "numpy":
        assert B.rand((3,), _dtypes.float16).dtype == np.float16
        assert B.randn((3,), _dtypes.float16).dtype == np.float16


def test_strict_true_division_of_integers():
    B = backends._make("array_api_strict")
    i = B.asarray(np.array([1, 2, 3]))
    for out in (B.divide(i, 2), B.divide(i, i), B.divide(3, i)):
        assert B.dtype_of(out) is _dtypes.float64
    np.testing.assert_allclose(_np(B, B.divide(i, 2)), [0.5, 1.0, 1.5])


def test_views_and_owned_memory(B):
    x = B.asarray(np.arange(6.0).reshape(2, 3), copy=True)
    row = B.getitem(x, (0, slice(None)))
    if B.name == "numpy":  # what temporary elision relies on
        assert B.supports_out
        assert B.is_view_of(row, x) and not B.is_view_of(B.asarray(x, copy=True), x)
        assert B.owns_writable(x) and not B.owns_writable(row)
    else:  # a backend that cannot tell claims neither, so nothing is written in place
        assert not B.supports_out
        assert not B.is_view_of(row, x) and not B.owns_writable(x)


def test_float_functions_of_integers_follow_numpy(B):
    i = B.asarray(np.array([0, 1, 2]))
    for name in ("exp", "log1p", "expm1", "sqrt", "sin", "cos", "tan", "tanh"):
        out = getattr(B, name)(i)
        assert B.dtype_of(out) is _dtypes.float64, name
        np.testing.assert_allclose(_np(B, out), getattr(np, name)(np.array([0.0, 1.0, 2.0])), rtol=1e-14)
    np.testing.assert_array_equal(_np(B, B.logical_not(B.asarray(np.array([0.0, 2.5])))), [True, False])


def test_reductions_default_to_every_axis():
    # as the Array API says; NumPy's bare ufunc.reduce would reduce axis 0 only
    from namedtensor.backends import cpu

    B = cpu()
    x = B.asarray([[1.0, 5.0], [3.0, 2.0]])
    assert B.item(B.sum(x)) == 11.0 and B.item(B.prod(x)) == 30.0
    assert B.item(B.max(x)) == 5.0 and B.item(B.min(x)) == 1.0


def test_erf_and_gelu_keep_float16():
    x = nt.tensor(np.linspace(-3, 3, 13, dtype=np.float16), names=("x",)).requires_grad_()
    assert x.erf().dtype is nt.float16
    y = nt.nn.functional.gelu(x)
    assert y.dtype is nt.float16
    y.sum().backward()
    assert x.grad.dtype is nt.float16
    assert np.allclose(x.detach().erf().numpy(), sp_erf(x.detach().numpy().astype(np.float64)), atol=1e-3)
