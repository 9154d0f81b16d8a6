"""Shared fixtures: ``backend`` runs a test on NumPy and again on array-api-strict.

A test module opts in with ``pytestmark = pytest.mark.usefixtures("backend")``;
its tests then run once per CPU backend.  ``no_cupy`` makes CuPy unimportable
(the errors of a machine without it, wherever the suite runs).  Every test starts with the session's
thread settings (``thread_settings_restored``).

Tests marked ``gpu`` need CuPy and a CUDA device; without them they are
deselected (not skipped), and the run's header and summary say why.
"""

import sys

import pytest
from hypothesis import settings

import namedtensor as nt
from namedtensor import backends

settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.load_profile("ci")

BACKENDS = ["numpy", "array_api_strict"]


@pytest.fixture(params=BACKENDS)
def backend(request):
    b = backends.use_cpu_backend(request.param)
    nt.manual_seed(0)
    yield b
    backends.use_cpu_backend("numpy")


@pytest.fixture(autouse=True)
def thread_settings_restored():
    """Every test starts with the session's threads and the pool's product mode: a test that sets threads
    and restores only their count (``nt.set_num_threads(before)``) turns the pool's products on, which
    changes the ops a later test's backward records (a linear layer's two products side by side, on raw
    arrays)."""
    from namedtensor.backends import numpy_kernels

    threads, pooled = nt.get_num_threads(), numpy_kernels.pool_does_products()
    yield
    if nt.get_num_threads() != threads or numpy_kernels.pool_does_products() != pooled:
        nt.set_num_threads(threads)
        numpy_kernels.pool_products(pooled)


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(0)


@pytest.fixture
def no_cupy(monkeypatch):
    """``import cupy`` fails and no CUDA backend exists yet: a machine without CuPy."""
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.setattr(backends, "_devices", {})
    monkeypatch.setattr(backends, "_registered", set())


def _no_gpu_reason():
    """Why the ``gpu`` tests cannot run here (None when they can)."""
    try:
        import cupy
    except ImportError as e:
        return f"CuPy is not installed ({e}); pip install cupy-cuda12x or cupy-cuda13x"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        return f"CuPy {cupy.__version__} finds no usable CUDA device ({type(e).__name__}: {e})"
    return None if n > 0 else f"CuPy {cupy.__version__} finds no CUDA device"


_GPU = {}


def pytest_report_header(config):
    reason = _GPU.setdefault("reason", _no_gpu_reason())
    return "gpu tests: run (a CUDA device is there)" if reason is None else f"gpu tests: deselected: {reason}"


def pytest_collection_modifyitems(config, items):
    reason = _GPU.setdefault("reason", _no_gpu_reason())
    gpu = [item for item in items if item.get_closest_marker("gpu")]
    if reason is None or not gpu:
        return
    config.hook.pytest_deselected(items=gpu)
    items[:] = [item for item in items if not item.get_closest_marker("gpu")]
    _GPU["deselected"] = len(gpu)


def pytest_terminal_summary(terminalreporter):
    n = _GPU.get("deselected")
    if n:
        terminalreporter.write_line(f"{n} gpu-marked tests deselected: {_GPU['reason']}")
