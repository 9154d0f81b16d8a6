"""Conversions to and from xarray, pandas and DLPack.

What lives here:

* ``to_xarray(t, coords=None, attrs=None, name=None)`` / ``from_xarray(da, device=None)``.
  Dims map to names one for one, in order.  xarray needs a name for every dim, so a tensor
  with an unnamed dim is refused (``NamesError`` pointing to ``refine_names``) rather than
  given invented names that would come back as real names.  A tensor has no coordinates,
  attributes or array name, so ``from_xarray`` keeps only the values, dtype and dim names and
  drops ``da.coords`` (index and non-index coordinates alike), ``da.attrs``, ``da.name`` and
  ``da.encoding``; lazy (dask) data is computed.  Pass the dropped parts back to ``to_xarray``
  to restore them: ``to_xarray(from_xarray(da), coords=da.coords, attrs=da.attrs,
  name=da.name)`` is identical to ``da``.
* ``to_pandas(t)``: a 1-D tensor becomes a ``Series`` whose index is named after the dim, a
  2-D tensor a ``DataFrame`` whose index and columns are named after dims 0 and 1 (unnamed
  dims give unnamed axes, which pandas allows); the labels are ``RangeIndex`` positions.
  Other ranks are refused with a ValueError.
* DLPack: ``Tensor.__dlpack__`` / ``Tensor.__dlpack_device__`` export the backend array
  (zero-copy; names are lost, DLPack has no place for them) and ``from_dlpack(x, names=...)``
  imports any producer (NumPy, PyTorch, CuPy, JAX, another Tensor) without copying where the
  producer allows it.  A tensor that requires grad is not exported, as with ``numpy()``.

Data: ``to_xarray`` and ``to_pandas`` copy the values, so editing the result never writes into
the tensor (nor into an autograd graph: tensors that require grad are detached); ``from_xarray``
copies too.  DLPack is the zero-copy route.  Dtypes are kept both ways.

xarray and pandas are optional (``pip install "named-tensors[interop]"``) and imported only
when these functions run.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from . import _names, backends
from ._internal import backend_of, wrap
from .autograd.mode import is_grad_enabled
from .tensor import Tensor

_EXTRA = 'pip install "named-tensors[interop]"'


def _require(module: str, op: str):
    """Import an optional dependency, or say which extra installs it."""
    try:
        return __import__(module)
    except ImportError as e:
        raise ImportError(f"{op} needs {module}, which is not installed: {_EXTRA}") from e


def _values(t: Tensor, op: str):
    """A NumPy copy of ``t``'s values, outside any autograd graph."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: expected a Tensor, got {type(t).__name__}.")
    return backend_of(t).to_numpy(t.array).copy()


def to_xarray(t: Tensor, coords: Any = None, attrs: Mapping | None = None, name: Hashable | None = None):
    """``t`` as an ``xarray.DataArray`` with dims ``t.names`` (a copy of the values).

    Every dim must be named.  ``coords``, ``attrs`` and ``name`` go to the DataArray as given,
    so the parts :func:`from_xarray` drops can be put back.
    """
    xr = _require("xarray", "to_xarray")
    values = _values(t, "to_xarray")
    for i, n in enumerate(t.names):
        if n is None:
            raise _names.NamesError(
                f"to_xarray: dim {i} of {_names.fmt(t.names)} is unnamed, and xarray needs a name for every "
                "dim; name it first, e.g. t.refine_names(...)."
            )
    return xr.DataArray(values, dims=t.names, coords=coords, attrs=None if attrs is None else dict(attrs), name=name)


def from_xarray(da, device: str | None = None) -> Tensor:
    """A tensor of ``da``'s values (a copy) named by ``da.dims``.

    Coordinates, attributes, the array's name and its encoding are dropped (a tensor has no
    place for them); give them back to :func:`to_xarray` to restore the DataArray.
    """
    xr = _require("xarray", "from_xarray")
    if not isinstance(da, xr.DataArray):
        raise TypeError(
            f"from_xarray: expected an xarray.DataArray, got {type(da).__name__}; "
            "pick one variable of a Dataset with ds[name]."
        )
    from .ops.creation import tensor

    return tensor(da.to_numpy(), names=_names.validate(da.dims, da.ndim, "from_xarray"), device=device)


def to_pandas(t: Tensor):
    """A 1-D tensor as a ``pandas.Series``, a 2-D one as a ``pandas.DataFrame`` (a copy of the values).

    The index is named after dim 0 and, for a DataFrame, the columns after dim 1.
    """
    pd = _require("pandas", "to_pandas")
    values = _values(t, "to_pandas")
    axes = [pd.RangeIndex(size, name=n) for n, size in zip(t.names, values.shape)]
    if values.ndim == 1:
        return pd.Series(values, index=axes[0], copy=False)
    if values.ndim == 2:
        return pd.DataFrame(values, index=axes[0], columns=axes[1], copy=False)
    raise ValueError(
        f"to_pandas: pandas holds 1-D (Series) or 2-D (DataFrame) data, but this tensor has {values.ndim} dims "
        f"{_names.fmt(t.names)}; select or flatten dims first, or use to_xarray for any rank."
    )


def __dlpack__(self: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """The DLPack capsule of the backend array (names are not part of DLPack)."""
    if self._rg and is_grad_enabled():
        raise RuntimeError("__dlpack__: the tensor requires grad; export t.detach() instead.")
    # only what the caller set is passed on: some producers read "absent" differently from None
    given = {"max_version": max_version, "dl_device": dl_device, "copy": copy}
    kwargs = {k: v for k, v in given.items() if v is not None}
    return self.array.__dlpack__(stream=stream, **kwargs)


def __dlpack_device__(self: Tensor):
    """The ``(device type, device id)`` pair of the backend array."""
    return self.array.__dlpack_device__()


#: DLPack device types namedtensor has a backend for: kDLCPU, kDLCUDAHost (pinned host memory),
#: kDLCUDA, kDLCUDAManaged
_DLPACK_DEVICES = {1: "cpu", 3: "cpu", 2: "cuda", 13: "cuda"}


def _dlpack_device(x) -> str:
    """The device of a DLPack producer's memory, as a device string (CPU when it does not say)."""
    if not hasattr(x, "__dlpack_device__"):
        return "cpu"
    kind, index = x.__dlpack_device__()
    name = _DLPACK_DEVICES.get(int(kind))
    if name is None:
        raise ValueError(f"from_dlpack: the producer's memory is on DLPack device type {int(kind)}; namedtensor "
                         "takes CPU memory and CUDA memory (device types 1, 2, 3 and 13).")
    return name if name == "cpu" else f"cuda:{int(index)}"


def from_dlpack(x, names: Sequence[str | None] | None = None, device: str | None = None) -> Tensor:
    """A tensor over the memory of any DLPack producer ``x`` (no copy where the producer allows it).

    ``names`` gives one name (or None) per dim; without it the tensor is unnamed, except that a
    Tensor producer keeps its names.  The tensor lives where the memory is (``x.__dlpack_device__()``:
    the CPU, or CUDA device N through CuPy) unless ``device=`` says where.  The result does not
    require grad.
    """
    if not hasattr(x, "__dlpack__"):
        raise TypeError(
            f"from_dlpack: expected an object with __dlpack__ (a NumPy, PyTorch, CuPy or JAX array...), "
            f"got {type(x).__name__}; use nt.tensor for other data."
        )
    if names is None and isinstance(x, Tensor):
        names = x.names
    B = backends.get(_dlpack_device(x) if device is None else device)
    try:
        arr = B.xp.from_dlpack(x)
    except (BufferError, RuntimeError) as e:  # a dtype the namespace lacks (bfloat16 for NumPy): its words
        raise TypeError(f"from_dlpack: the {B.name} backend cannot take this {type(x).__name__} ({e}); convert it "
                        "to one of namedtensor's dtypes first.") from None
    B.dtype_of(arr)  # a TypeError naming the supported dtypes, instead of a failure in a later op
    return wrap(arr, _names.validate(names, len(arr.shape), "from_dlpack"), B)


METHODS = {
    "to_xarray": to_xarray,
    "to_pandas": to_pandas,
    "__dlpack__": __dlpack__,
    "__dlpack_device__": __dlpack_device__,
}
