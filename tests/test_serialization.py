"""nt.save / nt.load: round trips, the safetensors layout, atomic writes, and damaged files."""

import json
import math
import os
import re
import zlib

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

import namedtensor as nt
from namedtensor import serialization
from namedtensor.serialization import load, save

pytestmark = pytest.mark.usefixtures("backend")


def dtypes(backend):
    # array-api-strict has no float16
    return [d for d in (nt.bool_, nt.int32, nt.int64, nt.float16, nt.float32, nt.float64)
            if backend.name == "numpy" or d is not nt.float16]


def same(a, b):
    """Equal structure, key types, container types, names, dtypes, shapes and values."""
    if isinstance(a, nt.Tensor):
        return (isinstance(b, nt.Tensor) and a.names == b.names and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a.detach().numpy(), b.numpy(), equal_nan=a.dtype.kind == "f"))
    if isinstance(a, dict):
        return (type(b) is dict and [(type(k), k) for k in a] == [(type(k), k) for k in b]
                and all(same(a[k], b[k]) for k in a))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def round_trip(obj, tmp_path):
    p = tmp_path / "ckpt.safetensors"
    save(obj, p)
    return load(p)


# ----------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (4,), (2, 3, 5)])
def test_tensor_round_trip_keeps_names_dtype_shape(backend, tmp_path, shape, rng):
    for dt in dtypes(backend):
        data = rng.standard_normal(shape) * 10
        t = nt.tensor(data, dtype=dt, names=tuple(["a", None, "c"][: len(shape)]))
        out = round_trip(t, tmp_path)
        assert same(t, out), (dt, shape)
        assert out.device == "cpu" and out._B is backend


def test_state_dict_keys_are_readable_and_arrays_readable_by_safetensors(tmp_path, rng):
    sd = {
        "embed.weight": nt.tensor(rng.standard_normal((5, 4)), names=("vocab", "embed")),
        "blocks.0.norm.weight": nt.ones(4, names=("embed",)),
        "blocks.0.attn.bias": nt.zeros(4),
    }
    out = round_trip(sd, tmp_path)
    assert same(sd, out)
    arrays = load_file(tmp_path / "ckpt.safetensors")
    assert set(arrays) == set(sd)
    for k, t in sd.items():
        np.testing.assert_array_equal(arrays[k], t.numpy())


def test_optimizer_like_structure_round_trips_exactly(tmp_path):
    p = nt.randn(3, 2, names=("out", "in"), requires_grad=True)
    opt = {
        "state": {0: {"step": nt.tensor(7), "exp_avg": nt.zeros(3, 2, names=("out", "in"))},
                  1: {"step": nt.tensor(7), "momentum_buffer": None}},
        "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.0,
                          "amsgrad": False, "params": [0, 1], "name": "main", "max_lr": float("inf"),
                          "warm": float("nan"), "floor": float("-inf"), "big": 2**70}],
    }
    out = round_trip({"model": {"w": p}, "optimizer": opt, "epoch": 3, "tag": ("a", ["b", None])}, tmp_path)
    assert same(out["optimizer"], opt)
    assert list(out["optimizer"]["state"]) == [0, 1]  # int keys stay int
    assert out["epoch"] == 3 and out["tag"] == ("a", ["b", None])
    w = out["model"]["w"]
    assert not w.requires_grad and w.names == ("out", "in")  # saved detached
    np.testing.assert_array_equal(w.numpy(), p.detach().numpy())


def test_mixed_key_types_and_order_round_trip(tmp_path):
    obj = {"b": nt.ones(1), 2: nt.zeros(1), "a": [], 0: {}, "t": ()}
    out = round_trip(obj, tmp_path)
    assert same(obj, out) and list(out) == ["b", 2, "a", 0, "t"]


def test_non_contiguous_tensor_is_saved_in_logical_order(tmp_path):
    t = nt.arange(6.0).reshape(2, 3, names=("a", "b")).transpose("a", "b")
    out = round_trip({"t": t}, tmp_path)["t"]
    assert out.names == ("b", "a")
    np.testing.assert_array_equal(out.numpy(), np.arange(6.0).reshape(2, 3).T)


def test_tied_tensors_load_as_one_object(tmp_path):
    w = nt.randn(4, 3, names=("vocab", "embed"))
    out = round_trip({"embed.weight": w, "head.weight": w}, tmp_path)
    assert out["embed.weight"] is out["head.weight"]
    assert set(load_file(tmp_path / "ckpt.safetensors")) == {"embed.weight"}


def test_colliding_keys_are_escaped_as_json_paths(tmp_path):
    x, y, z = nt.ones(1), nt.zeros(1), nt.full((1,), 2.0)
    obj = {"a": {"b": x}, "a.b": y, 0: z, "0": x + 1}
    out = round_trip(obj, tmp_path)
    assert same(obj, out)
    assert set(load_file(tmp_path / "ckpt.safetensors")) == {'["a","b"]', '["a.b"]', "[0]", '["0"]'}


def test_reserved_safetensors_key_is_escaped(tmp_path):
    obj = {"__metadata__": nt.ones(2)}
    assert same(obj, round_trip(obj, tmp_path))


def test_bare_tensor_key_and_empty_structures(tmp_path):
    round_trip(nt.ones(2, names=("x",)), tmp_path)
    assert set(load_file(tmp_path / "ckpt.safetensors")) == {"tensor"}
    for obj in ({}, [], (), {"a": {}}, [1, "x", None]):
        assert same(obj, round_trip(obj, tmp_path))


def test_subclasses_load_as_plain_containers(tmp_path):
    from collections import OrderedDict

    out = round_trip(OrderedDict(w=nt.ones(1)), tmp_path)
    assert type(out) is dict and list(out) == ["w"]


def test_metadata_document_layout(tmp_path):
    save({"w": nt.ones(2, 3, names=("a", None))}, tmp_path / "c.safetensors")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "c.safetensors"), framework="np") as f:
        meta = f.metadata()
    doc = json.loads(meta["namedtensor"])
    assert doc["format"] == "namedtensor" and doc["version"] == 2
    assert doc["names"] == {"w": ["a", None]}
    assert doc["dtypes"] == {"w": "F32"} and doc["shapes"] == {"w": [2, 3]}
    assert doc["structure"] == {"dict": [["w", {"tensor": "w"}]]}
    assert meta["namedtensor_crc32"] == f"{zlib.crc32(meta['namedtensor'].encode()):08x}"


def test_foreign_safetensors_file_loads_as_flat_unnamed_dict(backend, tmp_path):
    p = tmp_path / "foreign.safetensors"
    save_file({"z.w": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.array([1, 2], dtype=np.int64)}, str(p))
    out = load(p)
    assert list(out) == ["a", "z.w"]
    assert out["z.w"].names == (None, None) and out["z.w"].dtype == nt.float32 and out["z.w"]._B is backend
    np.testing.assert_array_equal(out["a"].numpy(), [1, 2])


def test_loaded_tensors_are_writable_and_independent_of_the_file(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"w": nt.zeros(3)}, p)
    w = load(p)["w"]
    p.unlink()
    w.add_(1.0)
    np.testing.assert_array_equal(w.numpy(), [1.0, 1.0, 1.0])


def test_float16_on_a_backend_without_it(backend, tmp_path):
    if backend.name == "numpy":
        return  # NumPy has float16: covered by the round trips
    p = tmp_path / "half.safetensors"
    save_file({"h": np.ones(2, dtype=np.float16)}, str(p))
    with pytest.raises(TypeError, match="load: tensor 'h' .*float16"):
        load(p)


@pytest.mark.usefixtures("no_cupy")
def test_device(tmp_path):
    save({"w": nt.ones(2)}, tmp_path / "c.safetensors")
    assert load(tmp_path / "c.safetensors", device="cpu")["w"].device == "cpu"
    with pytest.raises((RuntimeError, NotImplementedError), match="cuda"):
        load(tmp_path / "c.safetensors", device="cuda")
    with pytest.raises(ValueError, match="unknown device"):
        load(tmp_path / "c.safetensors", device="tpu")


# ----------------------------------------------------------------------------- what cannot be saved


@pytest.mark.parametrize(
    "obj, exc, fragment",
    [
        ({"a": {"b": object()}}, TypeError, r"cannot save obj\['a'\]\['b'\] of type object"),
        ([1, {2.5: nt.ones(1)}], TypeError, r"the key 2.5 in obj\[1\] is a float; checkpoint dicts take str or int"),
        ({True: 1}, TypeError, "the key True in obj is a bool"),
        ({"s": {1, 2}}, TypeError, r"cannot save obj\['s'\] of type set"),
        (b"raw", TypeError, "cannot save obj of type bytes"),
    ],
)
def test_unsupported_objects_raise_before_touching_the_file(tmp_path, obj, exc, fragment):
    p = tmp_path / "c.safetensors"
    save({"old": nt.ones(1)}, p)
    before = p.read_bytes()
    with pytest.raises(exc, match=fragment):
        save(obj, p)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["c.safetensors"]


def test_self_containing_object(tmp_path):
    loop = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(ValueError, match=r"obj\['a'\]\[0\] contains itself"):
        save(loop, tmp_path / "c.safetensors")


# ----------------------------------------------------------------------------- atomic writes


def _failing(monkeypatch, target, name):
    def boom(*args, **kwargs):
        # the temporary is being written next to the checkpoint at this point
        assert any(f.endswith(".tmp") for f in os.listdir(target))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(serialization.os, name, boom)


@pytest.mark.parametrize("fail_at", ["fsync", "replace"])
def test_a_failed_save_leaves_the_old_checkpoint_and_no_temporary(tmp_path, monkeypatch, fail_at):
    p = tmp_path / "c.safetensors"
    old = {"w": nt.arange(3.0, names=("x",))}
    save(old, p)
    _failing(monkeypatch, tmp_path, fail_at)
    with pytest.raises(OSError, match="No space left"):
        save({"w": nt.zeros(1000, names=("x",))}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c.safetensors"]
    assert same(old, load(p))


def test_a_save_interrupted_mid_write_leaves_the_old_checkpoint(tmp_path, monkeypatch):
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(2)}, p)
    real_fdopen = os.fdopen

    class HalfWriter:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[: len(data) // 2])
            raise KeyboardInterrupt  # not even an Exception: the cleanup still runs

    monkeypatch.setattr(serialization.os, "fdopen", lambda fd, mode: HalfWriter(real_fdopen(fd, mode)))
    with pytest.raises(KeyboardInterrupt):
        save({"w": nt.zeros(500)}, p)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["c.safetensors"]
    np.testing.assert_array_equal(load(p)["w"].numpy(), [1.0, 1.0])


def test_a_failed_first_save_leaves_nothing(tmp_path, monkeypatch):
    _failing(monkeypatch, tmp_path, "fsync")
    with pytest.raises(OSError):
        save({"w": nt.ones(2)}, tmp_path / "c.safetensors")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_save_overwrites_and_syncs(tmp_path, monkeypatch):
    calls = []
    real = os.fsync
    monkeypatch.setattr(serialization.os, "fsync", lambda fd: (calls.append(fd), real(fd))[1])
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(2)}, p)
    save({"w": nt.zeros(3)}, str(p))
    assert len(calls) >= 2  # the file, and the directory where the platform allows it
    np.testing.assert_array_equal(load(p)["w"].numpy(), [0.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- damaged and foreign files


def _write_raw(p, header: dict, data: bytes = b"") -> None:
    h = json.dumps(header).encode()
    p.write_bytes(len(h).to_bytes(8, "little") + h + data)


def _doc_meta(names, structure, crc32):
    text = json.dumps({"format": "namedtensor", "version": 1, "names": names, "crc32": crc32,
                       "structure": structure})
    return {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}


def _expect_bad(p, fragment):
    with pytest.raises(ValueError, match=re.escape(repr(str(p))) + " is not a valid checkpoint: .*" + fragment):
        load(p)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.safetensors"):
        load(tmp_path / "nope.safetensors")


def test_empty_short_and_random_files(tmp_path):
    p = tmp_path / "x.safetensors"
    p.write_bytes(b"")
    _expect_bad(p, "the file is empty")
    p.write_bytes(b"\x01\x02\x03")
    _expect_bad(p, r"too short \(3 bytes\)")
    p.write_bytes(np.random.default_rng(1).bytes(4096))
    _expect_bad(p, "truncated or not a safetensors file")
    p.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00PK\x03\x04x")  # a short header of junk
    _expect_bad(p, "its header is not valid JSON")


def test_truncated_files(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(8, 8), "b": nt.ones(8)}, p)
    raw = p.read_bytes()
    p.write_bytes(raw[:-10])
    _expect_bad(p, "lie past the end of the file's .* data bytes; the file is truncated")
    p.write_bytes(raw[:40])
    _expect_bad(p, "its header length field says")
    for n in range(0, len(raw), 7):  # every cut is refused
        p.write_bytes(raw[:n])
        with pytest.raises(ValueError, match="is not a valid checkpoint"):
            load(p)


def test_bad_header_length_and_header_shape(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(2)}, p)
    raw = p.read_bytes()
    p.write_bytes((2**40).to_bytes(8, "little") + raw[8:])
    _expect_bad(p, "header length field says 1099511627776 bytes")
    _write_raw(p, ["not", "an", "object"])
    _expect_bad(p, "its header is not a JSON object")
    _write_raw(p, {"w": {"dtype": "F32", "shape": [1]}}, b"\0" * 4)
    _expect_bad(p, "the header entry of tensor 'w' lacks dtype, shape or data_offsets")
    _write_raw(p, {"__metadata__": {"k": 1}})
    _expect_bad(p, "its __metadata__ is not a map of strings")


@pytest.mark.parametrize(
    "entry, fragment",
    [
        ({"dtype": "F99", "shape": [1], "data_offsets": [0, 4]}, "tensor 'w' has an unknown dtype 'F99'"),
        ({"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}, "tensor 'w' has dtype BF16, which namedtensor does not"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, r"tensor 'w' has an invalid shape \[-1\]"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}, r"tensor 'w' has invalid data offsets \[4, 0\]"),
        ({"dtype": "F32", "shape": [1], "data_offsets": [0, 400]}, "bytes 0 to 400.* lie past the end"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}, r"4 data bytes, but dtype F32 and shape \[2\] need 8"),
    ],
)
def test_corrupted_header_entries(tmp_path, entry, fragment):
    p = tmp_path / "c.safetensors"
    _write_raw(p, {"w": entry}, b"\0" * 4)
    _expect_bad(p, fragment)


def test_gaps_in_the_data_are_reported_through_safetensors(tmp_path):
    p = tmp_path / "c.safetensors"
    _write_raw(p, {"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8)
    _expect_bad(p, r"safetensors cannot read it \(")


def test_corrupted_namedtensor_metadata(tmp_path):
    p = tmp_path / "c.safetensors"
    w = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    data = np.ones(2, np.float32).tobytes()
    good = {"w": zlib.crc32(data)}
    cases = [
        ({"namedtensor": "{}"}, "has 'namedtensor' or 'namedtensor_crc32' but not both"),
        ({"namedtensor": "{}", "namedtensor_crc32": "00000000"}, "fails its checksum"),
        (_doc_meta({"w": ["a", "b"]}, {"tensor": "w"}, good), r"names of tensor 'w' in the metadata are invalid"),
        (_doc_meta({"w": ["1x"]}, {"tensor": "w"}, good), "invalid dim name '1x'"),
        (_doc_meta({"v": ["a"]}, {"tensor": "w"}, good), "does not list the names of exactly the file's tensors"),
        (_doc_meta({"w": ["a"]}, {"tensor": "v"}, good), "refers to a tensor 'v' that the file lacks"),
        (_doc_meta({"w": ["a"]}, {"list": []}, good), r"the metadata does not place the tensors \['w'\]"),
        (_doc_meta({"w": ["a"]}, {"set": []}, good), "malformed node"),
        (_doc_meta({"w": ["a"]}, {"dict": [[1.5, {"tensor": "w"}]]}, good), "malformed dict item"),
        (_doc_meta({"w": ["a"]}, {"tensor": "w"}, {"w": 1}), "the data of tensor 'w' fail their checksum"),
    ]
    for meta, fragment in cases:
        _write_raw(p, {"__metadata__": meta, "w": w}, data)
        _expect_bad(p, fragment)
    _write_raw(p, {"__metadata__": _doc_meta({"w": ["a"]}, {"tensor": "w"}, good), "w": w}, data)
    assert load(p).names == ("a",)  # the hand-made file itself is valid


def test_newer_format_version(tmp_path):
    text = json.dumps({"format": "namedtensor", "version": 3, "names": {}, "crc32": {}, "structure": {"list": []}})
    p = tmp_path / "c.safetensors"
    _write_raw(p, {"__metadata__": {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}})
    with pytest.raises(ValueError, match="written by a newer namedtensor \\(checkpoint format version 3\\)"):
        load(p)


def test_every_flipped_byte_is_detected(tmp_path):
    """No single corrupted byte loads as something else: the checksums cover data and names."""
    p = tmp_path / "c.safetensors"
    obj = {"w": nt.randn(2, 3, names=("a", "b")), "s": {0: nt.tensor([1, 2])}, "m": nt.tensor([True], names=("k",))}
    save(obj, p)
    raw = p.read_bytes()
    rng = np.random.default_rng(0)
    for i in range(len(raw)):
        b = bytearray(raw)
        b[i] ^= 1 << int(rng.integers(8))
        p.write_bytes(bytes(b))
        try:
            out = load(p)
        except ValueError:
            continue
        assert same(obj, out), f"a flipped byte at offset {i} loaded as different tensors"


# ----------------------------------------------------------------------------- every byte that decides a tensor


def _edit(p, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length: the header length field stays right) in the file."""
    raw = p.read_bytes()
    assert raw.count(old) == 1 and len(old) == len(new)
    p.write_bytes(raw.replace(old, new))


def test_header_edits_of_shape_and_dtype_are_caught(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"w": nt.randn(2, 3, names=("a", "b"))}, p)
    raw = p.read_bytes()
    _edit(p, b'"shape":[2,3]', b'"shape":[3,2]')
    _expect_bad(p, r"the header gives tensor 'w' shape \[3, 2\], but its checksummed metadata records \[2, 3\]")
    p.write_bytes(raw)
    _edit(p, b'"dtype":"F32"', b'"dtype":"I32"')
    _expect_bad(p, "the header gives tensor 'w' dtype 'I32', but its checksummed metadata records 'F32'")


def test_every_dtype_and_shape_is_recorded(backend, tmp_path):
    obj = {str(i): nt.zeros((i, 2)[: i % 3], dtype=dt) for i, dt in enumerate(dtypes(backend))}
    save(obj, tmp_path / "c.safetensors")
    from safetensors import safe_open

    with safe_open(str(tmp_path / "c.safetensors"), framework="np") as f:
        doc = json.loads(f.metadata()["namedtensor"])
    raw = (tmp_path / "c.safetensors").read_bytes()
    header = json.loads(raw[8: 8 + int.from_bytes(raw[:8], "little")])
    assert doc["dtypes"] == {k: header[k]["dtype"] for k in obj}
    assert doc["shapes"] == {k: header[k]["shape"] for k in obj} == {k: list(t.shape) for k, t in obj.items()}


def _write_text(p, header: str, data: bytes = b"") -> None:
    h = header.encode()
    p.write_bytes(len(h).to_bytes(8, "little") + h + data)


def test_duplicate_keys_are_refused(tmp_path):
    p = tmp_path / "c.safetensors"
    entry = '{"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}'
    # a plain safetensors file, and one of ours, with a tensor listed twice
    _write_text(p, f'{{"w": {entry}, "w": {entry}}}', b"\0" * 4)
    _expect_bad(p, "its header has the key 'w' twice")
    meta = json.dumps(_doc_meta({"w": ["a"]}, {"tensor": "w"}, {"w": zlib.crc32(b"\0" * 4)}))
    _write_text(p, f'{{"__metadata__": {meta}, "w": {entry}, "w": {entry}}}', b"\0" * 4)
    _expect_bad(p, "its header has the key 'w' twice")
    # a key twice inside the entry, inside __metadata__, and inside the checksummed document
    _write_text(p, '{"w": {"dtype": "F32", "dtype": "I32", "shape": [1], "data_offsets": [0, 4]}}', b"\0" * 4)
    _expect_bad(p, "its header has the key 'dtype' twice")
    _write_text(p, '{"__metadata__": {"k": "a", "k": "b"}}')
    _expect_bad(p, "its header has the key 'k' twice")
    text = '{"format": "namedtensor", "version": 1, "names": {}, "names": {}, "crc32": {}, "structure": {"list": []}}'
    _write_raw(p, {"__metadata__": {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}})
    _expect_bad(p, "its namedtensor metadata has the key 'names' twice")


def test_format_version_1_files_still_load(tmp_path):
    """Files of format 1 record no dtypes and shapes; the rest of them is checked as before."""
    p = tmp_path / "c.safetensors"
    data = np.arange(6, dtype=np.float32).tobytes()
    meta = _doc_meta({"w": ["a", "b"]}, {"dict": [["w", {"tensor": "w"}]]}, {"w": zlib.crc32(data)})
    _write_raw(p, {"__metadata__": meta, "w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}}, data)
    out = load(p)
    assert out["w"].names == ("a", "b") and out["w"].shape == (2, 3)
    np.testing.assert_array_equal(out["w"].numpy(), np.arange(6).reshape(2, 3))


def test_format_version_2_needs_its_dtypes_and_shapes(tmp_path):
    p = tmp_path / "c.safetensors"
    data = np.ones(2, np.float32).tobytes()
    for field in ("dtypes", "shapes"):
        doc = {"format": "namedtensor", "version": 2, "names": {"w": [None]}, "crc32": {"w": zlib.crc32(data)},
               "dtypes": {"w": "F32"}, "shapes": {"w": [2]}, "structure": {"tensor": "w"}}
        del doc[field]
        text = json.dumps(doc)
        meta = {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}
        _write_raw(p, {"__metadata__": meta, "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, data)
        _expect_bad(p, f"does not list the {field} of exactly the file's tensors")


def test_a_plain_safetensors_file_with_other_metadata_loads_unnamed(tmp_path):
    p = tmp_path / "hf.safetensors"
    save_file({"w": np.ones((2, 2), np.float32)}, str(p), metadata={"format": "pt"})
    out = load(p)
    assert list(out) == ["w"] and out["w"].names == (None, None)


# ----------------------------------------------------------------------------- crafted files


def test_deeply_nested_header_is_refused(tmp_path):
    p = tmp_path / "c.safetensors"
    _write_text(p, "[" * 50_000)
    _expect_bad(p, "its header nests 50000 levels deep, more than the 8 allowed")
    _write_text(p, '{"w": ' + '{"x": ' * 20 + "1" + "}" * 21)
    _expect_bad(p, "its header nests 21 levels deep")


def test_brackets_inside_strings_do_not_count_as_nesting(tmp_path):
    p = tmp_path / "c.safetensors"
    save({"[[[[[[[[[[": nt.ones(1, names=("x",)), '"\\{{{{{{{{{{': 1}, p)
    out = load(p)
    assert out["[[[[[[[[[["].names == ("x",) and out['"\\{{{{{{{{{{'] == 1


def _deep_doc(p, depth: int) -> None:
    """A document (with a correct checksum) whose structure nests ``depth`` lists."""
    structure = '{"list": [' * depth + "]}" * depth
    text = '{"format": "namedtensor", "version": 1, "names": {}, "crc32": {}, "structure": ' + structure + "}"
    _write_raw(p, {"__metadata__": {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}})


def test_deeply_nested_metadata_is_refused(tmp_path):
    p = tmp_path / "c.safetensors"
    _deep_doc(p, 800)
    _expect_bad(p, "its namedtensor metadata nests 1601 levels deep, more than the 302 allowed")
    _deep_doc(p, 150)  # within the limit: the deepest checkpoint save writes nests dicts 100 deep
    out = load(p)
    for _ in range(149):
        (out,) = out
    assert out == []


def _nested(depth: int, leaf):
    for i in range(depth):
        leaf = {"k": leaf} if i % 3 == 0 else [leaf] if i % 3 == 1 else (leaf,)
    return leaf


def test_nesting_limit_of_save(tmp_path):
    ok = _nested(99, nt.ones(1, names=("x",)))
    assert same({"top": ok}, round_trip({"top": ok}, tmp_path))  # 100 levels
    dicts = {"w": nt.ones(1)}
    for _ in range(99):
        dicts = {"d": dicts}
    assert same(dicts, round_trip(dicts, tmp_path))
    for depth in (101, 500, 5000):
        with pytest.raises(ValueError, match=r"save: obj nests dicts, lists and tuples more than 100 deep "
                                             r"\(at obj(\['k'\]|\[0\]){5}\.\.\.\)"):
            save(_nested(depth, 1.0), tmp_path / "deep.safetensors")
    assert not (tmp_path / "deep.safetensors").exists()


def test_too_many_dims_and_too_large_shapes(tmp_path):
    p = tmp_path / "c.safetensors"
    _write_raw(p, {"w": {"dtype": "F32", "shape": [1] * 65, "data_offsets": [0, 4]}}, b"\0" * 4)
    _expect_bad(p, "tensor 'w' has 65 dims, more than the 64 NumPy supports")
    for shape in ([0, 2**63], [2**40, 0, 2**40], [0, 2**64]):
        _write_raw(p, {"w": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}})
        _expect_bad(p, re.escape(f"tensor 'w' has the shape {shape}, too large for an array"))
    _write_raw(p, {"w": {"dtype": "F32", "shape": [1] * 64, "data_offsets": [0, 4]}}, b"\0" * 4)
    assert load(p)["w"].ndim == 64


def test_header_size_limit(tmp_path, monkeypatch):
    p = tmp_path / "c.safetensors"
    save({"w": nt.ones(2)}, p)
    n = int.from_bytes(p.read_bytes()[:8], "little")
    monkeypatch.setattr(serialization, "_HEADER_LIMIT", n - 1)
    _expect_bad(p, f"its header is {n} bytes, more than the {n - 1} allowed")


def test_json_constants_are_not_json(tmp_path):
    p = tmp_path / "c.safetensors"
    text = '{"format": "namedtensor", "version": 1, "names": {}, "crc32": {}, "structure": {"value": NaN}}'
    _write_raw(p, {"__metadata__": {"namedtensor": text, "namedtensor_crc32": f"{zlib.crc32(text.encode()):08x}"}})
    _expect_bad(p, r"its namedtensor metadata is not valid JSON \(NaN is not JSON")


def test_lone_surrogates_in_the_metadata_are_an_error_not_a_crash(tmp_path):
    p = tmp_path / "c.safetensors"
    lone = "\ud800"
    crc = f"{zlib.crc32(lone.encode('utf-8', 'surrogatepass')):08x}"
    _write_raw(p, {"__metadata__": {"namedtensor": lone, "namedtensor_crc32": crc}})
    _expect_bad(p, r"its namedtensor metadata is not valid JSON")
    _write_raw(p, {"__metadata__": {"namedtensor": "\ud800", "namedtensor_crc32": "00000000"}})
    _expect_bad(p, "its namedtensor metadata fails its checksum")
