"""Devices and the backend that serves each: ``"cpu"`` (NumPy), ``"cuda"``/``"cuda:N"`` (CuPy).

``get(device)`` returns the backend for a device string.  The CPU backend can
be swapped for the array-api-strict one (``use_cpu_backend``), which the test
suite does to run every op a second time on a namespace that is not NumPy.

A CUDA device gets one :class:`~namedtensor.backends.cupy_backend.CupyBackend`,
made on first use; CuPy is imported only then, and every way it can be missing
(not installed, no GPU or driver, no such device) is a ``RuntimeError`` saying
which.  ``"cuda"`` means the current device (``nt.cuda.set_device``, 0 by
default).  ``register_device`` puts another backend behind a device string: the
test suite runs all the device plumbing on a NumPy backend posing as
``"cuda:0"`` that way, on machines without a GPU.
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

            _by_name.setdefault(name, NumpyBackend())  # threads making it at once all keep the first
        elif name == "array_api_strict":
            try:
                from .strict_backend import StrictBackend
            except ImportError as e:
                raise ImportError(
                    "the 'array_api_strict' backend needs the array-api-strict package: "
                    "pip install array-api-strict"
                ) from e
            _by_name.setdefault(name, StrictBackend())
        else:
            raise ValueError(f"unknown CPU backend {name!r}; choose 'numpy' or 'array_api_strict'.")
    return _by_name[name]


def cpu() -> Backend:
    """The backend of CPU tensors (NumPy unless :func:`use_cpu_backend` chose another)."""
    global _cpu
    if _cpu is None:
        _cpu = _make("numpy")
    return _cpu


def host() -> Backend:
    """The NumPy backend, whichever backend CPU tensors use (MPI's host buffers are NumPy arrays)."""
    return _make("numpy")


def use_cpu_backend(name: str) -> Backend:
    """Make ``name`` (``"numpy"`` or ``"array_api_strict"``) the backend of new CPU tensors."""
    global _cpu
    _cpu = _make(name)
    return _cpu


def parse_device(device) -> str:
    """The canonical device string (``"cpu"``, ``"cuda"``, ``"cuda:N"``, ``"meta"``), or a ValueError."""
    if device is None:
        return "cpu"
    if not isinstance(device, str):
        device = str(device)
    d = device.strip().lower()
    if d in ("cpu", "cuda", "meta") or (d.startswith("cuda:") and d[5:].isdigit()):
        return d
    raise ValueError(f"unknown device {device!r}; use 'cpu', 'cuda', 'cuda:N' or 'meta' (shapes only).")


def get(device=None) -> Backend:
    """The backend for ``device`` (``None`` means the CPU)."""
    if device is None or device == "cpu":
        return cpu()
    if device.__class__ is str:
        b = _devices.get(device)  # made or registered already: no parsing
        if b is not None:
            return b
    d = parse_device(device)
    if d == "cpu":
        return cpu()
    if d == "meta":
        from .meta_backend import META

        return META
    return _cuda(d)


#: the backend of each CUDA device, made on first use (or registered), by canonical name ``"cuda:N"``
_devices: dict = {}
#: the devices served by :func:`register_device` rather than by CuPy
_registered: set = set()
#: the index that ``"cuda"`` means (``nt.cuda.set_device``)
_current = 0


def current_index() -> int:
    """The index of the CUDA device that ``"cuda"`` means."""
    return _current


def set_current_index(index: int) -> None:
    """Make ``"cuda"`` mean CUDA device ``index`` (``nt.cuda.set_device``, which checks it first)."""
    global _current
    _current = index


def _cuda(device: str) -> Backend:
    index = _current if device == "cuda" else int(device[5:])
    key = f"cuda:{index}"
    b = _devices.get(key)
    if b is None:
        b = _devices.setdefault(key, _make_cuda(device, index))  # threads making it at once share the first
    return b


def _make_cuda(device: str, index: int) -> Backend:
    """A CuPy backend for device ``index``, or a RuntimeError saying what is missing."""
    need = f"device {device!r} needs CuPy and an NVIDIA GPU"
    try:
        import cupy
    except ModuleNotFoundError as e:
        if e.name != "cupy":  # CuPy is there, one of its own imports is not
            raise RuntimeError(f"{need}; CuPy is installed but cannot be imported ({e}).") from e
        raise RuntimeError(
            f"{need}, and CuPy is not installed. "
            "Install it with: pip install cupy-cuda12x (CUDA 12) or cupy-cuda13x (CUDA 13)."
        ) from None
    except ImportError as e:
        raise RuntimeError(f"{need}; CuPy is installed but cannot be imported ({e}).") from e
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:  # CuPy's CUDARuntimeError: no driver, a driver too old, no device
        raise RuntimeError(
            f"{need}; CuPy {cupy.__version__} is installed but cannot use a CUDA device: "
            f"{type(e).__name__}: {e}. Check that an NVIDIA GPU and its driver are present (nvidia-smi) and that "
            "the CuPy package matches the driver's CUDA version (cupy-cuda12x for CUDA 12, cupy-cuda13x for 13)."
        ) from None
    if count == 0:
        raise RuntimeError(f"{need}; CuPy {cupy.__version__} is installed but finds no CUDA device.")
    if index >= count:
        raise RuntimeError(
            f"device {device!r}: there is no CUDA device {index}; this machine has {count} "
            f"({'cuda:0' if count == 1 else f'cuda:0 to cuda:{count - 1}'})."
        )
    from .cupy_backend import CupyBackend

    return CupyBackend(index)


def register_device(device: str, backend: Optional[Backend]) -> Optional[Backend]:
    """Serve ``device`` (``"cuda:N"``) with ``backend`` from now on (``None``: forget it, so the next use
    makes a CuPy backend again); returns the backend it replaces.

    For tests and alternative device backends: the test suite registers a NumPy backend whose ``device``
    is ``"cuda:0"`` to run ``.to("cuda")``, ``Module.to``, optimizers, checkpoints and the DataLoader's
    device path on machines without a GPU.  ``backend.device`` must be ``device``.
    """
    d = parse_device(device)
    if not d.startswith("cuda:"):
        raise ValueError(f"register_device: give a device 'cuda:N', got {device!r}.")
    if backend is not None and backend.device != d:
        raise ValueError(f"register_device: the backend's device is {backend.device!r}, not {d!r}.")
    old = _devices.pop(d, None)
    _registered.discard(d)
    if backend is not None:
        _devices[d] = backend
        _registered.add(d)
    return old


def made() -> list:
    """Every backend made so far: the CPU ones, then the devices' (e.g. to seed them all)."""
    return list(_by_name.values()) + list(_devices.values())


def transfer(x, src: Backend, dst: Backend, non_blocking: bool = False):
    """Array ``x`` of backend ``src`` copied to ``dst`` (another device): never the same memory.

    Device backends (``src.device != "cpu"``) provide ``download(x)`` (a new NumPy array) and
    ``upload(x, non_blocking)`` (a new device array from a host array, or from another device's).
    """
    if dst.device == "cpu":
        if src.device == "cpu":  # two CPU backends: their arrays may share memory
            return dst.asarray(src.to_numpy(x), copy=True)
        return dst.asarray(src.download(x))
    if src.device == "cpu":
        return dst.upload(src.to_numpy(x), non_blocking)
    return dst.upload(x if type(src) is type(dst) else src.download(x), non_blocking)


def of_array(x) -> Backend:
    """The backend whose namespace owns array ``x``."""
    b = cpu()
    if b.is_array(x):
        return b
    for other in made():
        if other.is_array(x):
            return other
    raise TypeError(f"not an array of a known backend: {type(x).__name__}")


def set_num_threads(n: int) -> None:
    """Use ``n`` threads on the CPU, as PyTorch's ``torch.set_num_threads``: one pool for the fused
    kernels and for the matrix products, which it shares out by rows or stacked matrices to BLAS
    calls on one thread each (BLAS's own thread count, changed at run time with ``threadpoolctl``, is
    then 1, and ``n`` inside the linear-algebra routines): OpenBLAS's idle workers spin for a while
    after each product and would take cores from the pool's threads.  With a thread for every CPU the
    process may use, each of the pool's threads keeps to one CPU (backends/thread_pool.py)."""
    from . import numpy_kernels, thread_pool

    thread_pool.set_num_threads(n)
    numpy_kernels.pool_products(n > 1)


def get_num_threads() -> int:
    """The number of CPU threads of the fused kernels and the matrix products."""
    from . import thread_pool

    return thread_pool.get_num_threads()
