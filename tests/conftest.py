"""Shared fixtures: ``backend`` runs a test on NumPy and again on array-api-strict.

A test module opts in with ``pytestmark = pytest.mark.usefixtures("backend")``;
its tests then run once per CPU backend.
"""

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


@pytest.fixture
def rng():
    import numpy as np

    return np.random.default_rng(0)
