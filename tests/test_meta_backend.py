"""The meta backend computes the shape and dtype NumPy would, for every array function, without data."""

import numpy as np
import pytest
from hypothesis import given, strategies as st

from namedtensor.backends.base import STANDARD
from namedtensor.backends.meta_backend import BINARY, META, REDUCTIONS, UNARY, DataDependentError, MetaArray

DTYPES = ("float32", "float64", "int64", "int32", "bool", "float16")


def meta(a):
    return MetaArray(a.shape, a.dtype) if isinstance(a, np.ndarray) else a


def same(real, fake):
    assert isinstance(fake, MetaArray)
    assert fake.shape == np.asarray(real).shape
    assert fake.dtype == np.asarray(real).dtype


def run_both(fn_meta, fn_np, *args, **kwargs):
    """The same shape and dtype as NumPy, or the same TypeError where NumPy has no loop for the dtypes
    (e.g. ``negative`` or ``subtract`` of bools)."""
    try:
        with np.errstate(all="ignore"):
            real = fn_np(*args, **kwargs)
    except TypeError as e:
        with pytest.raises(type(e)):
            fn_meta(*(meta(a) for a in args), **kwargs)
        return
    same(real, fn_meta(*(meta(a) for a in args), **kwargs))


shapes = st.lists(st.integers(0, 4), max_size=4).map(tuple)


def broadcastable(shape, draw):
    """A shape that broadcasts with ``shape``: some trailing dims kept, some set to 1, some dropped."""
    keep = draw(st.integers(0, len(shape)))
    tail = shape[len(shape) - keep:]
    return tuple(1 if draw(st.booleans()) else s for s in tail)


def test_every_standard_function_is_the_meta_backends_own():
    for name in STANDARD:
        assert getattr(META, name).__module__ == "namedtensor.backends.meta_backend", name


@given(st.data())
def test_unary_and_binary_follow_numpy(data):
    shape = data.draw(shapes)
    dtype = data.draw(st.sampled_from(DTYPES))
    x = np.ones(shape, dtype)
    name = data.draw(st.sampled_from(UNARY))
    run_both(getattr(META, name), getattr(np, name), x)
    other = np.ones(broadcastable(shape, data.draw), data.draw(st.sampled_from(DTYPES)))
    name = data.draw(st.sampled_from(BINARY))
    np_fn = getattr(np, {"pow": "power"}.get(name, name))
    run_both(getattr(META, name), np_fn, x, other)
    run_both(getattr(META, name), np_fn, other, x)
    scalar = data.draw(st.sampled_from([2, 2.5, True]))
    run_both(getattr(META, name), np_fn, x, scalar)
    run_both(getattr(META, name), np_fn, scalar, x)


@given(st.data())
def test_reductions_follow_numpy(data):
    shape = data.draw(st.lists(st.integers(1, 4), max_size=4).map(tuple))
    x = np.ones(shape, data.draw(st.sampled_from(("float32", "float64", "int32", "bool"))))
    name = data.draw(st.sampled_from(REDUCTIONS + ("argmax", "argmin")))
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), unique_by=lambda a: a % max(len(shape), 1),
                              max_size=len(shape))) if shape else []
    axis = None if not axes else (axes[0] if name.startswith("arg") else tuple(axes))
    keepdims = data.draw(st.booleans())
    run_both(getattr(META, name), getattr(np, name), x, axis=axis, keepdims=keepdims)


@given(st.data())
def test_indexing_follows_numpy(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=4).map(tuple))
    key = []
    for n in shape[:data.draw(st.integers(0, len(shape)))]:
        kind = data.draw(st.sampled_from(["int", "slice", "array", "none"]))
        if kind == "int":
            key.append(data.draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            key.append(slice(data.draw(st.integers(-5, 5)), data.draw(st.integers(-5, 5)),
                             data.draw(st.sampled_from([1, 2, -1]))))
        elif kind == "array":
            # any two of these shapes broadcast together, as NumPy needs of a key's index arrays
            key.append(np.zeros(data.draw(st.sampled_from([(2,), (1,), (2, 1)])), np.int64))
        else:
            key.append(None)
    if data.draw(st.booleans()):
        key.insert(data.draw(st.integers(0, len(key))), Ellipsis)
    x = np.zeros(shape)
    try:
        real = x[tuple(key)]
    except IndexError:  # e.g. an int meant for another dim once the ellipsis moved it
        with pytest.raises(IndexError):
            META.getitem(meta(x), tuple(key))
        return
    same(real, META.getitem(meta(x), tuple(key)))


@pytest.mark.parametrize("key", [
    (np.zeros(2, int), slice(None), np.zeros(2, int)),  # advanced indices apart: their dims go first
    (0, slice(None), np.zeros((2, 1), int)),  # an int counts as an advanced index then
    (slice(None), np.zeros(2, int), np.zeros((3, 1), int)),  # adjacent: in place
    (None, Ellipsis, np.zeros(2, int)),
])
def test_advanced_indexing_places_dims_like_numpy(key):
    x = np.zeros((2, 3, 4))
    same(x[key], META.getitem(meta(x), key))


@pytest.mark.parametrize("case", [
    ("matmul", (np.ones((2, 3, 4)), np.ones((4, 5)))),
    ("matmul", (np.ones(4), np.ones((2, 4, 5)))),
    ("matmul", (np.ones((3, 4)), np.ones(4))),
    ("reshape", (np.ones((2, 6)), (3, -1))),
    ("permute_dims", (np.ones((2, 3, 4)), (2, 0, 1))),
    ("moveaxis", (np.ones((2, 3, 4)), 0, -1)),
    ("moveaxis", (np.ones((2, 3, 4, 5)), (0, 1), (3, 0))),
    ("expand_dims", (np.ones((2, 3)), (0, 3))),
    ("squeeze", (np.ones((1, 3, 1)), 2)),
    ("broadcast_to", (np.ones((3, 1)), (2, 3, 4))),
    ("concat", ([np.ones((2, 3)), np.ones((4, 3), np.float32)], 0)),
    ("stack", ([np.ones((2, 3)), np.ones((2, 3))], 1)),
    ("flip", (np.ones((2, 3)), 1)),
    ("roll", (np.ones((2, 3)), 1, 0)),
    ("tile", (np.ones((2, 3)), (2, 1, 2))),
    ("repeat", (np.ones((2, 3)), 3, 1)),
    ("take", (np.ones((2, 5)), np.zeros((3, 2), np.int64), 1)),
    ("take_along_axis", (np.ones((2, 5)), np.zeros((2, 3), np.int64), 1)),
    ("where", (np.ones((2, 1), bool), np.ones(3, np.float32), 2.0)),
    ("clip", (np.ones((2, 3), np.int32), 0, 5)),
    ("astype", (np.ones((2, 3)), np.dtype("int32"))),
    ("sort", (np.ones((2, 3)),)),
    ("argsort", (np.ones((2, 3)),)),
    ("cumulative_sum", (np.ones((2, 3), np.int32),), {"axis": 1}),
    ("cumulative_prod", (np.ones((2, 3)),), {"axis": 0, "include_initial": True}),
    ("zeros", ((2, 3),), {"dtype": np.dtype("float32")}),
    ("full", ((2,), 7)),
    ("arange", (1, 10, 3)),
    ("arange", (0.0, 1.0, 0.25)),
    ("linspace", (0, 1, 7)),
    ("eye", (3, 4)),
    ("zeros_like", (np.ones((2, 3), np.int32),)),
    ("full_like", (np.ones((2, 3)), 1.0), {"dtype": np.dtype("float16")}),
    ("std", (np.ones((2, 3)),), {"axis": 1, "correction": 1}),
])
def test_structural_functions_follow_numpy(case):
    name, args, kwargs = case if len(case) == 3 else case + ({},)
    np_fn = getattr(np, {"permute_dims": "transpose", "concat": "concatenate", "cumulative_sum": "cumulative_sum"}
                    .get(name, name))
    if name == "std":
        kwargs = dict(kwargs)
        real = np.std(*args, axis=kwargs["axis"], ddof=kwargs.pop("correction"))
        same(real, META.std(*map(meta, args), axis=kwargs["axis"]))
        return
    real = np_fn(*args, **kwargs)
    margs = [[meta(a) for a in x] if isinstance(x, list) else meta(x) for x in args]
    same(real, getattr(META, name)(*margs, **kwargs))


def test_extras_follow_numpy():
    x = np.ones((2, 3, 4), np.float32)
    same(np.einsum("abc,cd->dba", x, np.ones((4, 5))), META.einsum("abc,cd->dba", meta(x), MetaArray((4, 5), "f8")))
    same(np.einsum("abc,cd", x, np.ones((4, 5))), META.einsum("abc,cd", meta(x), MetaArray((4, 5), "f8")))
    same(np.pad(x, ((1, 2), (0, 0), (3, 0))), META.pad(meta(x), ((1, 2), (0, 0), (3, 0)), 0))
    same(np.tril(x, 1), META.tril(meta(x), 1))
    same(x, META.scatter_add((2, 3, 4), None, (np.zeros(2, int),), meta(x)))
    assert META.erf(MetaArray((3,), "int64")).dtype == np.float64
    assert META.rand((2, 3), __import__("namedtensor").float16).shape == (2, 3)
    same(x, META.asarray(x))
    same(np.asarray([[1, 2]]), META.asarray([[1, 2]]))


def test_operators_on_meta_arrays():
    a, b = MetaArray((2, 1), "float32"), MetaArray((3,), "float32")
    assert (a + b).shape == (2, 3) and (1 / a).dtype == np.float32 and (-a).shape == (2, 1)
    assert (a @ MetaArray((1, 4), "float32")).shape == (2, 4)
    assert (a > 0).dtype == np.bool_ and a[0].shape == (1,) and len(a) == 2 and a.size == 2 and a.ndim == 2


@pytest.mark.parametrize("step, fragment", [
    (lambda a: bool(a), "bool()"), (lambda a: float(a), "float()"), (lambda a: np.asarray(a), "NumPy array"),
    (lambda a: META.item(a), "item()"), (lambda a: META.nonzero(a), "nonzero()"),
    (lambda a: META.to_numpy(a), "values"), (lambda a: a[MetaArray((2,), bool)], "boolean mask"),
    (lambda a: META.repeat(a, MetaArray((2,), "int64"), 0), "repeat"),
])
def test_value_dependent_steps_raise(step, fragment):
    with pytest.raises(DataDependentError, match="dry run") as e:
        step(MetaArray((2,), "float32"))
    assert fragment in str(e.value)


@pytest.mark.parametrize("step, error", [
    (lambda: META.matmul(MetaArray((2, 3), "f4"), MetaArray((4, 5), "f4")), ValueError),
    (lambda: META.reshape(MetaArray((2, 3), "f4"), (4, -1)), ValueError),
    (lambda: META.add(MetaArray((2, 3), "f4"), MetaArray((4,), "f4")), ValueError),
    (lambda: META.getitem(MetaArray((2, 3), "f4"), (0, 0, 0)), IndexError),
    (lambda: META.getitem(MetaArray((2, 3), "f4"), 5), IndexError),
    (lambda: META.squeeze(MetaArray((2, 3), "f4"), 0), ValueError),
    (lambda: META.concat([MetaArray((2, 3), "f4"), MetaArray((2, 4), "f4")], 0), ValueError),
    (lambda: META.sum(MetaArray((2, 3), "f4"), axis=2), np.exceptions.AxisError),
    (lambda: META.max(MetaArray((0, 3), "f4"), axis=0), ValueError),
    (lambda: META.add(MetaArray((2,), "f4"), MetaArray((2,), "f4"), out=MetaArray((2,), "f4")), TypeError),
])
def test_shape_errors_like_numpy(step, error):
    with pytest.raises(error):
        step()
