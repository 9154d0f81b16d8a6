"""namedtensor.data: TensorDataset, DataLoader (named batches, shuffling, collation), Generator."""

from collections import namedtuple

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import data
from namedtensor.data import DataLoader, Dataset, Generator, TensorDataset, collate

pytestmark = pytest.mark.usefixtures("backend")


def make(n=10):
    x = nt.tensor(np.arange(n * 3, dtype=np.float32).reshape(n, 3), names=("example", "feat"))
    y = nt.tensor(np.arange(n), names=("example",))
    return x, y


def order_of(loader):
    """The sample order of one epoch (the labels are the sample indices)."""
    return [i for _, y in loader for i in y.tolist()]


# ----------------------------------------------------------------------------- TensorDataset


def test_tensor_dataset_samples(backend):
    x, y = make()
    ds = TensorDataset(x, y)
    assert len(ds) == 10
    a, b = ds[4]
    assert a.names == ("feat",) and a.tolist() == [12.0, 13.0, 14.0]
    assert b.names == () and b.item() == 4


def test_tensor_dataset_dim_by_name_anywhere(backend):
    x, y = make(6)
    ds = TensorDataset(x.align_to("feat", "example"), y, dim="example")
    a, b = ds[5]
    assert len(ds) == 6 and a.names == ("feat",) and a.tolist() == [15.0, 16.0, 17.0] and b.item() == 5
    assert len(TensorDataset(x.align_to("feat", "example"), dim=-1)) == 6


def test_tensor_dataset_errors(backend):
    x, y = make()
    with pytest.raises(ValueError, match=r"different sizes along dim 'example': \[10, 4\]"):
        TensorDataset(x, y[:4], dim="example")
    with pytest.raises(nt.NamesError, match="TensorDataset: no dim named 'sample'"):
        TensorDataset(x, dim="sample")
    with pytest.raises(ValueError, match="at least one tensor"):
        TensorDataset()
    with pytest.raises(TypeError, match="argument 1 is a list, not a Tensor"):
        TensorDataset(x, [1, 2])
    with pytest.raises(ValueError, match="tensor 0 is 0-dim"):
        TensorDataset(nt.tensor(1.0))


def test_dataset_base_is_abstract():
    class Half(Dataset):
        def __len__(self):
            return 1

    with pytest.raises(NotImplementedError, match="Half must define __getitem__"):
        Half()[0]
    with pytest.raises(NotImplementedError, match="must define __len__"):
        len(Dataset())


# ----------------------------------------------------------------------------- batches of a TensorDataset


def test_batches_are_named_and_in_order(backend):
    x, y = make(10)
    loader = DataLoader(TensorDataset(x, y), batch_size=4)
    batches = list(loader)
    assert len(loader) == len(batches) == 3
    for k, (bx, by) in enumerate(batches):
        assert bx.names == ("batch", "feat") and by.names == ("batch",)
        np.testing.assert_array_equal(bx.numpy(), x.numpy()[4 * k: 4 * k + 4])
        assert by._B is backend
    assert [b.shape for b, _ in batches] == [(4, 3), (4, 3), (2, 3)]


def test_drop_last_and_len(backend):
    x, y = make(10)
    ds = TensorDataset(x, y)
    assert [len(DataLoader(ds, batch_size=b, drop_last=d)) for b in (1, 3, 5, 11) for d in (False, True)] == \
        [10, 10, 4, 3, 2, 2, 1, 0]
    assert order_of(DataLoader(ds, batch_size=3, drop_last=True)) == list(range(9))
    assert list(DataLoader(ds, batch_size=11, drop_last=True)) == []
    assert len(DataLoader(TensorDataset(nt.zeros(0, 2)), batch_size=2)) == 0


def test_sample_dim_not_first_is_moved_first_and_renamed(backend):
    x, y = make(5)
    xt = x.align_to("feat", "example")
    (bx, by), = DataLoader(TensorDataset(xt, y, dim="example"), batch_size=5, names="b")
    assert bx.names == ("b", "feat") and by.names == ("b",)
    np.testing.assert_array_equal(bx.numpy(), x.numpy())


def test_unnamed_batch_dim(backend):
    x, y = make(4)
    bx, by = next(iter(DataLoader(TensorDataset(x, y), batch_size=2, names=None)))
    assert bx.names == (None, "feat") and by.names == (None,)


def test_fast_path_matches_per_sample_collation_and_does_not_stack(backend, monkeypatch):
    x, y = make(7)
    ds = TensorDataset(x, y)
    slow = list(DataLoader(ds, batch_size=3, collate_fn=collate))
    monkeypatch.setattr(data, "stack", lambda *a, **k: pytest.fail("the TensorDataset path stacked samples"))
    fast = list(DataLoader(ds, batch_size=3))
    for (fx, fy), (sx, sy) in zip(fast, slow, strict=True):
        assert fx.names == sx.names and fy.names == sy.names
        np.testing.assert_array_equal(fx.numpy(), sx.numpy())
        np.testing.assert_array_equal(fy.numpy(), sy.numpy())


def test_batch_name_already_in_the_samples(backend):
    x = nt.zeros(4, 2, names=("example", "batch"))
    with pytest.raises(nt.NamesError, match="the batch dim name 'batch' is already a dim of tensor 0 of the dataset"):
        DataLoader(TensorDataset(x), batch_size=2)
    with pytest.raises(nt.NamesError, match="already a dim of sample"):
        next(iter(DataLoader([nt.zeros(2, names=("batch",))] * 2, batch_size=2)))
    assert next(iter(DataLoader(TensorDataset(x), names="example")))[0].names == ("example", "batch")


def test_subclass_with_own_getitem_uses_it(backend):
    class Doubled(TensorDataset):
        def __getitem__(self, i):
            (x,) = super().__getitem__(i)
            return x * 2

    b = next(iter(DataLoader(Doubled(nt.arange(4.0, names=("n",))), batch_size=4)))
    assert b.names == ("batch",) and b.tolist() == [0.0, 2.0, 4.0, 6.0]


# ----------------------------------------------------------------------------- shuffling


def test_shuffle_is_seeded_per_loader_and_new_each_epoch(backend):
    x, y = make(20)
    ds = TensorDataset(x, y)
    a = DataLoader(ds, batch_size=3, shuffle=True, seed=7)
    epoch1, epoch2 = order_of(a), order_of(a)
    assert sorted(epoch1) == sorted(epoch2) == list(range(20))
    assert epoch1 != epoch2 and epoch1 != list(range(20))
    nt.manual_seed(123)  # the global stream does not touch the loader's generator
    b = DataLoader(ds, batch_size=5, shuffle=True, seed=7)
    nt.randn(10)
    assert order_of(b) == epoch1 and order_of(b) == epoch2
    assert order_of(DataLoader(ds, batch_size=4, shuffle=True, seed=8)) != epoch1
    assert order_of(DataLoader(ds, batch_size=4, shuffle=True, generator=Generator(7))) == epoch1


def test_shuffled_batches_pair_the_tensors(backend):
    x, y = make(9)
    for bx, by in DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, seed=0):
        np.testing.assert_array_equal(bx.numpy(), x.numpy()[by.numpy()])


def test_generator(backend):
    g = Generator(5)
    p1 = g.randperm(10)
    assert sorted(p1) == list(range(10)) and g.initial_seed() == 5
    assert g.randperm(10) != p1
    assert g.manual_seed(5).randperm(10) == p1
    assert sorted(Generator().randperm(6)) == list(range(6)) and Generator().initial_seed() is None
    with pytest.raises(TypeError, match="the seed must be an int or None, got float"):
        Generator(1.5)


def test_generator_like_object(backend):
    class Reverse:
        def randperm(self, n):
            return list(range(n))[::-1]

    x, y = make(5)
    assert order_of(DataLoader(TensorDataset(x, y), batch_size=2, shuffle=True, generator=Reverse())) == [4, 3, 2, 1, 0]

    class Short:
        def randperm(self, n):
            return [0]

    with pytest.raises(ValueError, match=r"randperm\(5\) returned 1 indices"):
        list(DataLoader(TensorDataset(x, y), shuffle=True, generator=Short()))


# ----------------------------------------------------------------------------- collation of other datasets


def test_collate_structures(backend):
    Pair = namedtuple("Pair", "a b")
    samples = [
        {"x": nt.full((2,), float(i), names=("feat",)), "label": i, "w": 0.5 * i, "ok": i % 2 == 0,
         "pair": Pair(nt.tensor(i), [i, "s"]), "text": f"t{i}"}
        for i in range(5)
    ]
    batches = list(DataLoader(samples, batch_size=2))
    assert len(batches) == 3
    b = batches[0]
    assert list(b) == ["x", "label", "w", "ok", "pair", "text"]
    assert b["x"].names == ("batch", "feat") and b["x"].tolist() == [[0.0, 0.0], [1.0, 1.0]]
    assert b["label"].dtype == nt.int64 and b["label"].names == ("batch",) and b["label"].tolist() == [0, 1]
    assert b["w"].dtype == nt.float32 and b["w"].tolist() == [0.0, 0.5]
    assert b["ok"].dtype == nt.bool_ and b["ok"].tolist() == [True, False]
    assert isinstance(b["pair"], Pair) and b["pair"].a.names == ("batch",) and b["pair"].a.tolist() == [0, 1]
    assert isinstance(b["pair"].b, list) and b["pair"].b[0].tolist() == [0, 1] and b["pair"].b[1] == ["s", "s"]
    assert b["text"] == ["t0", "t1"]
    assert batches[2]["x"].shape == (1, 2)


def test_collate_unnamed_and_tuples(backend):
    samples = [(nt.ones(3), 1.0), (nt.zeros(3), 2.0)]
    (x, w), = DataLoader(samples, batch_size=2, names=None)
    assert x.names == (None, None) and w.names == (None,) and w.tolist() == [1.0, 2.0]


def test_custom_dataset_and_collate_fn(backend):
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return i * i

    assert [b.tolist() for b in DataLoader(Squares(), batch_size=2)] == [[0, 1], [4, 9], [16]]
    assert list(DataLoader(Squares(), batch_size=2, collate_fn=sum)) == [1, 13, 16]


def test_collate_errors(backend):
    with pytest.raises(ValueError, match="the samples' dicts at sample have different keys"):
        next(iter(DataLoader([{"a": 1}, {"b": 2}], batch_size=2)))
    with pytest.raises(ValueError, match=r"sequences at sample\[1\] have different lengths"):
        next(iter(DataLoader([(1, (2, 3)), (1, (2,))], batch_size=2)))
    with pytest.raises(TypeError, match=r"sample\['x'\] is a Tensor in some samples and not in others"):
        next(iter(DataLoader([{"x": nt.ones(1)}, {"x": 1}], batch_size=2)))
    with pytest.raises(TypeError, match=r"cannot collate sample\[0\] of type object.*Pass collate_fn="):
        next(iter(DataLoader([(object(),)], batch_size=1)))
    with pytest.raises(ValueError, match="stack: all tensors must have the same shape"):
        next(iter(DataLoader([nt.ones(2), nt.ones(3)], batch_size=2)))


def test_loader_argument_errors(backend):
    ds = TensorDataset(nt.ones(4))
    for kwargs, exc, fragment in [
        ({"batch_size": 0}, ValueError, "batch_size must be at least 1, got 0"),
        ({"batch_size": 2.0}, TypeError, "batch_size must be an int, got float"),
        ({"batch_size": True}, TypeError, "batch_size must be an int, got bool"),
        ({"shuffle": "yes"}, TypeError, "shuffle must be True or False"),
        ({"drop_last": 1}, TypeError, "drop_last must be True or False"),
        ({"names": "1x"}, nt.NamesError, "invalid dim name '1x'"),
        ({"collate_fn": 3}, TypeError, "collate_fn must be callable"),
        ({"seed": 1, "generator": Generator(1)}, ValueError, "give seed= or generator=, not both"),
        ({"generator": 42}, TypeError, r"generator must have a randperm\(n\) method"),
        ({"seed": "a"}, TypeError, "the seed must be an int or None, got str"),
    ]:
        with pytest.raises(exc, match=fragment):
            DataLoader(ds, **kwargs)
    with pytest.raises(TypeError, match="the dataset must define __len__ and __getitem__, got a int"):
        DataLoader(5)
