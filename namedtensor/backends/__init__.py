"""Devices and the backend that serves each: ``"cpu"`` (NumPy), ``"cuda"``/``"cuda:N"`` (CuPy, later).

``get(device)`` returns the backend for a device string.  The CPU backend can
be swapped for the array-api-strict one (``use_cpu_backend``), which the test
suite does to run every op a second time on a namespace that is not NumPy.
"""

from __future__ import annotations

from typing import Optional

from .base import Backend

_cpu: Optional[Backend] = None
_by_name: dict = {}


def _make(name: str) -> Backend:
    if name not in _by_name:
        if name == "numpy":
            from .numpy_backend import NumpyBackend

            _by_name[name] = NumpyBackend()
        elif name == "array_api_strict":
            try:
                from .strict_backend import StrictBackend
            except ImportError as e:
                raise ImportError(
                    "the 'array_api_strict' backend needs the array-api-strict package: "
                    "pip install array-api-strict"
                ) from e
            _by_name[name] = StrictBackend()
        else:
            raise ValueError(f"unknown CPU backend {name!r}; choose 'numpy' or 'array_api_strict'.")
    return _by_name[name]


def cpu() -> Backend:
    """The backend of CPU tensors (NumPy unless :func:`use_cpu_backend` chose another)."""
    global _cpu
    if _cpu is None:
        _cpu = _make("numpy")
    return _cpu


def use_cpu_backend(name: str) -> Backend:
    """Make ``name`` (``"numpy"`` or ``"array_api_strict"``) the backend of new CPU tensors."""
    global _cpu
    _cpu = _make(name)
    return _cpu


def parse_device(device) -> str:
    """The canonical device string (``"cpu"``, ``"cuda"``, ``"cuda:N"``), or a ValueError."""
    if device is None:
        return "cpu"
    if not isinstance(device, str):
        device = str(device)
    d = device.strip().lower()
    if d == "cpu" or d == "cuda" or (d.startswith("cuda:") and d[5:].isdigit()):
        return d
    raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda' or 'cuda:N'.")


def get(device=None) -> Backend:
    """The backend for ``device`` (``None`` means the CPU)."""
    if device is None or device == "cpu":
        return cpu()
    d = parse_device(device)
    if d == "cpu":
        return cpu()
    return _cuda(d)


def _cuda(device: str) -> Backend:
    try:
        import cupy  # noqa: F401
    except ImportError:
        raise RuntimeError(
            f"device {device!r} needs CuPy and an NVIDIA GPU, and CuPy is not installed. "
            "Install it with: pip install cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13)."
        ) from None
    raise NotImplementedError(
        f"device {device!r}: CuPy is installed, but namedtensor's CuPy backend is not implemented "
        "in this version; tensors run on 'cpu' only for now."
    )


def of_array(x) -> Backend:
    """The backend whose namespace owns array ``x``."""
    b = cpu()
    if b.is_array(x):
        return b
    for other in _by_name.values():
        if other.is_array(x):
            return other
    raise TypeError(f"not an array of a known backend: {type(x).__name__}")



def set_num_threads(n: int) -> None:
    """Use ``n`` threads on the CPU, as PyTorch's ``torch.set_num_threads``: for the fused
    elementwise kernels (GELU, erf) and for BLAS (matrix products), whose thread count is changed
    at run time with ``threadpoolctl``."""
    from threadpoolctl import threadpool_limits

    from . import numpy_kernels

    numpy_kernels.set_num_threads(n)
    threadpool_limits(limits=n, user_api="blas")  # stays in force: the handle is only for restoring


def get_num_threads() -> int:
    """The number of CPU threads of the fused kernels (and of BLAS, once :func:`set_num_threads` ran)."""
    from . import numpy_kernels

    return numpy_kernels.get_num_threads()
