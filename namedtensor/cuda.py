"""``nt.cuda``: is a GPU there, which one is current, waiting for it, and its memory pool.

Every function works on a machine without CuPy or without a GPU: ``is_available()`` is False,
``device_count()`` 0, the memory counters 0 (nothing was allocated) and ``empty_cache()`` does
nothing, as in PyTorch; ``synchronize()`` and ``set_device()`` need a device and raise the
backend's error saying what is missing (CuPy not installed, no GPU or driver, no such device).

A device's memory is CuPy's default memory pool: ``memory_allocated`` counts the bytes of live
arrays, ``memory_reserved`` those the pool holds (live plus cached for reuse), ``empty_cache``
returns the cached blocks to the driver.  ``pin`` copies a CPU tensor into page-locked host memory,
from which ``t.to("cuda", non_blocking=True)`` copies without blocking the host (the DataLoader's
``pin_memory=True`` does this for every batch).
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Iterator, Optional, Union

from . import backends
from ._internal import backend_of, wrap
from .tensor import Tensor

__all__ = ["is_available", "device_count", "current_device", "set_device", "synchronize", "memory_allocated",
           "memory_reserved", "empty_cache", "pin"]

Device = Union[int, str, None]


def device_count() -> int:
    """The number of CUDA devices: 0 without CuPy, without a driver or without a GPU."""
    count = 0
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # not installed, no driver, no device: all mean none can be used
        count = 0
    # devices registered in place of CuPy's (the test suite's stand-ins) are counted too
    return max([count] + [int(B.device[5:]) + 1 for B in _cuda_backends()])


def is_available() -> bool:
    """Whether a CUDA device can be used (CuPy installed, a driver, at least one GPU)."""
    return device_count() > 0


def current_device() -> int:
    """The index of the device that ``"cuda"`` means (0 unless :func:`set_device` chose another)."""
    return backends.current_index()


def set_device(device: Device) -> None:
    """Make ``device`` (an index, ``"cuda:N"``) the one that ``"cuda"`` means, for CuPy too."""
    name = _name(device)
    B = backends.get(name)  # the clear error when it cannot be used
    backends.set_current_index(int(B.device[5:]))
    use = getattr(B, "_dev", None)  # CuPy's current device follows (the fake test devices have none)
    if use is not None:
        use.use()


def _name(device: Device) -> str:
    """``"cuda:N"`` for an index, ``"cuda"`` for None; a string is checked as a device."""
    if device is None:
        return "cuda"
    if isinstance(device, bool):
        raise TypeError(f"nt.cuda: a device is an index or 'cuda:N', got {device!r}.")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"nt.cuda: device index must be >= 0, got {device}.")
        return f"cuda:{device}"
    d = backends.parse_device(device)
    if not d.startswith("cuda"):
        raise ValueError(f"nt.cuda: {device!r} is not a CUDA device; use an index, 'cuda' or 'cuda:N'.")
    return d


def _cuda_backends() -> list:
    """The backends of the CUDA devices made (or registered) so far."""
    return [B for B in backends.made() if B.device.startswith("cuda:")]


def _made(device: Device):
    """The backend of ``device`` if it was made already (None: it never held memory)."""
    name = _name(device)
    key = f"cuda:{backends.current_index()}" if name == "cuda" else name
    return next((B for B in _cuda_backends() if B.device == key), None)


def synchronize(device: Device = None) -> None:
    """Wait until all work queued on ``device`` (default: the current one) is done."""
    backends.get(_name(device)).synchronize()


def memory_allocated(device: Device = None) -> int:
    """Bytes of ``device``'s memory held by live tensors (0 when it was never used)."""
    B = _made(device)
    return 0 if B is None else B.memory_allocated()


def memory_reserved(device: Device = None) -> int:
    """Bytes the memory pool holds on ``device``: in use plus cached for reuse (0 when never used)."""
    B = _made(device)
    return 0 if B is None else B.memory_reserved()


def empty_cache() -> None:
    """Release the memory pool's cached blocks on every device used so far (live tensors keep theirs)."""
    for B in _cuda_backends():
        B.empty_cache()


def pin(t: Tensor, device: Device = None) -> Tensor:
    """A copy of CPU tensor ``t`` in page-locked host memory (for ``device``, default the current one),
    which ``.to("cuda", non_blocking=True)`` copies without blocking the host.  Keeps names and dtype."""
    if not isinstance(t, Tensor):
        raise TypeError(f"pin: expected a Tensor, got {type(t).__name__}.")
    if t.device != "cpu":
        raise ValueError(f"pin: only CPU tensors can be pinned, this one is on {t.device!r}.")
    B = backends.get(_name(device))
    cpu = backends.cpu()
    return wrap(cpu.asarray(B.pin(backend_of(t).to_numpy(t.array))), t.names, cpu)


# ---------------------------------------------------------------------- the DataLoader's delivery


def loader_delivery(pin_memory: bool, device: Any) -> Optional[Callable[[Iterator[Any]], Iterator[Any]]]:
    """What a DataLoader does to its collated batches: ``None`` (nothing), or a function of the batch
    iterator pinning their CPU tensors and/or moving them to ``device`` (checked here, so a loader for an
    unavailable device fails when it is made)."""
    target = None if device is None else backends.get(device)
    if target is not None and target.device == "cpu":
        target = None  # batches are made on the CPU already
    if pin_memory and not is_available():
        warnings.warn("DataLoader: pin_memory=True but no CUDA device is available, so batches are not "
                      "pinned (page-locked memory only speeds up copies to a GPU).", UserWarning, stacklevel=3)
        pin_memory = False
    if target is None:
        if not pin_memory:
            return None
        B = backends.get("cuda")
        return lambda batches: (_map_tensors(b, lambda t: _pinned(t, B)) for b in batches)
    if not pin_memory:
        return lambda batches: (_map_tensors(b, lambda t: _to_device(t, target)) for b in batches)
    return lambda batches: _prefetch(batches, target)


def _prefetch(batches: Iterator[Any], B) -> Iterator[Any]:
    """Batches moved to ``B``'s device from pinned memory on its copy stream, one batch ahead: batch
    ``i + 1`` is copied while the work queued on batch ``i`` runs; each batch is handed out once the
    current stream waits for its copies."""
    stream = B.copy_stream()
    ahead = None
    for batch in batches:
        # the copies go after the work queued so far, which may still read memory the pool hands them
        B.wait(B.record(), stream)
        moved = _map_tensors(batch, lambda t: _upload(t, B, stream))
        ready = B.record(stream)
        if ahead is not None:
            B.wait(ahead[1])
            yield ahead[0]
        ahead = (moved, ready)
    if ahead is not None:
        B.wait(ahead[1])
        yield ahead[0]


def _pinned(t: Tensor, B) -> Tensor:
    if t.device != "cpu":
        return t
    cpu = backends.cpu()
    return wrap(cpu.asarray(B.pin(backend_of(t).to_numpy(t.array))), t.names, cpu)


def _to_device(t: Tensor, B) -> Tensor:
    return t if t.device == B.device else wrap(backends.transfer(t.array, backend_of(t), B), t.names, B)


def _upload(t: Tensor, B, stream) -> Tensor:
    if t.device != "cpu":
        return _to_device(t, B)
    return wrap(B.upload(B.pin(backend_of(t).to_numpy(t.array)), True, stream), t.names, B)


def _map_tensors(obj: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """``obj`` (a batch: tensors in tuples, lists, dicts, namedtuples) with ``fn`` applied to each tensor."""
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        items = [_map_tensors(v, fn) for v in obj]
        if hasattr(obj, "_fields"):  # a namedtuple
            return type(obj)(*items)
        return tuple(items) if isinstance(obj, tuple) else items
    return obj
