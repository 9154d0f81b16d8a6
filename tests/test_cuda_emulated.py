"""The GPU kernel tests of ``test_cuda_kernels.py``, run on the CPU: the kernels' CUDA sources compiled
by g++ behind the CUDA emulation of ``tests/cuda_emulator.py``, launched by the unchanged
:mod:`namedtensor.backends.cuda_kernels` through a stand-in for CuPy.

This executes every kernel's indexing, masking, tiling, barriers and warp shuffles, and the launchers'
grids and tables, on machines without a GPU.  It does not replace the GPU run (no NVRTC, no real
scheduling, registers or shared-memory limits): see the emulator's docstring.  Skipped, saying so,
where g++ is missing.
"""

import shutil

import pytest

import cuda_emulator
from namedtensor.backends import cuda_kernels as ck
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
