"""Libraries written against the Array API standard, run on our tensors: array-api-compat finds the
namespace; array-api-extra's functions, einops' array-API entry points and scikit-learn's estimators
(``array_api_dispatch``) give NumPy's results; unnamed tensors flow through unchanged and named ones
keep their names where the library's ops let the rules infer them."""

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import namedtensor as nt
import namedtensor.array_api as xp

array_api_compat = pytest.importorskip("array_api_compat")
xpx = pytest.importorskip("array_api_extra")
einops_xp = pytest.importorskip("einops.array_api")

A = np.arange(12.0).reshape(3, 4) / 3 - 1


def _close(ours, expected):
    if isinstance(expected, tuple):
        assert len(ours) == len(expected)
        for o, e in zip(ours, expected):
            _close(o, e)
        return
    assert isinstance(ours, nt.Tensor)
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-12, atol=1e-12)


def test_array_api_compat_finds_the_namespace():
    t = nt.tensor(A, names=("a", "b"))
    assert array_api_compat.array_namespace(t) is xp
    assert array_api_compat.array_namespace(t, nt.tensor(1.0)) is xp
    assert array_api_compat.is_array_api_obj(t)
    assert array_api_compat.device(t) == "cpu" and array_api_compat.size(t) == 12


# (name, call taking the namespace and the array)
EXTRA = [
    ("atleast_nd", lambda m, v: xpx.atleast_nd(v, ndim=3, xp=m)),
    ("cov", lambda m, v: xpx.cov(v, xp=m)),
    ("create_diagonal", lambda m, v: xpx.create_diagonal(v[0, ...], xp=m)),
    ("kron", lambda m, v: xpx.kron(v, v, xp=m)),
    ("nunique", lambda m, v: xpx.nunique(v, xp=m)),
    ("pad", lambda m, v: xpx.pad(v, 1, xp=m)),
    ("setdiff1d", lambda m, v: xpx.setdiff1d(v[0, ...], v[1, ...], xp=m)),
    ("union1d", lambda m, v: xpx.union1d(v[0, ...], v[1, ...], xp=m)),
    ("isin", lambda m, v: xpx.isin(v, v[0, ...], xp=m)),
    ("sinc", lambda m, v: xpx.sinc(v, xp=m)),
    ("one_hot", lambda m, v: xpx.one_hot(m.asarray([0, 2, 1]), 3, xp=m)),
    ("isclose", lambda m, v: xpx.isclose(v, v + 1e-9, xp=m)),
    ("at", lambda m, v: xpx.at(v)[0, 1].set(5.0, xp=m)),
    ("nanmean", lambda m, v: xpx.nanmean(v, xp=m)),
    ("nan_to_num", lambda m, v: xpx.nan_to_num(v / v, xp=m)),
    ("unravel_index", lambda m, v: xpx.unravel_index(m.asarray([3, 7]), (3, 4), xp=m)),
    ("partition", lambda m, v: xpx.partition(v[0, ...], 1, xp=m)),
    ("searchsorted", lambda m, v: xpx.searchsorted(v[0, ...], v[1, ...], xp=m)),
    ("apply_where", lambda m, v: xpx.apply_where(v > 0, v, lambda z: z * 2, fill_value=0.0, xp=m)),
]


@pytest.mark.parametrize("name, call", EXTRA, ids=[e[0] for e in EXTRA])
def test_array_api_extra_gives_numpys_results(name, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecations and NumPy's 0/0 warning in nan_to_num's input
        expected = call(np, A)
        ours = call(xp, nt.tensor(A))
    if isinstance(ours, tuple):
        _close(ours, tuple(np.asarray(e) for e in expected))
    else:
        _close(ours, np.asarray(expected))
        assert set(ours.names) <= {None}  # unnamed in, unnamed out


def test_array_api_extra_keeps_names_where_the_rules_infer_them():
    t = nt.tensor(A, names=("a", "b"))
    assert xpx.pad(t, 1).names == ("a", "b")
    assert xpx.sinc(t).names == ("a", "b")
    assert xpx.at(t)[0, 1].set(5.0).names == ("a", "b")
    assert xpx.apply_where(t > 0, t, lambda z: z * 2, fill_value=0.0).names == ("a", "b")
    assert xpx.isclose(t, t).names == ("a", "b")
    # cov's x @ x.T of named dims would name two dims "a": the rules cannot infer names there, and say so
    with pytest.raises(nt.NamesError, match="duplicate names"):
        xpx.cov(t)
    _close(xpx.cov(t.rename(None)), np.cov(A))


def test_einops_array_api_entry_points():
    t = nt.tensor(A.reshape(3, 2, 2), names=("b", "h", "w"))
    out = einops_xp.rearrange(t, "b h w -> b w h")
    _close(out, A.reshape(3, 2, 2).transpose(0, 2, 1))
    assert out.names == ("b", "w", "h")  # a permutation: the names move with their dims
    red = einops_xp.reduce(t, "b h w -> b", "sum")
    _close(red, A.reshape(3, 2, 2).sum(axis=(1, 2)))
    assert red.names == ("b",)
    flat = einops_xp.rearrange(nt.tensor(A.reshape(3, 2, 2)), "b h w -> b (h w)")
    _close(flat, A)
    rep = einops_xp.repeat(nt.tensor(A), "b c -> b c k", k=2)
    _close(rep, np.repeat(A[:, :, None], 2, axis=2))


SKLEARN_SCRIPT = r"""
import json, sys, warnings
import numpy as np
import sklearn
import namedtensor as nt
from sklearn.decomposition import PCA
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.linear_model import Ridge
from sklearn.preprocessing import MinMaxScaler, StandardScaler

warnings.simplefilter("ignore")
rng = np.random.default_rng(0)
X = rng.standard_normal((40, 5))
y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(np.int64)
target = X @ rng.standard_normal(5)
estimators = {
    "StandardScaler": lambda X, y, t: StandardScaler().fit_transform(X),
    "MinMaxScaler": lambda X, y, t: MinMaxScaler().fit_transform(X),
    "PCA": lambda X, y, t: PCA(n_components=2, svd_solver="full").fit_transform(X),
    "LinearDiscriminantAnalysis": lambda X, y, t: LinearDiscriminantAnalysis().fit(X, y).predict_proba(X),
    "Ridge": lambda X, y, t: Ridge(solver="svd").fit(X, t).predict(X),
}
report = {}
for name, fit in estimators.items():
    expected = np.asarray(fit(X, y, target))
    with sklearn.config_context(array_api_dispatch=True):
        plain = fit(nt.tensor(X), nt.tensor(y), nt.tensor(target))
        named = fit(nt.tensor(X, names=("sample", "feat")), nt.tensor(y, names=("sample",)),
                    nt.tensor(target, names=("sample",)))
    # PCA's components have a sign each, which the SVD of each backend may choose differently
    comparable = np.abs if name == "PCA" else (lambda a: a)
    report[name] = {
        "types": [type(plain).__name__, type(named).__name__],
        "plain_error": float(np.max(np.abs(comparable(plain.numpy()) - comparable(expected)))),
        "named_error": float(np.max(np.abs(comparable(named.numpy()) - comparable(expected)))),
        "plain_names": list(plain.names), "named_names": list(named.names),
    }
print(json.dumps(report))
"""


def test_scikit_learn_estimators_with_array_api_dispatch():
    pytest.importorskip("sklearn")
    # scikit-learn's dispatch needs SciPy's array API support, switched on before SciPy is imported:
    # a fresh interpreter, since this one may have imported SciPy already
    env = dict(os.environ, SCIPY_ARRAY_API="1")
    run = subprocess.run([sys.executable, "-c", SKLEARN_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(report) == {"StandardScaler", "MinMaxScaler", "PCA", "LinearDiscriminantAnalysis", "Ridge"}
    for name, r in report.items():
        assert r["types"] == ["Tensor", "Tensor"], name
        assert r["plain_error"] < 1e-10 and r["named_error"] < 1e-10, (name, r)
        assert set(r["plain_names"]) == {None}, (name, r)
        assert r["named_names"][0] == "sample", (name, r)  # the samples keep their name through the estimator
    assert report["StandardScaler"]["named_names"] == ["sample", "feat"]
