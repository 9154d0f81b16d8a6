"""nn.Module, nn.Parameter and the containers: registration, traversal, modes, state dicts, repr."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.testing import assert_close


class Affine(nn.Module):
    """A small module with a parameter, a bias and a buffer, named like a real layer."""

    def __init__(self, n_in=3, n_out=2, in_dim="embed", out_dim="hidden"):
        super().__init__()
        self.weight = nn.Parameter(nt.randn(n_out, n_in, names=(out_dim, in_dim)))
        self.bias = nn.Parameter(nt.zeros(n_out, names=(out_dim,)))
        self.register_buffer("scale", nt.ones(n_out, names=(out_dim,)))
        self.in_dim = in_dim

    def forward(self, x):
        return (nt.dot(x, self.weight, over=self.in_dim) + self.bias) * self.scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = Affine(3, 4, "embed", "hidden")
        self.dec = Affine(4, 3, "hidden", "embed")
        self.register_buffer("steps", nt.zeros((), dtype=nt.int64))
        self.register_buffer("cache", nt.zeros(2, names=("x",)), persistent=False)

    def forward(self, x):
        return self.dec(self.enc(x))


# ----------------------------------------------------------------------------- Parameter
def test_parameter_is_a_leaf_that_requires_grad_and_ops_give_tensors():
    p = nn.Parameter(nt.zeros(2, 3, names=("a", "b")))
    assert isinstance(p, nt.Tensor) and p.requires_grad and p.is_leaf
    assert p.names == ("a", "b")
    for out in (p * 2, p + p, p.sum("a"), p.detach(), p.rename(a="c")):
        assert type(out) is nt.Tensor
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not nn.Parameter(nt.zeros(2), requires_grad=False).requires_grad


def test_parameter_shares_data_names_override_and_copies():
    t = nt.zeros(2, 3, names=("a", "b"))
    p = nn.Parameter(t, names=("x", "y"))
    assert p.names == ("x", "y") and t.names == ("a", "b")
    with nt.no_grad():
        p.add_(1.0)
    assert t.numpy().sum() == 6  # a view of t, as in PyTorch
    q = nn.Parameter([1.0, 2.0], names=("x",))
    assert q.names == ("x",) and q.dtype is nt.float32
    for c in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(c) is nn.Parameter and c.names == ("x", "y") and c.requires_grad
        assert_close(c.detach(), p.detach())


def test_parameter_errors():
    with pytest.raises(TypeError, match="only floating-point and complex tensors can require grad"):
        nn.Parameter(nt.zeros(2, dtype=nt.int64))
    with pytest.raises(nt.NamesError, match="got 1 names"):
        nn.Parameter(nt.zeros(2, 3), names=("a",))
    with pytest.raises(TypeError, match="give the data"):
        nn.Parameter()


def test_grad_of_a_parameter_has_its_names():
    m = Affine()
    x = nt.randn(5, 3, names=("batch", "embed"))
    m(x).sum().backward()
    assert m.weight.grad.names == ("hidden", "embed") and m.bias.grad.names == ("hidden",)


# ----------------------------------------------------------------------------- registration
def test_registration_and_traversal_order():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == ["enc.weight", "enc.bias", "dec.weight", "dec.bias"]
    assert [n for n, _ in net.named_buffers()] == ["steps", "cache", "enc.scale", "dec.scale"]
    assert [n for n, _ in net.named_modules()] == ["", "enc", "dec"]
    assert [n for n, _ in net.named_children()] == ["enc", "dec"]
    assert list(net.children()) == [net.enc, net.dec]
    assert list(net.modules()) == [net, net.enc, net.dec]
    assert [n for n, _ in net.named_parameters(recurse=False)] == []
    assert [n for n, _ in net.enc.named_parameters(prefix="e")] == ["e.weight", "e.bias"]
    assert len(list(net.parameters())) == 4 and len(list(net.buffers())) == 4
    assert "weight" in dir(net.enc) and "scale" in dir(net.enc)


def test_shared_modules_and_parameters_are_yielded_once():
    net = Net()
    net.dec.weight = net.enc.weight  # tied (shapes differ from a real tie; registration is what matters)
    net.again = net.enc
    assert [n for n, _ in net.named_parameters()] == ["enc.weight", "enc.bias", "dec.bias"]
    assert [n for n, _ in net.named_modules()] == ["", "enc", "dec"]
    assert list(net.state_dict())[1:3] == ["enc.weight", "enc.bias"]
    assert "again.weight" in net.state_dict()  # the state dict lists every path, as PyTorch's does


def test_setattr_getattr_delattr():
    m = Affine()
    assert "weight" in m._parameters and "weight" not in m.__dict__
    with pytest.raises(TypeError, match="cannot assign a Tensor to parameter 'weight'.*a Parameter or None"):
        m.weight = nt.zeros(2, 3)
    m.bias = None
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
    m.scale = nt.full(2, 2.0, names=("hidden",))
    assert m._buffers["scale"].numpy().tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="to buffer 'scale'"):
        m.scale = 3
    m.sub = Affine()
    with pytest.raises(TypeError, match="to sub-module 'sub'"):
        m.sub = 3
    m.plain = 3
    m.plain = nn.Parameter(nt.zeros(1))  # a plain attribute is replaced by the registration
    assert "plain" in m._parameters and "plain" not in m.__dict__
    del m.plain, m.sub, m.scale, m.in_dim
    assert not hasattr(m, "plain") and not hasattr(m, "sub") and not hasattr(m, "scale")
    with pytest.raises(AttributeError, match="'Affine' object has no attribute 'nope'"):
        m.nope


def test_registration_errors():
    class Bad(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(nt.zeros(1))

    with pytest.raises(AttributeError, match=r"call super\(\).__init__\(\) first"):
        Bad()
    m = Affine()
    with pytest.raises(KeyError, match="contain no '.'"):
        m.register_buffer("a.b", nt.zeros(1))
    with pytest.raises(KeyError, match="already has an attribute"):
        m.register_buffer("in_dim", nt.zeros(1))
    with pytest.raises(TypeError, match=r"wrap it in nn.Parameter"):
        m.register_parameter("p", nt.zeros(1))
    with pytest.raises(TypeError, match="a Tensor or None is expected"):
        m.register_buffer("b", [1.0])
    with pytest.raises(TypeError, match="a Module is expected"):
        m.add_module("c", 3)
    with pytest.raises(NotImplementedError, match="Module has no forward"):
        nn.Module()(1)


# ----------------------------------------------------------------------------- modes and grads
def test_train_eval_propagate():
    net = Net()
    assert all(m.training for m in net.modules())
    assert net.eval() is net
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    net.dec.train(False)
    assert net.training and net.enc.training and not net.dec.training
    with pytest.raises(TypeError, match="mode must be a bool"):
        net.train("no")


def test_zero_grad_and_requires_grad():
    net = Net()
    net(nt.randn(2, 3, names=("batch", "embed"))).sum().backward()
    grads = [p.grad for p in net.parameters()]
    assert all(g is not None for g in grads)
    net.zero_grad(set_to_none=False)
    assert all(p.grad is g for p, g in zip(net.parameters(), grads))  # zeroed in place
    assert all(float(abs(p.grad).sum()) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    assert not net(nt.randn(2, 3, names=("batch", "embed"))).requires_grad


def test_apply_visits_children_first():
    net = Net()
    seen = []
    assert net.apply(lambda m: seen.append(type(m).__name__)) is net
    assert seen == ["Affine", "Affine", "Net"]


def test_to_cpu_and_dtype_keep_parameter_objects():
    net = Net()
    params = list(net.parameters())
    assert net.to("cpu") is net and net.cpu() is net
    net.double()
    assert all(a is b for a, b in zip(net.parameters(), params))
    assert all(p.dtype is nt.float64 for p in net.parameters())
    assert net.steps.dtype is nt.int64  # integer buffers are not cast
    assert net.enc.weight.names == ("hidden", "embed") and net.enc.weight.requires_grad
    net.to(nt.float32)
    assert net.enc.weight.dtype is nt.float32


@pytest.mark.usefixtures("no_cupy")
def test_to_cuda_raises_the_core_error():
    net = Net()
    with pytest.raises((RuntimeError, NotImplementedError), match="'cuda'") as info:
        net.to("cuda")
    with pytest.raises(type(info.value), match="'cuda'"):
        nt.zeros(1).to("cuda")
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        net.to(device="tpu")
    with pytest.raises(TypeError, match="only floating dtypes"):
        net.to(nt.int64)


# ----------------------------------------------------------------------------- state dict
def test_state_dict_keys_names_and_detached_views():
    net = Net()
    sd = net.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["steps", "enc.weight", "enc.bias", "enc.scale", "dec.weight", "dec.bias", "dec.scale"]
    assert sd["enc.weight"].names == ("hidden", "embed") and sd["dec.bias"].names == ("embed",)
    assert not sd["enc.weight"].requires_grad and type(sd["enc.weight"]) is nt.Tensor
    assert net.state_dict(keep_vars=True)["enc.weight"] is net.enc.weight


def test_state_dict_round_trip_copies_in_place():
    a, b = Net(), Net()
    b_params = list(b.parameters())
    x = nt.randn(2, 3, names=("batch", "embed"))
    with nt.no_grad():
        a.steps.fill_(7)
    assert b.load_state_dict(a.state_dict()) == ([], [])
    assert all(p is q for p, q in zip(b.parameters(), b_params))  # optimizers keep their references
    assert int(b.steps) == 7
    with nt.no_grad():
        assert_close(b(x), a(x))
    with nt.no_grad():
        a.enc.weight.mul_(2.0)  # the copy is a copy, not a view
    assert not np.allclose(a.enc.weight.detach().numpy(), b.enc.weight.detach().numpy())


def test_state_dict_of_unnamed_tensors_is_taken_by_position():
    net = Affine()
    sd = {k: nt.tensor(v.numpy()) for k, v in Affine().state_dict().items()}  # e.g. from another tool
    net.load_state_dict(sd)
    assert net.weight.names == ("hidden", "embed")
    assert_close(net.weight.detach(), sd["weight"], check_names=False)


def test_load_state_dict_explains_every_mismatch_at_once():
    net = Net()
    before = {k: v.numpy().copy() for k, v in net.state_dict().items()}
    sd = net.state_dict()
    sd["enc.weight"] = nt.zeros(4, 3, names=("out", "embed"))  # wrong names
    sd["enc.bias"] = nt.zeros(5, names=("hidden",))  # wrong size
    sd["steps"] = nt.zeros((), dtype=nt.float32)  # float into an int buffer
    sd["dec.weight"] = np.zeros((3, 4))  # not a tensor
    del sd["dec.bias"]  # missing
    sd["dec.biass"] = nt.zeros(3, names=("embed",))  # unexpected (a typo)
    with pytest.raises(nn.StateDictError) as info:
        net.load_state_dict(sd)
    msg = str(info.value)
    assert "load_state_dict into Net: 6 problems" in msg
    assert "'enc.weight': names differ: state dict ('out', 'embed') vs model ('hidden', 'embed')" in msg
    assert "'enc.bias': sizes differ: state dict {'hidden': 5} vs model {'hidden': 4}" in msg
    assert "'steps': dtype nt.float32 in the state dict cannot be cast to the model's nt.int64" in msg
    assert "'dec.weight': expected a Tensor, got ndarray" in msg
    assert "missing keys (in the model, not in the state dict): 'dec.bias' (did you mean 'dec.biass'?)" in msg
    assert "unexpected keys (in the state dict, not in the model): 'dec.biass' (did you mean 'dec.bias'?)" in msg
    assert "Nothing was loaded" in msg
    assert isinstance(info.value, ValueError)
    assert info.value.missing_keys == ["dec.bias"] and info.value.unexpected_keys == ["dec.biass"]
    assert len(info.value.problems) == 6
    assert all(np.array_equal(v.numpy(), before[k]) for k, v in net.state_dict().items())


def test_load_state_dict_names_and_sizes_both_wrong_on_one_key():
    net = Affine()
    sd = net.state_dict()
    sd["weight"] = nt.zeros(3, 3, names=("a", "b"))
    with pytest.raises(nn.StateDictError, match="2 problems") as info:
        net.load_state_dict(sd)
    assert info.value.problems == [
        "'weight': names differ: state dict ('a', 'b') vs model ('hidden', 'embed')",
        "'weight': sizes differ: state dict {'a': 3, 'b': 3} vs model {'hidden': 2, 'embed': 3}",
    ]


def test_load_state_dict_strict_false():
    net = Net()
    sd = Net().state_dict()
    del sd["dec.bias"]
    sd["extra"] = nt.zeros(1)
    result = net.load_state_dict(sd, strict=False)
    missing, unexpected = result
    assert missing == ["dec.bias"] and unexpected == ["extra"]
    assert result.missing_keys == ["dec.bias"] and result.unexpected_keys == ["extra"]
    assert_close(net.enc.weight.detach(), sd["enc.weight"])
    sd["enc.bias"] = nt.zeros(9, names=("hidden",))  # size mismatches are errors even when not strict
    with pytest.raises(nn.StateDictError, match="1 problem:\n  'enc.bias': sizes differ"):
        net.load_state_dict(sd, strict=False)


def test_load_state_dict_rename_map_and_function():
    src = Net()
    sd = OrderedDict((k.replace("enc.", "encoder."), v) for k, v in src.state_dict().items())
    net = Net()
    with pytest.raises(nn.StateDictError, match="'enc.weight' \\(did you mean 'encoder.weight'\\?\\)"):
        net.load_state_dict(sd)
    mapping = {k: k.replace("encoder.", "enc.") for k in sd if k.startswith("encoder.")}
    net.load_state_dict(sd, rename=mapping)
    assert_close(net.enc.weight.detach(), src.enc.weight.detach())
    net2 = Net()
    net2.load_state_dict(sd, rename=lambda k: k.replace("encoder.", "enc."))
    assert_close(net2.enc.bias.detach(), src.enc.bias.detach())


def test_load_state_dict_rename_errors():
    net = Net()
    sd = net.state_dict()
    with pytest.raises(nn.StateDictError, match=r"rename: keys not in the state dict: 'enc.wieght'"):
        net.load_state_dict(sd, rename={"enc.wieght": "enc.weight"})
    with pytest.raises(nn.StateDictError, match=r"rename: keys 'enc.bias' and 'dec.bias' both become 'bias'"):
        net.load_state_dict(sd, rename=lambda k: "bias" if k.endswith("bias") else k)
    with pytest.raises(TypeError, match="rename must be a dict or a function"):
        net.load_state_dict(sd, rename=3)
    with pytest.raises(TypeError, match="expected a dict of tensors"):
        net.load_state_dict([1, 2])


def test_deepcopy_and_pickle_a_module():
    net = Net()
    for c in (copy.deepcopy(net), pickle.loads(pickle.dumps(net))):
        assert [n for n, _ in c.named_parameters()] == [n for n, _ in net.named_parameters()]
        assert c.enc.weight is not net.enc.weight and isinstance(c.enc.weight, nn.Parameter)
        assert_close(c.enc.weight.detach(), net.enc.weight.detach())


# ----------------------------------------------------------------------------- repr
def test_repr_tree():
    class Leaf(nn.Module):
        def extra_repr(self):
            return "size=3"

    class Tree(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Leaf()
            self.seq = nn.Sequential(Leaf(), nn.ModuleList([Leaf()]))

    assert repr(Tree()) == (
        "Tree(\n"
        "  (a): Leaf(size=3)\n"
        "  (seq): Sequential(\n"
        "    (0): Leaf(size=3)\n"
        "    (1): ModuleList(\n"
        "      (0): Leaf(size=3)\n"
        "    )\n"
        "  )\n"
        ")"
    )
    assert repr(nn.ModuleList()) == "ModuleList()"


# ----------------------------------------------------------------------------- containers
class AddK(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x + self.k


def test_sequential_runs_in_order_indexes_and_slices():
    seq = nn.Sequential(AddK(1), AddK(10), AddK(100))
    x = nt.zeros(2, names=("x",))
    assert seq(x).numpy().tolist() == [111.0, 111.0] and seq(x).names == ("x",)
    assert len(seq) == 3 and seq[0].k == 1 and seq[-1].k == 100
    assert [m.k for m in seq] == [1, 10, 100]
    sub = seq[1:]
    assert isinstance(sub, nn.Sequential) and [m.k for m in sub] == [10, 100] and list(sub._modules) == ["1", "2"]
    seq.append(AddK(1000)).insert(0, AddK(0))
    assert [m.k for m in seq] == [0, 1, 10, 100, 1000] and list(seq._modules) == ["0", "1", "2", "3", "4"]
    seq[0] = AddK(5)
    del seq[1]
    assert [m.k for m in seq] == [5, 10, 100, 1000] and list(seq._modules) == ["0", "1", "2", "3"]
    seq.extend([AddK(7)])
    assert seq[4].k == 7
    with pytest.raises(IndexError, match="Sequential index 9 is out of range for 5 modules"):
        seq[9]
    with pytest.raises(TypeError, match="indices must be ints or slices"):
        seq["a"]
    named = nn.Sequential(OrderedDict([("first", AddK(1)), ("second", AddK(2))]))
    assert [n for n, _ in named.named_children()] == ["first", "second"] and named.first.k == 1


def test_module_list():
    ml = nn.ModuleList([Affine(), Affine()])
    assert len(ml) == 2 and [n for n, _ in ml.named_parameters()][:2] == ["0.weight", "0.bias"]
    ml.append(Affine())
    ml += [Affine()]
    ml.insert(1, AddK(3))
    assert len(ml) == 5 and ml[1].k == 3 and isinstance(ml[-1], Affine)
    del ml[1]
    assert list(ml._modules) == ["0", "1", "2", "3"]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    ml[0] = AddK(4)
    assert ml[0].k == 4
    with pytest.raises(IndexError, match="ModuleList index -9"):
        ml[-9]
    with pytest.raises(NotImplementedError, match="ModuleList has no forward"):
        ml(1)
    with pytest.raises(TypeError, match="use append"):
        ml.extend(Affine())


def test_module_dict():
    md = nn.ModuleDict({"enc": Affine(), "dec": Affine()})
    assert list(md) == ["enc", "dec"] and len(md) == 2 and "enc" in md
    assert next(n for n, _ in md.named_parameters()) == "enc.weight"
    md["extra"] = AddK(1)
    md.update([("more", AddK(2))])
    assert list(md.keys()) == ["enc", "dec", "extra", "more"]
    assert md.pop("extra").k == 1 and "extra" not in md
    del md["more"]
    assert [k for k, _ in md.items()] == ["enc", "dec"] and len(list(md.values())) == 2
    with pytest.raises(KeyError, match="ModuleDict has no module 'nope'"):
        md["nope"]
    with pytest.raises(TypeError, match=r"expected \(name, module\) pairs"):
        md.update([AddK(1)])
    md.clear()
    assert len(md) == 0


def test_containers_propagate_train_and_state_dict():
    model = nn.Sequential(nn.ModuleDict({"a": Affine()}), nn.ModuleList([Affine()]))
    model.eval()
    assert not any(m.training for m in model.modules())
    assert list(model.state_dict())[:3] == ["0.a.weight", "0.a.bias", "0.a.scale"]
    fresh = nn.Sequential(nn.ModuleDict({"a": Affine()}), nn.ModuleList([Affine()]))
    fresh.load_state_dict(model.state_dict())
    assert_close(fresh[1][0].weight.detach(), model[1][0].weight.detach())


def test_load_state_dict_across_cpu_backends():
    from namedtensor import backends

    src = Affine()
    sd = src.state_dict()
    try:
        backends.use_cpu_backend("array_api_strict")
        net = Affine()
        assert net.weight._B is not sd["weight"]._B
        net.load_state_dict(sd)
        assert net.weight._B.name == "array_api_strict"
        assert np.array_equal(net.weight.detach().numpy(), sd["weight"].numpy())
    finally:
        backends.use_cpu_backend("numpy")
