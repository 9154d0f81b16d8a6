"""The NumPy backend's blockwise kernels: the same results on one thread and on several."""

import numpy as np
import pytest
import threadpoolctl

import namedtensor as nt
from namedtensor.backends import numpy_kernels


@pytest.fixture
def small_blocks(monkeypatch):
    # many blocks on small arrays, so every thread gets work and the last block is partial
    monkeypatch.setattr(numpy_kernels, "BLOCK", 1000)
    previous = nt.get_num_threads()
    yield
    nt.set_num_threads(previous)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_kernels_agree_across_thread_counts(small_blocks, threads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(10_537).astype(np.float32) * 3
    g = rng.standard_normal(10_537).astype(np.float32)
    nt.set_num_threads(1)
    ref_erf = numpy_kernels.erf32(x)
    ref_y, ref_cdf = numpy_kernels.gelu(x, None)
    ref_g = numpy_kernels.gelu_backward(x, ref_cdf, g)
    nt.set_num_threads(threads)
    assert nt.get_num_threads() == threads
    np.testing.assert_array_equal(numpy_kernels.erf32(x), ref_erf)
    y, cdf = numpy_kernels.gelu(x, None)
    np.testing.assert_array_equal(y, ref_y)
    np.testing.assert_array_equal(cdf, ref_cdf)
    np.testing.assert_array_equal(numpy_kernels.gelu_backward(x, cdf, g), ref_g)


def test_kernels_take_any_layout(small_blocks):
    x = np.random.default_rng(1).standard_normal((30, 70)).astype(np.float32)
    y, cdf = numpy_kernels.gelu(x.T, None)  # a transposed view is read in its logical order
    assert y.shape == (70, 30)
    np.testing.assert_array_equal(y, numpy_kernels.gelu(np.ascontiguousarray(x.T), None)[0])


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_set_num_threads_rejects_bad_counts(bad):
    with pytest.raises(ValueError, match="positive int"):
        nt.set_num_threads(bad)


def test_set_num_threads_sets_blas_threads_too(small_blocks):
    nt.set_num_threads(1)
    blas = [p for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    assert blas and all(p["num_threads"] == 1 for p in blas)
