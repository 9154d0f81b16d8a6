"""Checkpoints: ``nt.save(obj, path)`` and ``nt.load(path)``, in the safetensors format.

What can be saved: a Tensor (or a :class:`~namedtensor.QuantizedTensor`: its integers, names and
quantization parameters), or dicts (``str`` or ``int`` keys), lists and tuples nesting Tensors
and plain values (``int``, ``float``, ``bool``, ``str``, ``None``), at most 100 containers deep: a
``Module.state_dict()`` (flat ``"layer.weight"`` keys), an optimizer's state dict (``int`` keys, lists
of hyperparameter dicts), or both in one dict.  Loading gives back the same structure: key types,
``list`` vs ``tuple``, order, every tensor's names, dtype and shape (0-dim and empty included).  Dict,
list and tuple subclasses load as the plain type; a :class:`~namedtensor.nn.Parameter` loads as a
Tensor (``load_state_dict`` copies it into the parameter); a tensor that requires grad is saved
detached.  The same Tensor object at several places (tied weights) is stored once and loads as one
object at all of them.

The file is a plain safetensors file, so other tools read the arrays
(``safetensors.numpy.load_file(path)``):

* each tensor is stored under a readable key: its path in the structure joined with ``"."``
  (``"encoder.layer.weight"``, ``"state.0.exp_avg"``; a bare tensor is ``"tensor"``).  When two paths
  would give the same key (``{"a": {"b": x}, "a.b": y}``, or ``{0: x, "0": y}``), every key is
  written instead as its path in JSON (``'["a","b"]'``), which cannot collide.
* ``__metadata__["namedtensor"]`` is a JSON document: ``{"format": "namedtensor", "version": 2,
  "names": {key: [dim names]}, "dtypes": {key: safetensors dtype}, "shapes": {key: shape},
  "crc32": {key: CRC-32 of the tensor's bytes}, "structure": ...}`` where the structure is a tree of
  tagged nodes (``{"tensor": key}``, ``{"quantized": [dtype, channel axis or null, integers, scale,
  zero point]}``, ``{"dict": [[key, node], ...]}``, ``{"list": [...]}``,
  ``{"tuple": [...]}``, ``{"value": v}``, and ``{"float": "nan" | "inf" | "-inf"}`` since JSON has no
  such numbers); ``__metadata__["namedtensor_crc32"]`` is the document's own CRC-32.  Every byte
  that decides a tensor is covered: the data by their CRC-32, the names and the structure by the
  document's, and each tensor's header entry by the dtype and shape the document repeats (its
  offsets select the bytes the data CRC-32 checks), so a flipped bit or an edited header raises
  instead of loading wrong tensors.  Files of format version 1 (no ``"dtypes"``, ``"shapes"``) still
  load, without the check of their header entries.

A plain safetensors file written by another tool (no namedtensor metadata) loads as a flat dict
``{key: unnamed tensor}`` in key order; name the dims with ``refine_names`` or let
``load_state_dict`` match them.  A file whose metadata has either namedtensor entry claims to be a
checkpoint, and any failed check of it is an error.

Reading checks the file before trusting it, and parses the header itself before safetensors does:
anything that is not a regular file (a FIFO would block), a header over 100 MB, JSON nested deeper
than the format needs (a header 8 levels, the document what 100 levels of containers need), a key
twice in one JSON object, a tensor of more than 64 dims are each a ``ValueError`` that names the
file and what is wrong, as are truncated, corrupted or inconsistent files.

Writing is atomic, keeps the target's permission bits and symlinks, and removes the temporaries
that killed saves left behind (:mod:`namedtensor._atomic_file`).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import stat
import zlib
from collections import Counter
from typing import Any, Dict, List, Tuple, Union

from . import _dtypes, _names, backends
from ._atomic_file import write_atomically
from ._internal import backend_of, wrap
from .ops.quantize import QuantizedTensor, qint8, quint8
from .tensor import Tensor

_QDTYPES = {q.name: q for q in (qint8, quint8)}

PathLike = Union[str, "os.PathLike[str]"]

FORMAT = "namedtensor"
VERSION = 2  # 2 added "dtypes" and "shapes"; files of version 1 still load
_META_KEY = "namedtensor"  # the entry of safetensors' __metadata__ holding the JSON document
_CRC_KEY = "namedtensor_crc32"  # the entry holding the document's CRC-32
_BARE_KEY = "tensor"  # the key of a Tensor saved on its own

# safetensors dtype strings of the dtypes namedtensor has, and the ones the format knows but we lack; the
# format has no complex128 (save refuses it)
_FROM_ST = {"F16": _dtypes.float16, "F32": _dtypes.float32, "F64": _dtypes.float64, "I8": _dtypes.int8,
            "I16": _dtypes.int16, "I32": _dtypes.int32, "I64": _dtypes.int64, "U8": _dtypes.uint8,
            "U16": _dtypes.uint16, "U32": _dtypes.uint32, "U64": _dtypes.uint64, "C64": _dtypes.complex64,
            "BOOL": _dtypes.bool_}
_TO_ST = {d.name: st for st, d in _FROM_ST.items()}
_OTHER_ST = {"BF16", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4", "E8M0"}

# Limits that keep a crafted file from exhausting the stack or memory before a check can refuse it.
_HEADER_LIMIT = 100_000_000  # safetensors' own bound on the header size
_MAX_NESTING = 100  # dicts, lists and tuples inside one another in a checkpoint
_DOC_DEPTH = 2 + 3 * _MAX_NESTING  # JSON depth of the document of such a checkpoint (a dict adds 3)
_HEADER_DEPTH = 8  # a safetensors header needs 3: {key: {"shape": [...]}}
_MAX_DIMS = 64  # NumPy's
_MAX_BYTES = 2**63 - 1  # NumPy's bound on an array's size in bytes, 0-size dims aside


# ----------------------------------------------------------------------------- save


def save(obj: Any, path: PathLike) -> None:
    """Write ``obj`` (a Tensor, or dicts/lists/tuples of Tensors and plain values) to ``path`` as a
    safetensors file, atomically: the previous file at ``path`` survives any failure.  Through a
    symlink the link's target is written; an existing file keeps its permission bits."""
    from safetensors.numpy import save as st_save

    path = os.fspath(path)
    slots: List[Tuple[tuple, Tensor]] = []  # (path in the structure, tensor), one per distinct tensor
    structure = _encode(obj, (), slots, {}, set())
    keys = _tensor_keys([p for p, _ in slots])
    arrays, records = _records(keys, [t for _, t in slots])
    doc = {"format": FORMAT, "version": VERSION, **records, "structure": _with_keys(structure, keys)}
    text = json.dumps(doc, allow_nan=False)
    data = st_save(arrays, metadata={_META_KEY: text, _CRC_KEY: _crc_text(text)})
    write_atomically(path, data)


def _records(keys: List[str], tensors: List[Tensor]) -> Tuple[dict, dict]:
    """The NumPy arrays to write, and what the document records of each: names, dtype, shape, CRC-32."""
    arrays: dict = {}
    records: Dict[str, dict] = {"names": {}, "dtypes": {}, "shapes": {}, "crc32": {}}
    for key, t in zip(keys, tensors):
        a = backend_of(t).to_numpy(t.array)
        # safetensors copies raw memory from the array's pointer: it must be C-ordered
        arrays[key] = a = a if a.flags.c_contiguous else a.copy()
        records["names"][key] = list(t.names)
        records["dtypes"][key] = _TO_ST[a.dtype.name]
        records["shapes"][key] = list(a.shape)
        records["crc32"][key] = zlib.crc32(a)
    return arrays, records


def _crc_text(text: str) -> str:
    # what save writes is ASCII; a crafted document may hold lone surrogates, which still have bytes
    return f"{zlib.crc32(text.encode('utf-8', 'surrogatepass')):08x}"


def _type_name(x: Any) -> str:
    t = type(x)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _where(path: tuple) -> str:
    return "obj" + "".join(f"[{p!r}]" for p in path)


def _encode(x: Any, path: tuple, slots: list, seen: Dict[int, int], open_: set) -> Any:
    """The structure node of ``x``; tensors become ``{"tensor": slot number}`` until keys are chosen."""
    if isinstance(x, Tensor):
        if x.dtype.name not in _TO_ST:
            raise TypeError(f"save: cannot save {_where(path)}: the safetensors format has no {x.dtype.name} dtype. "
                            "Save t.to(nt.complex64), or nt.view_as_real(t) (its float64 parts, which "
                            "nt.view_as_complex turns back).")
        if id(x) not in seen:
            seen[id(x)] = len(slots)
            slots.append((path, x))
        return {"tensor": seen[id(x)]}
    if isinstance(x, QuantizedTensor):
        if x.qscheme() == "per_tensor_affine":
            dim, scale, zero = None, x.q_scale(), x.q_zero_point()
        else:
            dim, scale, zero = x.q_per_channel_axis(), x.q_per_channel_scales(), x.q_per_channel_zero_points()
        parts = [_encode(v, path + (k,), slots, seen, open_) for k, v in
                 (("int_repr", x.int_repr()), ("scale", scale), ("zero_point", zero))]
        return {"quantized": [x.dtype.name, dim, *parts]}
    if x is None:
        return {"value": None}
    if isinstance(x, str):
        return {"value": str(x)}
    if isinstance(x, bool):  # before int: a bool is an int
        return {"value": bool(x)}
    if isinstance(x, int):
        return {"value": int(x)}
    if isinstance(x, float):
        x = float(x)
        if math.isfinite(x):
            return {"value": x}
        return {"float": "nan" if x != x else ("inf" if x > 0 else "-inf")}
    if isinstance(x, (dict, list, tuple)):
        return _encode_container(x, path, slots, seen, open_)
    raise TypeError(
        f"save: cannot save {_where(path)} of type {_type_name(x)}; a checkpoint holds Tensors, "
        "dicts (str or int keys), lists, tuples, and int, float, bool, str or None values."
    )


def _encode_container(x: Any, path: tuple, slots: list, seen: Dict[int, int], open_: set) -> Any:
    if id(x) in open_:
        raise ValueError(f"save: {_where(path)} contains itself; a checkpoint must be a tree.")
    if len(path) >= _MAX_NESTING:  # before the recursion (and JSON's) can exhaust the stack
        raise ValueError(
            f"save: obj nests dicts, lists and tuples more than {_MAX_NESTING} deep (at {_where(path[:5])}...); "
            "flatten it, e.g. into a dict with joined keys."
        )
    open_.add(id(x))
    if isinstance(x, dict):
        items = []
        for k, v in x.items():
            if isinstance(k, bool) or not isinstance(k, (str, int)):
                raise TypeError(
                    f"save: the key {k!r} in {_where(path)} is a {_type_name(k)}; "
                    "checkpoint dicts take str or int keys."
                )
            k = str(k) if isinstance(k, str) else int(k)
            items.append([k, _encode(v, path + (k,), slots, seen, open_)])
        node = {"dict": items}
    else:
        kind = "list" if isinstance(x, list) else "tuple"
        node = {kind: [_encode(v, path + (i,), slots, seen, open_) for i, v in enumerate(x)]}
    open_.discard(id(x))
    return node


def _tensor_keys(paths: List[tuple]) -> List[str]:
    """Readable keys (the path joined with '.'), or every path in JSON when those would collide."""
    plain = [".".join(str(p) for p in path) if path else _BARE_KEY for path in paths]
    if len(set(plain)) == len(plain) and "__metadata__" not in plain:
        return plain
    return [json.dumps(list(path), separators=(",", ":")) for path in paths]


def _with_keys(node: Any, keys: List[str]) -> Any:
    """The structure with slot numbers replaced by the tensors' keys."""
    if "tensor" in node:
        return {"tensor": keys[node["tensor"]]}
    if "dict" in node:
        return {"dict": [[k, _with_keys(v, keys)] for k, v in node["dict"]]}
    if "quantized" in node:
        dtype, dim, *parts = node["quantized"]
        return {"quantized": [dtype, dim, *(_with_keys(v, keys) for v in parts)]}
    for kind in ("list", "tuple"):
        if kind in node:
            return {kind: [_with_keys(v, keys) for v in node[kind]]}
    return node


# ----------------------------------------------------------------------------- load


def load(path: PathLike, device: str = "cpu") -> Any:
    """Read a checkpoint written by :func:`save` (the same structure, names, dtypes and shapes) onto
    ``device``.

    A plain safetensors file from another tool (no namedtensor metadata) loads too, as a flat dict
    ``{key: unnamed tensor}`` in key order.  A file that is not a regular file, is damaged, or claims
    to be a checkpoint and fails one of its checks raises a ``ValueError`` naming the file and what
    is wrong.
    """
    B = backends.get(device)
    path = os.fspath(path)
    entries, metadata = _read_header(path)
    text, crc = metadata.get(_META_KEY), metadata.get(_CRC_KEY)
    if text is None and crc is None:  # a plain safetensors file
        arrays = _read_arrays(path, sorted(entries))
        return {k: _make(arrays[k], None, B, k, path) for k in sorted(entries)}
    if text is None or crc is None:
        raise _bad(path, f"its metadata has {_META_KEY!r} or {_CRC_KEY!r} but not both; the file is corrupted")
    if crc != _crc_text(text):
        raise _bad(path, "its namedtensor metadata fails its checksum; the file is corrupted")
    doc = _parse_document(text, path, entries)
    _check_entries_recorded(doc, entries, path)
    arrays = _read_arrays(path, sorted(entries))
    for k, a in arrays.items():
        if zlib.crc32(a) != doc["crc32"][k]:
            raise _bad(path, f"the data of tensor {k!r} fail their checksum; the file is corrupted")
    tensors = {k: _make(arrays[k], doc["names"][k], B, k, path) for k in sorted(entries)}
    used: set = set()
    out = _decode(doc["structure"], tensors, used, path)
    if used != set(tensors):
        raise _bad(path, f"the metadata does not place the tensors {sorted(set(tensors) - used)}")
    return out


def _bad(path: str, what: str) -> ValueError:
    return ValueError(f"load: {path!r} is not a valid checkpoint: {what}.")


_NOT_REGULAR = {stat.S_IFIFO: "a FIFO", stat.S_IFDIR: "a directory", stat.S_IFCHR: "a character device",
                stat.S_IFBLK: "a block device", stat.S_IFSOCK: "a socket"}


def _open_regular(path: str):
    """``path`` opened for binary reading, refused unless it is a regular file."""
    # O_NONBLOCK: opening a FIFO would otherwise wait for a writer; a regular file reads as without it
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _bad(path, f"it is {_NOT_REGULAR.get(stat.S_IFMT(mode), 'a special file')}, not a regular file")
    return os.fdopen(fd, "rb")


def _read_header(path: str) -> Tuple[Dict[str, dict], Dict[str, str]]:
    """The tensor entries and the ``__metadata__`` of a safetensors file, checked against its size."""
    with _open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise _bad(path, "the file is empty")
        if size < 8:
            raise _bad(path, f"the file is too short ({size} bytes) to hold a safetensors header")
        n = int.from_bytes(f.read(8), "little")
        if n > size - 8:
            raise _bad(
                path,
                f"its header length field says {n} bytes but only {size - 8} follow; "
                "the file is truncated or not a safetensors file",
            )
        if n > _HEADER_LIMIT:
            raise _bad(path, f"its header is {n} bytes, more than the {_HEADER_LIMIT} allowed")
        raw = f.read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _bad(path, f"its header is not valid JSON ({e}); the file is corrupted or not a safetensors file") \
            from None
    header = _parse_json(text, "its header", _HEADER_DEPTH, path, "; the file is corrupted or not a safetensors file")
    if not isinstance(header, dict):
        raise _bad(path, "its header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    metadata = {} if metadata is None else metadata
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _bad(path, "its __metadata__ is not a map of strings")
    buffer = size - 8 - n
    for key, e in header.items():
        _check_entry(key, e, buffer, path)
    return header, metadata


class _DuplicateKey(ValueError):
    """A key twice in one JSON object (the argument): told apart from JSON that does not parse."""


def _unique_keys(pairs: List[Tuple[str, Any]]) -> dict:
    """A JSON object as a dict, refused when a key repeats (``json`` would keep the last silently)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _DuplicateKey(next(k for k, n in Counter(k for k, _ in pairs).items() if n > 1))
    return out


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _parse_json(text: str, what: str, limit: int, path: str, hint: str = "") -> Any:
    """``text`` parsed strictly (no repeated keys, no NaN or Infinity), its nesting checked first."""
    depth = _json_depth(text.encode("utf-8", "surrogatepass"))
    if depth > limit:
        raise _bad(path, f"{what} nests {depth} levels deep, more than the {limit} allowed")
    try:
        return json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except _DuplicateKey as e:
        raise _bad(path, f"{what} has the key {e.args[0]!r} twice") from None
    except ValueError as e:
        raise _bad(path, f"{what} is not valid JSON ({e}){hint}") from None


# A JSON string, or an unterminated one up to the end: never failing once it starts, the pattern
# scans each byte once, where one that needs the closing quote backtracks quadratically.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(rb"[^\[\]{}]+")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _json_depth(raw: bytes) -> int:
    """How deep the arrays and objects of the JSON text ``raw`` nest, found without recursion (where
    ``raw`` is not valid JSON, at least as deep as a parser gets before it fails)."""
    brackets = _NOT_BRACKET.sub(b"", _JSON_STRING.sub(b"", raw))
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets), initial=0))


def _check_entry(key: str, e: Any, buffer: int, path: str) -> None:
    """One header entry: a known dtype, a shape NumPy can make, and offsets inside the data that fit
    the shape."""
    if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= set(e):
        raise _bad(path, f"the header entry of tensor {key!r} lacks dtype, shape or data_offsets")
    dt, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
    if dt not in _FROM_ST:
        if dt in _OTHER_ST:
            raise _bad(path, f"tensor {key!r} has dtype {dt}, which namedtensor does not support "
                             f"(it reads {', '.join(sorted(_FROM_ST))})")
        raise _bad(path, f"tensor {key!r} has an unknown dtype {dt!r}")
    _check_shape(key, shape, _FROM_ST[dt].itemsize, path)
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise _bad(path, f"tensor {key!r} has invalid data offsets {offsets!r}")
    if offsets[1] > buffer:
        raise _bad(path, f"the data of tensor {key!r} (bytes {offsets[0]} to {offsets[1]}) lie past the end of "
                         f"the file's {buffer} data bytes; the file is truncated")
    expected = math.prod(shape) * _FROM_ST[dt].itemsize
    if offsets[1] - offsets[0] != expected:
        raise _bad(path, f"tensor {key!r} has {offsets[1] - offsets[0]} data bytes, but dtype {dt} and shape "
                         f"{shape} need {expected}")


def _check_shape(key: str, shape: Any, itemsize: int, path: str) -> None:
    if not isinstance(shape, list) or not all(type(s) is int and s >= 0 for s in shape):
        raise _bad(path, f"tensor {key!r} has an invalid shape {shape!r}")
    if len(shape) > _MAX_DIMS:
        raise _bad(path, f"tensor {key!r} has {len(shape)} dims, more than the {_MAX_DIMS} NumPy supports")
    if math.prod(s for s in shape if s) * itemsize > _MAX_BYTES:  # an empty one too: NumPy sizes it
        raise _bad(path, f"tensor {key!r} has the shape {shape}, too large for an array")


def _check_entries_recorded(doc: dict, entries: Dict[str, dict], path: str) -> None:
    """Each header entry's dtype and shape are the ones the checksummed document recorded (from
    format version 2 on)."""
    if doc["version"] < 2:
        return
    for k, e in entries.items():
        for field, records in (("dtype", doc["dtypes"]), ("shape", doc["shapes"])):
            if e[field] != records[k]:
                raise _bad(path, f"the header gives tensor {k!r} {field} {e[field]!r}, but its checksummed "
                                 f"metadata records {records[k]!r}; the file is corrupted")


def _read_arrays(path: str, keys: List[str]) -> dict:
    """The arrays of ``keys`` (NumPy arrays, read by safetensors; its own checks reported as ours)."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(path, framework="np") as f:
            return {k: f.get_tensor(k) for k in keys}
    except SafetensorError as e:
        raise _bad(path, f"safetensors cannot read it ({e})") from None


def _make(array, names, B, key: str, path: str) -> Tensor:
    """A tensor of ``B`` holding ``array`` (safetensors' own copy of the file's bytes), named ``names``."""
    ndim = len(array.shape)
    try:
        names = _names.validate(names, ndim, "load")
    except (_names.NamesError, TypeError) as e:
        raise _bad(path, f"the names of tensor {key!r} in the metadata are invalid ({e})") from None
    try:
        B.native(_dtypes.by_name(array.dtype.name))
    except TypeError as e:
        raise TypeError(f"load: tensor {key!r} of {path!r}: {e}") from None
    return wrap(B.asarray(array), names, B)


def _parse_document(text: str, path: str, entries: dict) -> dict:
    """The namedtensor JSON document of ``__metadata__``, checked against the file's tensors."""
    doc = _parse_json(text, "its namedtensor metadata", _DOC_DEPTH, path)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or "structure" not in doc:
        raise _bad(path, "its namedtensor metadata lacks the format name or the structure")
    version = doc.get("version")
    if type(version) is not int or version < 1:
        raise _bad(path, f"its namedtensor metadata has an invalid version {version!r}")
    if version > VERSION:
        raise ValueError(
            f"load: {path!r} was written by a newer namedtensor (checkpoint format version {version}); "
            f"this version reads up to version {VERSION}. Upgrade namedtensor to load it."
        )
    for field in ("names", "crc32") + (("dtypes", "shapes") if version >= 2 else ()):
        if not isinstance(doc.get(field), dict) or set(doc[field]) != set(entries):
            raise _bad(path, f"its namedtensor metadata does not list the {field} of exactly the file's tensors")
    return doc


def _decode(node: Any, tensors: dict, used: set, path: str) -> Any:
    """The object a structure node stands for."""
    if not isinstance(node, dict) or len(node) != 1:
        raise _bad(path, f"its namedtensor structure has a malformed node {str(node)[:80]!r}")
    ((kind, v),) = node.items()
    if kind == "tensor":
        if not isinstance(v, str) or v not in tensors:
            raise _bad(path, f"its namedtensor structure refers to a tensor {v!r} that the file lacks")
        used.add(v)
        return tensors[v]
    if kind == "value" and (v is None or isinstance(v, (bool, int, float, str))):
        return v
    if kind == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    if kind in ("list", "tuple") and isinstance(v, list):
        items = [_decode(x, tensors, used, path) for x in v]
        return items if kind == "list" else tuple(items)
    if kind == "quantized" and isinstance(v, list) and len(v) == 5 and v[0] in _QDTYPES and (
            v[1] is None or (isinstance(v[1], int) and not isinstance(v[1], bool))):
        stored, scale, zero = (_decode(x, tensors, used, path) for x in v[2:])
        per_tensor = v[1] is None
        if (not isinstance(stored, Tensor) or stored.dtype is not _QDTYPES[v[0]].storage
                or isinstance(scale, Tensor) == per_tensor or isinstance(zero, Tensor) == per_tensor
                or (not per_tensor and not 0 <= v[1] < stored.ndim)):
            raise _bad(path, "its namedtensor structure has a malformed quantized tensor")
        return QuantizedTensor(stored, scale, zero, v[1], _QDTYPES[v[0]])
    if kind == "dict" and isinstance(v, list):
        out = {}
        for item in v:
            if (not isinstance(item, list) or len(item) != 2 or isinstance(item[0], bool)
                    or not isinstance(item[0], (str, int))):
                raise _bad(path, f"its namedtensor structure has a malformed dict item {str(item)[:80]!r}")
            out[item[0]] = _decode(item[1], tensors, used, path)
        return out
    raise _bad(path, f"its namedtensor structure has a malformed node {str(node)[:80]!r}")
