"""Property tests of op compositions: random programs of 1-6 ops on 1-3 named float64 tensors.

A program is drawn together with what it must do: every step carries a NumPy mirror of its values
and the shape and names it must produce (tracked here with the rules of docs/design.md, "Name
rules, family by family", independently of namedtensor/_names.py).  The properties:

* values equal NumPy's at every step, names equal the expected names, and gradcheck of the whole
  program passes with gradients named like the inputs;
* double backward through a program works: ``nt.grad(..., create_graph=True)`` then a second grad,
  and gradgradcheck agrees with central differences;
* the same program on unnamed copies of the inputs (dims addressed by position) gives identical
  values and gradients; so does it under ``no_grad`` (where in-place steps really run in place),
  with retained graphs, with a hook, through ``backward()``, and with temporary elision forced on.

Operands a step combines with the running tensor are built from the inputs (dims that cannot line
up reduced, then ``align_as``, ``nt.align`` or ``rename``), from NumPy arrays, Python scalars and
named constants, or from the running tensor itself (copies, flips, keepdim reductions).
"""

import math

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor import _names
from namedtensor.ops import _elision
from namedtensor.testing import gradcheck, gradgradcheck

pytestmark = pytest.mark.usefixtures("backend")

UNIVERSE = ("batch", "seq", "head", "feat", "x", "y")
EXTRA = ("p", "q", "r", "u", "v", "w")
MAX_NUMEL = 192
MAX_NDIM = 5
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sig(a):
    return 1 / (1 + np.exp(-a))


# ----------------------------------------------------------------------------- program representation


class Step:
    """One op: ``run(t, xs, named)`` on tensors, ``ref(a, arrs)`` on NumPy arrays, and the shape and
    names it must give (when ``named``; unnamed runs must give the same shape, all names ``None``)."""

    def __init__(self, desc, run, ref, shape, names, exact=True):
        self.desc, self.run, self.ref = desc, run, ref
        self.shape, self.names, self.exact = tuple(shape), tuple(names), exact

    def __repr__(self):
        return self.desc


class Program:
    def __init__(self, inputs, steps):
        self.inputs = inputs  # [(array, names)]
        self.steps = steps

    def leaves(self, named=True):
        return [nt.tensor(a, names=n if named else None, requires_grad=True) for a, n in self.inputs]

    def __call__(self, *xs, named=True):
        cur = xs[0]
        for s in self.steps:
            cur = s.run(cur, xs, named)
        return cur

    def __repr__(self):
        ins = ", ".join(f"{a.shape}{n}" for a, n in self.inputs)
        return f"inputs [{ins}]\n  " + "\n  ".join(f"{s.desc} -> {s.shape} {s.names}" for s in self.steps)


def pos(ref, ax, named):
    """A dim reference as the op gets it: a name only in named runs (unnamed runs address by position)."""
    return ref if named or not isinstance(ref, str) else ax


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


# ----------------------------------------------------------------------------- drawing helpers


class Ctx:
    """The state a step is drawn for: current shape and names, the program's inputs, ``draw``."""

    def __init__(self, draw, shape, names, inputs):
        self.draw, self.shape, self.names, self.inputs = draw, tuple(shape), tuple(names), inputs
        self.ndim = len(shape)

    def pick(self, options):
        return self.draw(st.sampled_from(list(options)))

    def int(self, lo, hi):
        return self.draw(st.integers(lo, hi))

    def flag(self):
        return self.draw(st.booleans())

    def ref(self, ax, names=None):
        """A way to address axis ``ax``: its name, the int, or the negative int."""
        names = self.names if names is None else names
        how = self.pick(["name", "int", "neg"])
        if how == "name" and names[ax] is not None:
            return names[ax]
        return ax - len(names) if how == "neg" else ax

    def fresh(self, exclude=()):
        """A name not in the current tensor (universe names too: their sizes in the inputs may differ)."""
        taken = set(self.names) | set(exclude)
        return self.pick([n for n in UNIVERSE + EXTRA if n not in taken])

    def axes(self, lo=1, hi=None):
        hi = self.ndim if hi is None else hi
        return self.draw(st.lists(st.integers(0, self.ndim - 1), min_size=lo, max_size=hi, unique=True))

    def seed_rng(self):
        return np.random.default_rng(self.draw(st.integers(0, 2**32 - 1)))


# ----------------------------------------------------------------------------- unary math

UNARY = [
    ("neg", lambda t: -t, np.negative),
    ("abs", lambda t: t.abs(), np.abs),
    ("tanh", nt.tanh, np.tanh),
    ("sin", lambda t: t.sin(), np.sin),
    ("cos", nt.cos, np.cos),
    ("sigmoid", lambda t: t.sigmoid(), _sig),
    ("softplus", lambda t: t.softplus(), lambda a: np.logaddexp(0, a)),
    ("gelu", lambda t: t.gelu(), lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2)))),
    ("gelu_tanh", lambda t: t.gelu(approximate="tanh"),
     lambda a: 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a**3)))),
    ("silu", lambda t: t.silu(), lambda a: a * _sig(a)),
    ("erf", lambda t: t.erf(), _erf),
    ("relu", lambda t: t.relu(), lambda a: np.maximum(a, 0)),
    ("square_tanh", lambda t: t.tanh().square(), lambda a: np.tanh(a) ** 2),
    ("cube_tanh", lambda t: (t.tanh() * 1.5) ** 3, lambda a: (np.tanh(a) * 1.5) ** 3),
    ("exp_tanh", lambda t: t.tanh().exp(), lambda a: np.exp(np.tanh(a))),
    ("expm1_tanh", lambda t: nt.expm1(t.tanh()), lambda a: np.expm1(np.tanh(a))),
    ("log_sq", lambda t: (t * t + 1).log(), lambda a: np.log(a * a + 1)),
    ("log1p_sq", lambda t: (t * t).log1p(), lambda a: np.log1p(a * a)),
    ("sqrt_sq", lambda t: (t * t + 1).sqrt(), lambda a: np.sqrt(a * a + 1)),
    ("rsqrt_sq", lambda t: (1 + t * t).rsqrt(), lambda a: 1 / np.sqrt(1 + a * a)),
    ("reciprocal_sq", lambda t: (t * t + 0.5).reciprocal(), lambda a: 1 / (a * a + 0.5)),
    ("tan_half", lambda t: (t.tanh() * 0.5).tan(), lambda a: np.tan(np.tanh(a) * 0.5)),
    ("pow_pos", lambda t: (t * t + 0.5) ** 0.75, lambda a: (a * a + 0.5) ** 0.75),
    ("rpow", lambda t: 1.5 ** t.tanh(), lambda a: 1.5 ** np.tanh(a)),
    ("clip", lambda t: t.clip(-1.0, 1.0), lambda a: np.clip(a, -1.0, 1.0)),
    ("clamp_min", lambda t: t.clamp(min=-0.5), lambda a: np.maximum(a, -0.5)),
    ("floor", lambda t: t.floor(), np.floor),
    ("round", lambda t: (t * 2).round(), lambda a: np.round(a * 2)),
    ("sign_mul", lambda t: t.sign() * t, lambda a: np.sign(a) * a),
    ("rsub", lambda t: 1.5 - t, lambda a: 1.5 - a),
    ("rdiv", lambda t: 2.0 / (t * t + 1), lambda a: 2.0 / (a * a + 1)),
    ("clone", lambda t: t.clone(), lambda a: a),
    ("double", lambda t: t.to(nt.float64), lambda a: a),
]
UNARY_NAMES = [u[0] for u in UNARY]
UNARY_BY_NAME = {u[0]: u for u in UNARY}


def b_unary(c: Ctx):
    name, f, g = UNARY_BY_NAME[c.pick(UNARY_NAMES)]
    return Step(name, lambda t, xs, named: f(t), lambda a, arrs: g(a), c.shape, c.names)


# ----------------------------------------------------------------------------- binary math


def _operand_from_input(c: Ctx):
    """Input k with the dims that cannot line up with the current tensor reduced, then align_as
    (named runs) or permute + reshape (unnamed runs).  Returns (desc, make(t, xs, named), mirror(a, arrs))."""
    k = c.int(0, len(c.inputs) - 1)
    arr, names = c.inputs[k]
    shape = arr.shape
    cur_size = dict(zip(c.names, c.shape))
    keep = [j for j, n in enumerate(names)
            if n is not None and n in cur_size and shape[j] in (1, cur_size[n]) and (c.flag() or c.flag())]
    drop = [j for j in range(len(names)) if j not in keep]
    refs = [c.ref(j, names) for j in drop]
    reducer = c.pick(["sum", "mean", "amax"])
    np_red = {"sum": np.sum, "mean": np.mean, "amax": np.amax}[reducer]
    order = sorted(range(len(keep)), key=lambda i: c.names.index(names[keep[i]]))
    target = [1] * c.ndim
    for j in keep:
        target[c.names.index(names[j])] = shape[j]
    target = tuple(target)

    def make(t, xs, named):
        x = xs[k]
        if drop:
            x = getattr(x, reducer)(tuple(pos(r, j, named) for r, j in zip(refs, drop)))
        if named:
            return x.align_as(t)
        return x.permute(*order).reshape(target)

    def mirror(a, arrs):
        b = arrs[k]
        if drop:
            b = np_red(b, axis=tuple(drop))
        return np.transpose(b, order).reshape(target)

    return f"x{k}.{reducer}({refs}).align_as(t)", make, mirror


def _operand_renamed(c: Ctx):
    """A 1-D operand of the current last dim's size from some input, renamed to that dim's name."""
    size = c.shape[-1]
    options = [(k, j) for k, (a, _) in enumerate(c.inputs) for j in range(a.ndim) if a.shape[j] in (size, 1)]
    if not options:
        return None
    k, j = c.pick(options)
    arr, names = c.inputs[k]
    drop = [i for i in range(arr.ndim) if i != j]
    refs = [c.ref(i, names) for i in drop]
    new = c.names[-1]

    def make(t, xs, named):
        x = xs[k]
        if drop:
            x = x.sum(tuple(pos(r, i, named) for r, i in zip(refs, drop)))
        return x.rename(new) if named else x

    def mirror(a, arrs):
        b = arrs[k]
        return np.sum(b, axis=tuple(drop)) if drop else b

    return f"x{k}.sum({refs}).rename({new!r})", make, mirror


def _operand_array(c: Ctx):
    """An unnamed NumPy array that broadcasts against the current tensor, maybe with an extra leading dim."""
    m = c.int(0, c.ndim)
    lead = (c.int(2, 3),) if m == c.ndim and c.ndim < MAX_NDIM and c.flag() else ()
    shape = lead + tuple(s if c.flag() else 1 for s in c.shape[c.ndim - m:])
    arr = c.seed_rng().uniform(-2, 2, size=shape)
    return f"array{shape}", lambda t, xs, named: arr, lambda a, arrs: arr, shape


def _operand_scalar(c: Ctx):
    v = c.pick([0.5, -1.25, 2.0, 3.0])
    return repr(v), lambda t, xs, named: v, lambda a, arrs: v


def _operand_filling(c: Ctx):
    """A named operand whose names fill some of the current tensor's ``None`` dims (rule 2: the result
    takes the name), scaled by a 0-dim function of an input so that the gradient reaches that input."""
    if all(n is not None for n in c.names):
        return None
    m = c.int(1, c.ndim)
    onames, fill = [], []
    for n in c.names[c.ndim - m:]:
        new = c.fresh(tuple(onames) + tuple(fill)) if n is None and c.flag() else None
        onames.append(new if n is None else (n if c.flag() else None))
        fill.append(new)
    oshape = tuple(s if c.flag() else 1 for s in c.shape[c.ndim - m:])
    const = c.seed_rng().uniform(-2, 2, size=oshape)
    k = c.int(0, len(c.inputs) - 1)
    names = c.names[:c.ndim - m] + tuple(n if n is not None else f for n, f in zip(c.names[c.ndim - m:], fill))

    def make(t, xs, named):
        return nt.tensor(const, names=tuple(onames) if named else None) * xs[k].sum().tanh()

    return (f"const{oshape}{tuple(onames)} * x{k}.sum().tanh()", make,
            lambda a, arrs: const * np.tanh(np.sum(arrs[k])), oshape, names)


def _operand_self(c: Ctx):
    return "t", lambda t, xs, named: t, lambda a, arrs: a


def _operand_reduced_self(c: Ctx):
    """The current tensor reduced over a dim and broadcast back: keepdim, or align_as / unsqueeze."""
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    red = c.pick(["mean", "sum", "amax", "logsumexp", "var"])
    correction = {} if red != "var" else {"correction": 1 if c.shape[ax] > 1 else 0}
    np_red = {"mean": np.mean, "sum": np.sum, "amax": np.amax, "logsumexp": _np_lse,
              "var": lambda a, axis, keepdims: np.var(a, axis=axis, keepdims=keepdims, ddof=correction["correction"])
              }[red]
    fully_named = all(n is not None for n in c.names)
    how = c.pick(["keepdim", "align_as", "unsqueeze"] if fully_named else ["keepdim", "unsqueeze"])

    def make(t, xs, named):
        d = pos(r, ax, named)
        if how == "keepdim":
            return getattr(t, red)(d, keepdim=True, **correction)
        y = getattr(t, red)(d, **correction)
        if how == "align_as" and named:
            return y.align_as(t)
        return y.unsqueeze(ax, name=c.names[ax] if named else None)

    return (f"t.{red}({r!r}) {how}", make, lambda a, arrs: np_red(a, axis=ax, keepdims=True))


def _operand_flip(c: Ctx):
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    return f"t.flip({r!r})", lambda t, xs, named: t.flip(pos(r, ax, named)), lambda a, arrs: np.flip(a, ax)


def _tanh(v):
    if isinstance(v, nt.Tensor):
        return v.tanh()
    return np.tanh(v) if isinstance(v, np.ndarray) else math.tanh(v)


def _sq1(v):
    return v * v + 1


def _clip_between(a, b, form):
    """``a`` clipped to ``[b - 0.5, b + 0.5]``: tensor bounds (``a`` may be an array or a number)."""
    if not isinstance(a, nt.Tensor):
        return nt.minimum(nt.maximum(a, b - 0.5), b + 0.5)
    return a.clip(b - 0.5, b + 0.5) if form != 1 else nt.clip(a, min=b - 0.5, max=b + 0.5)


BINARY = {
    "add": (lambda a, b, form: a + b if form == 0 else nt.add(a, b) if form == 1 else a.add(b), np.add),
    "sub": (lambda a, b, form: a - b if form == 0 else nt.sub(a, b) if form == 1 else a.sub(b), np.subtract),
    "mul": (lambda a, b, form: a * b if form == 0 else nt.mul(a, b) if form == 1 else a.mul(b), np.multiply),
    "div": (lambda a, b, form: a / _sq1(b) if form == 0 else nt.div(a, _sq1(b)) if form == 1 else a.div(_sq1(b)),
            lambda a, b: a / _sq1(b)),
    "pow": (lambda a, b, form: (a * a + 0.5) ** _tanh(b) if form != 1 else nt.pow(a * a + 0.5, _tanh(b)),
            lambda a, b: (a * a + 0.5) ** np.tanh(b)),
    "maximum": (lambda a, b, form: nt.maximum(a, b), np.maximum),
    "minimum": (lambda a, b, form: nt.minimum(a, b), np.minimum),
    "clip": (_clip_between, lambda a, b: np.minimum(np.maximum(a, b - 0.5), b + 0.5)),
}


def b_binary(c: Ctx):
    kind = c.pick(["input", "input", "renamed", "array", "scalar", "flip", "self", "reduced_self", "filling"]
                  if c.ndim else ["input", "array", "scalar", "self"])
    made = {"input": _operand_from_input, "renamed": _operand_renamed, "array": _operand_array,
            "scalar": _operand_scalar, "flip": _operand_flip, "self": _operand_self,
            "reduced_self": _operand_reduced_self, "filling": _operand_filling}[kind](c)
    if made is None:
        return None
    desc, make, mirror = made[:3]
    shape = np.broadcast_shapes(c.shape, made[3]) if len(made) > 3 else c.shape
    names = made[4] if len(made) > 4 else (None,) * (len(shape) - c.ndim) + c.names
    op = c.pick(list(BINARY))
    f, g = BINARY[op]
    swap = c.flag()  # the operand goes first
    operand_is_tensor = kind in ("input", "renamed", "flip", "self", "reduced_self", "filling")
    form = c.int(0, 2) if operand_is_tensor or not swap else c.int(0, 1)  # form 2: a method of the first

    def run(t, xs, named):
        o = make(t, xs, named)
        return f(o, t, form) if swap else f(t, o, form)

    def ref(a, arrs):
        o = mirror(a, arrs)
        return g(o, a) if swap else g(a, o)

    order = f"{desc} {op} t" if swap else f"t {op} {desc}"
    return Step(f"binary[{form}]: {order}", run, ref, shape, names)


def b_align_union(c: Ctx):
    """``nt.align(t, x)`` of the (fully named) current tensor and a reduced input, then a binary op."""
    if any(n is None for n in c.names):
        return None
    k = c.int(0, len(c.inputs) - 1)
    arr, names = c.inputs[k]
    cur_size = dict(zip(c.names, c.shape))
    keep, last = [], -1
    for j, n in enumerate(names):
        if n is None or not (c.flag() or c.flag()):
            continue
        if n in cur_size:
            if arr.shape[j] not in (1, cur_size[n]) or c.names.index(n) < last:
                continue
            last = c.names.index(n)
        keep.append(j)
    drop = [j for j in range(arr.ndim) if j not in keep]
    refs = [c.ref(j, names) for j in drop]
    kept = [names[j] for j in keep]
    order = list(_names.align_union((tuple(c.names), tuple(kept))))  # its rule is tested in test_names
    shape = tuple(cur_size[n] if n in cur_size else arr.shape[keep[kept.index(n)]] for n in order)
    if numel(shape) > MAX_NUMEL or len(shape) > MAX_NDIM:
        return None
    # the layouts both operands take: their own dims in union order, size 1 elsewhere
    perm_t = sorted(range(c.ndim), key=lambda i: order.index(c.names[i]))
    perm_x = sorted(range(len(keep)), key=lambda i: order.index(kept[i]))
    shape_t = tuple(cur_size[n] if n in cur_size else 1 for n in order)
    shape_x = tuple(arr.shape[keep[kept.index(n)]] if n in kept else 1 for n in order)
    op = c.pick(["add", "mul", "sub", "maximum"])
    f, g = BINARY[op]

    def run(t, xs, named):
        x = xs[k]
        if drop:
            x = x.sum(tuple(pos(r, j, named) for r, j in zip(refs, drop)))
        if named:
            a, b = nt.align(t, x)
        else:
            a, b = t.permute(*perm_t).reshape(shape_t), x.permute(*perm_x).reshape(shape_x)
        return f(a, b, 0)

    def ref(a, arrs):
        x = arrs[k]
        if drop:
            x = np.sum(x, axis=tuple(drop))
        return g(np.transpose(a, perm_t).reshape(shape_t), np.transpose(x, perm_x).reshape(shape_x))

    return Step(f"{op}(*nt.align(t, x{k}.sum({refs})))", run, ref, shape, order)


def b_broadcast(c: Ctx):
    kind = c.pick(["broadcast_to", "expand_as", "tile", "repeat"])
    lead = c.int(0, 1) if c.ndim < MAX_NDIM else 0
    lead_shape = tuple(c.int(1, 3) for _ in range(lead))
    if kind in ("broadcast_to", "expand_as"):
        shape = lead_shape + tuple(c.int(1, 3) if s == 1 and c.flag() else s for s in c.shape)
        names = tuple(c.fresh() if c.flag() else None for _ in range(lead)) + c.names
        if numel(shape) > MAX_NUMEL:
            return None

        def run(t, xs, named):
            nm = names if named else None
            if kind == "broadcast_to":
                return t.broadcast_to(shape, names=nm) if named else nt.broadcast_to(t, shape)
            return t.expand_as(nt.zeros(shape, names=nm, dtype=nt.float64))

        return Step(f"{kind}({shape}, {names})", run, lambda a, arrs: np.broadcast_to(a, shape).copy(), shape, names)
    reps = lead_shape + tuple(c.int(1, 2) for _ in range(c.ndim))
    if kind == "tile" and c.flag() and c.ndim:
        reps = reps[lead + 1:]  # fewer reps than dims: tile pads them with 1s in front
    shape = np.tile(np.zeros(c.shape), reps).shape
    names = (None,) * (len(shape) - c.ndim) + c.names
    if numel(shape) > MAX_NUMEL:
        return None

    def run(t, xs, named):
        return t.tile(reps) if kind == "tile" else t.repeat(*reps)

    return Step(f"{kind}{reps}", run, lambda a, arrs: np.tile(a, reps), shape, names)


# ----------------------------------------------------------------------------- reductions


def _np_lse(a, axis, keepdims):
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else (np.squeeze(out, axis=axis) if axis is not None else out.reshape(()))


def _ramp(shape):
    return np.arange(numel(shape), dtype=np.float64).reshape(shape) * 0.37


REDUCERS = {
    "sum": (lambda t, d, k: t.sum(d, keepdim=k), lambda a, ax, k: np.sum(a, axis=ax, keepdims=k)),
    "nt.sum": (lambda t, d, k: nt.sum(t, dim=d, keepdim=k), lambda a, ax, k: np.sum(a, axis=ax, keepdims=k)),
    "mean": (lambda t, d, k: t.mean(d, keepdim=k), lambda a, ax, k: np.mean(a, axis=ax, keepdims=k)),
    "amax": (lambda t, d, k: t.amax(d, keepdim=k), lambda a, ax, k: np.amax(a, axis=ax, keepdims=k)),
    "amin": (lambda t, d, k: t.amin(d, keepdim=k), lambda a, ax, k: np.amin(a, axis=ax, keepdims=k)),
    "prod": (lambda t, d, k: t.prod(d, keepdim=k), lambda a, ax, k: np.prod(a, axis=ax, keepdims=k)),
    "logsumexp": (lambda t, d, k: t.logsumexp(d, keepdim=k), _np_lse),
    "var0": (lambda t, d, k: t.var(d, correction=0, keepdim=k), lambda a, ax, k: np.var(a, axis=ax, keepdims=k)),
    "var1": (lambda t, d, k: t.var(d, keepdim=k), lambda a, ax, k: np.var(a, axis=ax, keepdims=k, ddof=1)),
    # std of t plus a ramp: copies of one value (stack, repeated indices) would make a zero std, whose
    # gradient is undefined
    "std0": (lambda t, d, k: (t + _ramp(t.shape)).std(d, correction=0, keepdim=k),
             lambda a, ax, k: np.std(a + _ramp(a.shape), axis=ax, keepdims=k)),
    "std1": (lambda t, d, k: (_ramp(t.shape) + t).std(d, keepdim=k),
             lambda a, ax, k: np.std(a + _ramp(a.shape), axis=ax, keepdims=k, ddof=1)),
    "norm2": (lambda t, d, k: t.norm(dim=d, keepdim=k),
              lambda a, ax, k: np.sqrt(np.sum(a * a, axis=ax, keepdims=k))),
    "norm1": (lambda t, d, k: t.norm(1, d, keepdim=k), lambda a, ax, k: np.sum(np.abs(a), axis=ax, keepdims=k)),
    "norm3": (lambda t, d, k: nt.norm(t, 3, dim=d, keepdim=k),
              lambda a, ax, k: np.sum(np.abs(a) ** 3, axis=ax, keepdims=k) ** (1 / 3)),
    "norminf": (lambda t, d, k: t.norm(math.inf, d, keepdim=k),
                lambda a, ax, k: np.amax(np.abs(a), axis=ax, keepdims=k)),
}


def b_reduce(c: Ctx):
    op = c.pick(list(REDUCERS) + ["max_dim", "min_dim", "max_all", "min_all"])
    if op in ("max_all", "min_all"):
        largest = op == "max_all"
        return Step(f"{op}()", lambda t, xs, named: t.max() if largest else nt.min(t),
                    lambda a, arrs: np.amax(a) if largest else np.amin(a), (), ())
    keepdim = c.flag()
    if op in ("max_dim", "min_dim"):
        if c.ndim == 0:
            return None
        axes = [c.int(0, c.ndim - 1)]
        refs = [c.ref(axes[0])]
        form = "single"
    else:
        form = c.pick(["none", "single", "single", "tuple", "tuple"] if c.ndim else ["none"])
        axes = list(range(c.ndim)) if form == "none" else [c.int(0, c.ndim - 1)] if form == "single" else c.axes()
        refs = [c.ref(a) for a in axes]
    if op in ("var1", "std0", "std1") and numel([c.shape[a] for a in axes]) < 2:
        op = "var0"  # a one-element std has no derivative
    shape = [1 if i in axes else s for i, s in enumerate(c.shape)]
    names = list(c.names)
    if not keepdim:
        shape = [s for i, s in enumerate(shape) if i not in axes]
        names = [n for i, n in enumerate(names) if i not in axes]

    def dims(named):
        if form == "none":
            return None
        d = tuple(pos(r, a, named) for r, a in zip(refs, axes))
        return d[0] if form == "single" else d

    if op in ("max_dim", "min_dim"):
        largest = op == "max_dim"

        def run(t, xs, named):
            d = dims(named)
            return (t.max(d, keepdim=keepdim) if largest else t.min(d, keepdim=keepdim)).values

        def ref(a, arrs):
            return (np.amax if largest else np.amin)(a, axis=axes[0], keepdims=keepdim)

        return Step(f"{op}({refs[0]!r}, keepdim={keepdim})", run, ref, shape, names)
    f, g = REDUCERS[op]
    np_axes = None if form == "none" else tuple(axes)
    return Step(f"{op}({dims(True)!r}, keepdim={keepdim})", lambda t, xs, named: f(t, dims(named), keepdim),
                lambda a, arrs: g(a, np_axes, keepdim), shape, names)


# ----------------------------------------------------------------------------- along one dim


def _np_softmax(a, axis):
    e = np.exp(a - a.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


ALONG = {
    "softmax": (lambda t, d: t.softmax(d), _np_softmax),
    "nt.softmax": (lambda t, d: nt.softmax(t, d), _np_softmax),
    "log_softmax": (lambda t, d: t.log_softmax(d), lambda a, ax: np.log(_np_softmax(a, ax))),
    "cumsum": (lambda t, d: t.cumsum(d), lambda a, ax: np.cumsum(a, axis=ax)),
    "cumprod": (lambda t, d: t.cumprod(d), lambda a, ax: np.cumprod(a, axis=ax)),
}


def b_along(c: Ctx):
    if c.ndim == 0:
        return None
    op = c.pick(list(ALONG))
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    f, g = ALONG[op]
    return Step(f"{op}({r!r})", lambda t, xs, named: f(t, pos(r, ax, named)), lambda a, arrs: g(a, ax),
                c.shape, c.names)


# ----------------------------------------------------------------------------- permutations


def b_permute(c: Ctx):
    if c.ndim == 0:
        return None
    kinds = ["permute", "align_to", "T"] + (["transpose", "mT"] if c.ndim >= 2 else [])
    kind = c.pick(kinds)
    if kind == "transpose":
        a0, a1 = c.int(0, c.ndim - 1), c.int(0, c.ndim - 1)
        r0, r1 = c.ref(a0), c.ref(a1)
        perm = list(range(c.ndim))
        perm[a0], perm[a1] = perm[a1], perm[a0]

        def run(t, xs, named):
            return t.transpose(pos(r0, a0, named), pos(r1, a1, named))

        desc = f"transpose({r0!r}, {r1!r})"
    elif kind == "mT":
        perm = list(range(c.ndim - 2)) + [c.ndim - 1, c.ndim - 2]

        def run(t, xs, named):
            return t.mT

        desc = "mT"
    elif kind == "T":
        perm = list(range(c.ndim))[::-1]

        def run(t, xs, named):
            return t.T

        desc = "T"
    elif kind == "permute":
        perm = c.draw(st.permutations(range(c.ndim)))
        refs = [c.ref(a) for a in perm]
        spread = c.flag()

        def run(t, xs, named):
            d = [pos(r, a, named) for r, a in zip(refs, perm)]
            return t.permute(*d) if spread else nt.permute(t, tuple(d))

        desc = f"permute{tuple(refs)}"
    else:
        return _align_to(c)
    shape = [c.shape[p] for p in perm]
    names = [c.names[p] for p in perm]
    return Step(desc, run, lambda a, arrs: np.transpose(a, perm), shape, names)


def _align_to(c: Ctx):
    named_axes = [i for i, n in enumerate(c.names) if n is not None]
    full = len(named_axes) == c.ndim and c.flag()
    if full:
        listed = c.draw(st.permutations(named_axes))
    else:
        listed = c.draw(st.lists(st.sampled_from(named_axes), unique=True)) if named_axes else []
    order = [c.names[i] for i in listed]
    for _ in range(c.int(0, 1) if c.ndim < MAX_NDIM else 0):
        order.insert(c.int(0, len(order)), c.fresh(order))
    if not full:
        order.insert(c.int(0, len(order)), "...")
    rest = [i for i in range(c.ndim) if i not in listed]
    source = []  # input axis at each output position, -1 for a new size-1 dim
    out_names = []
    for n in order:
        if n == "...":
            source.extend(rest)
            out_names.extend(c.names[i] for i in rest)
        else:
            source.append(c.names.index(n) if n in c.names else -1)
            out_names.append(n)
    shape = [c.shape[s] if s >= 0 else 1 for s in source]
    perm = [s for s in source if s >= 0]
    spelled = tuple(Ellipsis if n == "..." and c.flag() else n for n in order)

    def run(t, xs, named):
        if named:
            return t.align_to(*spelled)
        return t.permute(*perm).reshape(shape)

    return Step(f"align_to{spelled}", run, lambda a, arrs: np.transpose(a, perm).reshape(shape), shape, out_names)


# ----------------------------------------------------------------------------- flatten / unflatten


def b_flatten(c: Ctx):
    if c.ndim == 0:
        out = c.fresh() if c.flag() else None
        return Step(f"flatten(0-dim, out_name={out!r})",
                    lambda t, xs, named: t.flatten(out_name=out if named else None),
                    lambda a, arrs: a.reshape(1), (1,), (out,))
    start = c.int(0, c.ndim - 1)
    stop = c.int(start + 1, c.ndim)
    merged = list(range(start, stop))
    merged_names = [c.names[i] for i in merged if c.names[i] is not None]
    if len(merged) == 1 and c.flag():
        out = None  # one dim flattened keeps its name
        out_name = c.names[start]
    elif not merged_names and c.flag():
        out = out_name = None
    else:
        out = out_name = c.pick(merged_names) if merged_names and c.flag() else c.fresh()
    refs = [c.ref(i) for i in merged]
    torch_form = c.flag()
    shape = c.shape[:start] + (numel(c.shape[start:stop]),) + c.shape[stop:]
    names = c.names[:start] + (out_name,) + c.names[stop:]

    def run(t, xs, named):
        if not named:
            return t.flatten(start, stop - 1)
        if torch_form:
            return t.flatten(refs[0], refs[-1], out_name=out) if out is not None else t.flatten(refs[0], refs[-1])
        return t.flatten(tuple(refs), out)

    desc = f"flatten({refs[0]!r}, {refs[-1]!r}, out_name={out!r})" if torch_form else f"flatten({refs}, {out!r})"
    return Step(desc, run, lambda a, arrs: a.reshape(shape), shape, names)


def b_reshape(c: Ctx):
    """``reshape``/``view`` to another factoring of the size; a named tensor gives ``names=``."""
    total = numel(c.shape)
    sizes = list(c.pick([(total,)] + _factorings(total)))
    names = []
    for _ in sizes:
        names.append(c.fresh(names) if c.flag() else None)
    names = tuple(names)
    spelled = list(sizes)
    if c.flag():
        spelled[c.int(0, len(sizes) - 1)] = -1
    need = any(n is not None for n in c.names) or any(n is not None for n in names) or c.flag()
    method = c.pick(["reshape", "view"])
    spread = c.flag()

    def run(t, xs, named):
        f = getattr(t, method)
        if named and need:
            return f(*spelled, names=names) if spread else f(tuple(spelled), names=names)
        return f(*spelled)

    return Step(f"{method}({spelled}, names={names if need else None})", run, lambda a, arrs: a.reshape(sizes),
                sizes, names if need else (None,) * len(sizes))


def _factorings(n):
    out = []
    for a in range(1, n + 1):
        if n % a == 0:
            out.append((a, n // a))
            for b in range(1, n // a + 1):
                if (n // a) % b == 0:
                    out.append((a, b, n // a // b))
    return out


def b_unflatten(c: Ctx):
    if c.ndim == 0 or c.ndim >= MAX_NDIM:
        return None
    ax = c.int(0, c.ndim - 1)
    sizes = list(c.pick(_factorings(c.shape[ax])))
    if len(sizes) + c.ndim - 1 > MAX_NDIM:
        sizes = sizes[:2]
        sizes[1] = c.shape[ax] // sizes[0]
    spelled = list(sizes)
    if c.flag():
        spelled[c.int(0, len(sizes) - 1)] = -1
    r = c.ref(ax)
    others = [n for i, n in enumerate(c.names) if i != ax]
    form = c.pick(["pairs", "names", "dict"] if c.names[ax] is not None else ["ints", "pairs", "names"])
    new = []
    for _ in sizes:
        if form in ("pairs", "names") and c.flag():
            new.append(None)
        else:
            n = c.fresh(tuple(others) + tuple(new)) if form != "ints" else None
            new.append(n)
    if c.names[ax] is not None and all(n is None for n in new):
        new[0] = c.fresh(tuple(others))  # a named dim keeps a name somewhere (it may reuse its own)
    if form == "dict" and len(set(new)) < len(new):
        form = "pairs"
    shape = c.shape[:ax] + tuple(sizes) + c.shape[ax + 1:]
    names = c.names[:ax] + tuple(new) + c.names[ax + 1:]

    def run(t, xs, named):
        d = pos(r, ax, named)
        if not named or form == "ints":
            return t.unflatten(d, tuple(spelled))
        if form == "names":
            return t.unflatten(d, tuple(spelled), names=tuple(new))
        if form == "dict":
            return t.unflatten(d, dict(zip(new, spelled)))
        return t.unflatten(d, tuple(zip(new, spelled)))

    return Step(f"unflatten({r!r}, {form}: {tuple(zip(new, spelled))})", run, lambda a, arrs: a.reshape(shape),
                shape, names)


# ----------------------------------------------------------------------------- unsqueeze / squeeze / expand


def b_unsqueeze(c: Ctx):
    ones = [i for i, s in enumerate(c.shape) if s == 1]
    kinds = (["unsqueeze"] if c.ndim < MAX_NDIM else []) + (["squeeze", "squeeze_all"] if ones else [])
    kinds += ["expand"] if ones or c.ndim < MAX_NDIM else []
    if not kinds:
        return None
    kind = c.pick(kinds)
    if kind == "unsqueeze":
        at = c.int(-(c.ndim + 1), c.ndim)
        ax = at if at >= 0 else at + c.ndim + 1
        name = c.fresh() if c.flag() else None
        bare = name is None and c.flag()
        shape = c.shape[:ax] + (1,) + c.shape[ax:]
        names = c.names[:ax] + (name,) + c.names[ax:]

        def run(t, xs, named):
            return t.unsqueeze(at) if bare else t.unsqueeze(at, name=name if named else None)

        return Step(f"unsqueeze({at}, name={name!r})", run, lambda a, arrs: np.expand_dims(a, ax), shape, names)
    if kind == "squeeze":
        axes = sorted(c.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True)))
        refs = [c.ref(a) for a in axes]
        single = len(axes) == 1 and c.flag()
        shape = tuple(s for i, s in enumerate(c.shape) if i not in axes)
        names = tuple(n for i, n in enumerate(c.names) if i not in axes)

        def run(t, xs, named):
            d = tuple(pos(r, a, named) for r, a in zip(refs, axes))
            return t.squeeze(d[0] if single else d)

        return Step(f"squeeze({refs})", run, lambda a, arrs: np.squeeze(a, tuple(axes)), shape, names)
    if kind == "squeeze_all":
        shape = tuple(s for s in c.shape if s != 1)
        names = tuple(n for s, n in zip(c.shape, c.names) if s != 1)
        return Step("squeeze()", lambda t, xs, named: t.squeeze(),
                    lambda a, arrs: np.squeeze(a, tuple(ones)), shape, names)
    lead = c.int(0, 1) if c.ndim < MAX_NDIM else 0
    sizes = [c.int(1, 2) for _ in range(lead)]
    shape = list(sizes)
    for s in c.shape:
        grow = c.int(1, 3) if s == 1 and c.flag() else s
        sizes.append(-1 if grow == s and c.flag() else grow)
        shape.append(grow)
    if numel(shape) > MAX_NUMEL:
        return None
    names = (None,) * lead + c.names
    return Step(f"expand{tuple(sizes)}", lambda t, xs, named: t.expand(*sizes),
                lambda a, arrs: np.broadcast_to(a, tuple(shape)).copy(), shape, names)


# ----------------------------------------------------------------------------- indexing


def _slice(c: Ctx, size):
    """A random slice with at least one element along a dim of ``size``, and its length."""
    s = slice(c.pick([None] + list(range(-size, size))), c.pick([None] + list(range(-size - 1, size + 1))),
              c.pick([None, 1, 2, -1, -2]))
    n = len(range(size)[s])
    return (s, n) if n else (slice(None), size)


def _int(c: Ctx, lo, hi):
    """An int index, sometimes as a NumPy integer (which indexes like an int)."""
    i = c.int(lo, hi)
    return np.int64(i) if c.flag() and c.flag() else i


def b_index(c: Ctx):
    if c.ndim == 0:
        return None
    kind = c.pick(["dict", "isel", "select", "narrow", "positional", "index_tensor", "mask"])
    if kind == "isel" and all(n is None for n in c.names):
        kind = "dict"
    if kind in ("dict", "isel"):
        pool = [i for i in range(c.ndim) if c.names[i] is not None] if kind == "isel" else list(range(c.ndim))
        axes = c.draw(st.lists(st.sampled_from(pool), min_size=1, unique=True))
        vals, keep = {}, {}
        for a in axes:
            if c.flag():
                vals[a] = _int(c, -c.shape[a], c.shape[a] - 1)
            else:
                vals[a], keep[a] = _slice(c, c.shape[a])
        refs = {a: (c.names[a] if kind == "isel" else c.ref(a)) for a in axes}
        ints = [a for a in axes if a not in keep]
        shape = tuple(keep.get(i, s) for i, s in enumerate(c.shape) if i not in ints)
        names = tuple(n for i, n in enumerate(c.names) if i not in ints)

        def run(t, xs, named):
            if kind == "isel" and named:
                return t.isel(**{refs[a]: vals[a] for a in axes})
            return t[{pos(refs[a], a, named): vals[a] for a in axes}]

        key = tuple(vals.get(i, slice(None)) for i in range(c.ndim))
        return Step(f"{kind}{ {refs[a]: vals[a] for a in axes} }", run, lambda a, arrs: a[key], shape, names)
    if kind in ("select", "narrow"):
        ax = c.int(0, c.ndim - 1)
        r = c.ref(ax)
        size = c.shape[ax]
        if kind == "select":
            i = c.int(-size, size - 1)
            key = (slice(None),) * ax + (i,)
            shape = c.shape[:ax] + c.shape[ax + 1:]
            names = c.names[:ax] + c.names[ax + 1:]
            return Step(f"select({r!r}, {i})", lambda t, xs, named: t.select(pos(r, ax, named), i),
                        lambda a, arrs: a[key], shape, names)
        start = c.int(0, size - 1)
        length = c.int(1, size - start)
        key = (slice(None),) * ax + (slice(start, start + length),)
        shape = c.shape[:ax] + (length,) + c.shape[ax + 1:]
        return Step(f"narrow({r!r}, {start}, {length})",
                    lambda t, xs, named: t.narrow(pos(r, ax, named), start, length),
                    lambda a, arrs: a[key], shape, c.names)
    if kind == "positional":
        items, shape, names = [], [], []
        for ax in range(c.ndim):
            how = c.pick(["int", "slice", "full"])
            if how == "int":
                items.append(("int", _int(c, -c.shape[ax], c.shape[ax] - 1), ax))
            elif how == "slice":
                s, n = _slice(c, c.shape[ax])
                items.append(("slice", s, ax, n))
            else:
                items.append(("slice", slice(None), ax, c.shape[ax]))
        lo = c.int(0, c.ndim)
        hi = c.int(lo, c.ndim)
        use_ellipsis = c.flag()
        tokens = []
        for i, it in enumerate(items):
            if use_ellipsis and i == lo:
                tokens.append(("ellipsis", list(range(lo, hi))))
            if use_ellipsis and lo <= i < hi:
                continue
            tokens.append(it)
        if use_ellipsis and lo == c.ndim:
            tokens.append(("ellipsis", []))
        if not use_ellipsis:
            while tokens and tokens[-1][0] == "slice" and tokens[-1][1] == slice(None) and c.flag():
                tokens.pop()
        if c.ndim < MAX_NDIM:
            for _ in range(c.int(0, 1)):
                tokens.insert(c.int(0, len(tokens)), ("new",))
        key = []
        covered = set()
        for tok in tokens:
            if tok[0] == "int":
                key.append(tok[1])
                covered.add(tok[2])
            elif tok[0] == "slice":
                key.append(tok[1])
                covered.add(tok[2])
                shape.append(tok[3])
                names.append(c.names[tok[2]])
            elif tok[0] == "new":
                key.append(None)
                shape.append(1)
                names.append(None)
            else:
                key.append(Ellipsis)
                covered.update(tok[1])
                shape.extend(c.shape[a] for a in tok[1])
                names.extend(c.names[a] for a in tok[1])
        rest = [a for a in range(c.ndim) if a not in covered]
        shape.extend(c.shape[a] for a in rest)
        names.extend(c.names[a] for a in rest)
        key = tuple(key)
        bare = len(key) == 1 and c.flag()

        def run(t, xs, named):
            return t[key[0]] if bare else t[key]

        return Step(f"getitem{key}", run, lambda a, arrs: a[key[0]] if bare else a[key], shape, names)
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    size = c.shape[ax]
    if kind == "mask":
        mask = np.array([c.flag() for _ in range(size)])
        if not mask.any():
            mask[c.int(0, size - 1)] = True
        shape = c.shape[:ax] + (int(mask.sum()),) + c.shape[ax + 1:]
        names = c.names[:ax] + (None,) + c.names[ax + 1:]

        def run(t, xs, named):
            return t[{pos(r, ax, named): nt.tensor(mask)}]

        return Step(f"getitem{{{r!r}: mask {mask.tolist()}}}", run, lambda a, arrs: np.compress(mask, a, axis=ax),
                    shape, names)
    idx = np.array(c.draw(st.lists(st.integers(-size, size - 1), min_size=1, max_size=4)), dtype=np.int64)
    others = tuple(n for i, n in enumerate(c.names) if i != ax)
    new = c.fresh(others) if c.flag() else None
    form = c.pick(["index_select", "dict", "positional"])
    if form == "index_select":
        idx = idx % size  # index_select takes no negative indices in PyTorch; keep to what both allow
    shape = c.shape[:ax] + (len(idx),) + c.shape[ax + 1:]
    names = c.names[:ax] + ((new,) if new is not None else (c.names[ax],)) + c.names[ax + 1:]

    def run(t, xs, named):
        i = nt.tensor(idx, names=(new,) if named else None)
        d = pos(r, ax, named)
        if form == "index_select":
            return t.index_select(d, i)
        if form == "dict":
            return t[{d: i}]
        return t[(slice(None),) * ax + (i,)]

    return Step(f"{form}({r!r}, {idx.tolist()} named {new!r})", run, lambda a, arrs: np.take(a, idx, axis=ax),
                shape, names)


def b_advanced(c: Ctx):
    """Positional keys with one or two index tensors among ints, slices and ``None`` (NumPy's placement:
    adjacent advanced indices, ints included, put their result where the first was, else in front)."""
    if c.ndim == 0:
        return None
    rng = c.seed_rng()
    arrays = [c.int(0, c.ndim - 1)]
    if c.ndim >= 2 and c.flag():
        arrays.append(c.pick([a for a in range(c.ndim) if a != arrays[0]]))
    length = c.int(1, 3)
    lengths = {a: (1 if len(arrays) == 2 and i == 1 and c.flag() else length) for i, a in enumerate(arrays)}
    label = c.fresh() if c.flag() else None
    idx_names = {a: (label if c.flag() else None) for a in arrays}
    idx = {a: rng.integers(-c.shape[a], c.shape[a], size=lengths[a]) for a in arrays}
    items = []  # (kind, value, axis)
    for ax in range(c.ndim):
        if ax in idx:
            items.append(("array", idx[ax], ax))
        else:
            how = c.pick(["int", "full", "slice"])
            if how == "int":
                items.append(("int", _int(c, -c.shape[ax], c.shape[ax] - 1), ax))
            else:
                sl, n = _slice(c, c.shape[ax]) if how == "slice" else (slice(None), c.shape[ax])
                items.append(("slice", sl, ax, n))
    if c.ndim < MAX_NDIM and c.flag():
        items.insert(c.int(0, len(items)), ("new",))
    while items and items[-1][0] == "slice" and items[-1][1] == slice(None) and c.flag():
        items.pop()
    # the expected names, by NumPy's placement rule
    adv = [i for i, it in enumerate(items) if it[0] in ("int", "array")]
    adjacent = adv == list(range(adv[0], adv[0] + len(adv)))
    res_len = max(lengths.values())
    if len(arrays) == 1:
        a = arrays[0]
        res_name = idx_names[a] if idx_names[a] is not None else c.names[a]
    else:
        res_name = label if any(idx_names[a] is not None for a in arrays) else None
    kept, at = [], 0
    for i, it in enumerate(items):
        if it[0] == "slice":
            kept.append((it[3], c.names[it[2]]))
        elif it[0] == "new":
            kept.append((1, None))
        if adjacent and i < adv[0] and it[0] in ("slice", "new"):
            at += 1
    covered = {it[2] for it in items if len(it) > 2}
    kept += [(c.shape[a], c.names[a]) for a in range(c.ndim) if a not in covered]
    if not adjacent:
        at = 0
    out = kept[:at] + [(res_len, res_name)] + kept[at:]
    shape = tuple(s for s, _ in out)
    names = tuple(n for _, n in out)
    by_dict = all(it[0] != "new" for it in items) and c.flag()
    refs = {a: c.ref(a) for a in range(c.ndim)}

    def run(t, xs, named):
        key = []
        for it in items:
            if it[0] == "array":
                key.append(nt.tensor(it[1], names=(idx_names[it[2]],) if named else None))
            else:
                key.append(None if it[0] == "new" else it[1])
        if by_dict:
            return t[{pos(refs[it[2]], it[2], named): k for it, k in zip(items, key)}]
        return t[tuple(key)]

    np_key = tuple(None if it[0] == "new" else it[1] for it in items)
    desc = [f"idx{it[1].tolist()}{idx_names[it[2]]!r}" if it[0] == "array" else repr(np_key[i])
            for i, it in enumerate(items)]
    return Step(f"getitem[{', '.join(desc)}]{' by dict' if by_dict else ''}", run, lambda a, arrs: a[np_key],
                shape, names)


def b_gather(c: Ctx):
    if c.ndim == 0:
        return None
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    kind = c.pick(["argmax", "argsort", "random"])
    if kind == "argmax":
        shape = c.shape[:ax] + (1,) + c.shape[ax + 1:]

        def run(t, xs, named):
            d = pos(r, ax, named)
            return t.gather(d, t.argmax(d, keepdim=True))

        return Step(f"gather({r!r}, argmax)", run,
                    lambda a, arrs: np.take_along_axis(a, np.argmax(a, axis=ax, keepdims=True), ax), shape, c.names)
    if kind == "argsort":
        big = c.flag()

        def run(t, xs, named):
            d = pos(r, ax, named)
            return nt.gather(t.tanh(), d, t.argsort(d, descending=big))

        def ref(a, arrs):
            s = np.take_along_axis(np.tanh(a), np.argsort(a, axis=ax), ax)
            return np.flip(s, ax) if big else s

        return Step(f"gather(tanh, {r!r}, argsort(descending={big}))", run, ref, c.shape, c.names)
    rng = c.seed_rng()
    shape = tuple(c.int(1, 4) if i == ax else c.int(1, s) for i, s in enumerate(c.shape))
    idx = rng.integers(0, c.shape[ax], size=shape)
    inames = tuple((c.fresh() if c.flag() else None) if i == ax else (n if c.flag() else None)
                   for i, n in enumerate(c.names))
    names = tuple(inames[i] if i == ax and inames[i] is not None else n for i, n in enumerate(c.names))
    crop = tuple(slice(None) if i == ax else slice(0, s) for i, s in enumerate(shape))

    def run(t, xs, named):
        return t.gather(pos(r, ax, named), nt.tensor(idx, names=inames if named else None))

    return Step(f"gather({r!r}, idx{shape}{inames})", run,
                lambda a, arrs: np.take_along_axis(a[crop], idx, ax), shape, names)


# ----------------------------------------------------------------------------- joining


def _copy(c: Ctx):
    """A tensor like the current one, made from it: (desc, f(t, named), mirror)."""
    kind = c.pick(["self", "flip", "scaled", "tanh", "unnamed"] if c.ndim else ["self", "scaled", "tanh"])
    if kind == "self":
        return "t", lambda t, named: t, lambda a: a
    if kind == "scaled":
        return "t*2", lambda t, named: t * 2.0, lambda a: a * 2.0
    if kind == "tanh":
        return "t.tanh()", lambda t, named: t.tanh(), np.tanh
    if kind == "unnamed":
        return "t.rename(None)", lambda t, named: t.rename(None), lambda a: a
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    return f"t.flip({r!r})", lambda t, named: t.flip(pos(r, ax, named)), lambda a: np.flip(a, ax)


def b_join(c: Ctx):
    kinds = ["stack"] if c.ndim < MAX_NDIM else []
    if c.ndim:
        kinds += ["cat", "chunk_cat", "split_pick", "split_combine", "unbind_stack"]
    kind = c.pick(kinds)
    if kind in ("cat", "stack"):
        copies = [_copy(c) for _ in range(c.int(1, 2))]
        at = c.int(0, len(copies))
        n = len(copies) + 1
        if kind == "cat":
            ax = c.int(0, c.ndim - 1)
            r = c.ref(ax)
            shape = c.shape[:ax] + (c.shape[ax] * n,) + c.shape[ax + 1:]
            names = c.names
            fn = c.pick([nt.cat, nt.concat])
        else:
            by_name = c.flag()
            if by_name:
                new = c.fresh()
                ax, r = 0, new
                names = (new,) + c.names
            else:
                r = c.int(-(c.ndim + 1), c.ndim)
                ax = r if r >= 0 else r + c.ndim + 1
                names = c.names[:ax] + (None,) + c.names[ax:]
            shape = c.shape[:ax] + (n,) + c.shape[ax:]
            fn = nt.stack
        if numel(shape) > MAX_NUMEL:
            return None

        def run(t, xs, named):
            parts = [f(t, named) for _, f, _ in copies]
            parts.insert(at, t)
            d = (0 if isinstance(r, str) else r) if kind == "stack" and not named else pos(r, ax, named)
            return fn(parts, dim=d)

        def ref(a, arrs):
            parts = [g(a) for _, _, g in copies]
            parts.insert(at, a)
            return np.concatenate(parts, axis=ax) if kind == "cat" else np.stack(parts, axis=ax)

        descs = [d for d, _, _ in copies]
        descs.insert(at, "t")
        return Step(f"{kind}([{', '.join(descs)}], dim={r!r})", run, ref, shape, names)
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    size = c.shape[ax]
    if kind == "chunk_cat":
        k = c.int(1, 4)
        step = -(-size // k)
        bounds = list(range(step, size, step))

        def run(t, xs, named):
            d = pos(r, ax, named)
            return nt.cat(t.chunk(k, d)[::-1], dim=d)

        def ref(a, arrs):
            return np.concatenate(np.split(a, bounds, axis=ax)[::-1], axis=ax)

        return Step(f"cat(chunk({k}, {r!r})[::-1])", run, ref, c.shape, c.names)
    if kind == "split_combine":
        # two pieces of one split, combined: the split's other pieces get no gradient
        n = c.int(1, max(size // 2, 1))
        count = size // n
        i, j = c.int(0, count - 1), c.int(0, count - 1)
        key_i = (slice(None),) * ax + (slice(i * n, i * n + n),)
        key_j = (slice(None),) * ax + (slice(j * n, j * n + n),)
        shape = c.shape[:ax] + (n,) + c.shape[ax + 1:]
        by_unbind = n == 1 and c.flag()

        def run(t, xs, named):
            d = pos(r, ax, named)
            if by_unbind:
                pieces = t.unbind(d)
                return (pieces[i] * pieces[j].tanh()).unsqueeze(ax, name=c.names[ax] if named else None)
            pieces = t.split(n, d)
            return pieces[i] * pieces[j].tanh()

        return Step(f"split({n}, {r!r}) [{i}] * tanh([{j}]){' by unbind' if by_unbind else ''}", run,
                    lambda a, arrs: a[key_i] * np.tanh(a[key_j]), shape, c.names)
    if kind == "split_pick":
        if c.flag():
            n = c.int(1, size)
            sizes = [n] * (size // n) + ([size % n] if size % n else [])
            arg = n
        else:
            cuts = sorted(c.draw(st.lists(st.integers(1, max(size - 1, 1)), unique=True, max_size=2)))
            cuts = [x for x in cuts if x < size]
            edges = [0] + cuts + [size]
            sizes = [b - a for a, b in zip(edges, edges[1:])]
            arg = sizes
        i = c.int(0, len(sizes) - 1)
        start = sum(sizes[:i])
        key = (slice(None),) * ax + (slice(start, start + sizes[i]),)
        shape = c.shape[:ax] + (sizes[i],) + c.shape[ax + 1:]
        return Step(f"split({arg}, {r!r})[{i}]", lambda t, xs, named: t.split(arg, pos(r, ax, named))[i],
                    lambda a, arrs: a[key], shape, c.names)
    # unbind, reverse, stack back at a new place
    rest_shape = c.shape[:ax] + c.shape[ax + 1:]
    rest_names = c.names[:ax] + c.names[ax + 1:]
    if c.flag():
        new = c.fresh(rest_names)
        at, d = 0, new
        names = (new,) + rest_names
    else:
        d = c.int(-(c.ndim), c.ndim - 1)
        at = d if d >= 0 else d + c.ndim
        names = rest_names[:at] + (None,) + rest_names[at:]
    shape = rest_shape[:at] + (size,) + rest_shape[at:]

    def run(t, xs, named):
        return nt.stack(t.unbind(pos(r, ax, named))[::-1], dim=d if named or not isinstance(d, str) else 0)

    def ref(a, arrs):
        return np.stack([np.take(a, i, axis=ax) for i in range(size)][::-1], axis=at)

    return Step(f"stack(unbind({r!r})[::-1], dim={d!r})", run, ref, shape, names)


# ----------------------------------------------------------------------------- contractions


def _letters(labels, table):
    return "".join(table.setdefault(x, "abcdefghijklmnop"[len(table)]) for x in labels)


def b_matmul(c: Ctx):
    if c.ndim == 0:
        return None
    fully_named = all(n is not None for n in c.names)
    kind = c.pick(["t@W", "W@t", "nt.matmul", "outer"] + (["gram"] if c.ndim >= 2 else [])
                  + (["dot", "dot_rev", "einsum"] if fully_named else []))
    rng = c.seed_rng()
    if kind == "gram":
        # t @ t.mT, the second operand's last dim renamed so that the output names stay distinct
        row = c.names[-2]
        new = c.fresh() if row is not None else None
        shape = c.shape[:-1] + (c.shape[-2],)
        if numel(shape) > MAX_NUMEL:
            return None

        def run(t, xs, named):
            u = t.mT
            if named and row is not None:
                u = u.rename(**{row: new})
            return t @ u

        return Step(f"t @ t.mT.rename({row}={new!r})", run, lambda a, arrs: a @ np.swapaxes(a, -1, -2), shape,
                    c.names[:-1] + (new,))
    if kind == "outer":
        if c.ndim >= MAX_NDIM:
            return None
        new = c.fresh() if c.flag() else None
        # the other factor: a constant vector, or an input summed down to one of its dims and renamed
        k = c.int(0, len(c.inputs) - 1)
        arr, in_names = c.inputs[k]
        j = c.int(0, arr.ndim - 1) if arr.ndim and c.flag() else None
        m = c.int(1, 3) if j is None else arr.shape[j]
        v = rng.uniform(-1, 1, size=(m,))
        shape, names = c.shape + (m,), c.names + (new,)
        if numel(shape) > MAX_NUMEL:
            return None
        drop = tuple(i for i in range(arr.ndim) if i != j)

        def vector(xs, named):
            if j is None:
                return nt.tensor(v, names=(new,) if named else None)
            u = xs[k].sum(drop) if drop else xs[k]
            return u.rename(new) if named else u

        def ref(a, arrs):
            u = v if j is None else (np.sum(arrs[k], axis=drop) if drop else arrs[k])
            return np.multiply.outer(a, u)

        return Step(f"outer(t, {'v' if j is None else f'x{k}.sum({drop})'}({m},){new!r})",
                    lambda t, xs, named: nt.outer(t, vector(xs, named)), ref, shape, names)
    if kind in ("t@W", "nt.matmul", "W@t"):
        right = kind != "W@t"
        k = c.shape[-1] if right or c.ndim == 1 else c.shape[-2]
        kname = (c.names[-1] if right or c.ndim == 1 else c.names[-2]) if c.flag() else None
        vec = c.flag()
        m = c.int(1, 3)
        other = c.fresh() if c.flag() else None
        bshape, bnames = (), ()  # a batch dim of W: t's own (named or not, broadcast or not) or a new one
        if c.ndim >= 2 and not vec and c.flag():
            bshape = (c.pick([1, c.shape[-3]]) if c.ndim >= 3 else c.int(1, 2),)
            bnames = (c.names[-3] if c.ndim >= 3 and c.flag() else None,)
        if vec:
            wshape, wnames = (k,), (kname,)
        elif right:
            wshape, wnames = bshape + (k, m), bnames + (kname, other)
        else:
            wshape, wnames = bshape + (m, k), bnames + (other, kname)
        w = rng.uniform(-1, 1, size=wshape)
        ref_fn = (lambda a, arrs: np.matmul(a, w)) if right else (lambda a, arrs: np.matmul(w, a))
        shape = ref_fn(np.zeros(c.shape), None).shape
        if numel(shape) > MAX_NUMEL or len(shape) > MAX_NDIM:
            return None
        # expected names: t's batch dims (W's batch dim, if any, is t's or unnamed), then the kept matrix dims
        if right:
            if vec:
                names = c.names[:-1]
            elif c.ndim == 1:
                names = (other,)
            else:
                names = c.names[:-1] + (other,)
        else:
            if vec:
                names = c.names[:-2] + c.names[-1:] if c.ndim >= 2 else ()
            elif c.ndim == 1:
                names = (other,)
            else:
                names = c.names[:-2] + (other, c.names[-1])
        names = (None,) * (len(shape) - len(names)) + tuple(names)
        as_array = c.flag() and all(n is None for n in wnames)

        def run(t, xs, named):
            W = w if as_array else nt.tensor(w, names=wnames if named else None)
            if kind == "nt.matmul":
                return nt.matmul(t, W)
            return t @ W if right else W @ t

        return Step(f"{kind} W{wshape}{wnames}{' array' if as_array else ''}", run, ref_fn, shape, names)
    # by name: contract one name of t with a matrix (or vector) W
    ax = c.int(0, c.ndim - 1)
    over = c.names[ax]
    others = [i for i in range(c.ndim) if i != ax]
    vec = c.flag()
    m = c.int(1, 3)
    new = c.fresh()
    w_first = c.flag()
    wlabels = [over] if vec else ([new, over] if w_first else [over, new])
    wshape = tuple(c.shape[ax] if n == over else m for n in wlabels)
    w = rng.uniform(-1, 1, size=wshape)
    default = [c.names[i] for i in others] + ([] if vec else [new])
    if kind == "dot_rev":
        default = ([] if vec else [new]) + [c.names[i] for i in others]
    out = list(default)
    give_out = c.flag()
    if give_out:
        out = list(c.draw(st.permutations(default)))
    size = dict(zip(c.names, c.shape))
    size[new] = m
    shape = tuple(size[n] for n in out)
    if numel(shape) > MAX_NUMEL:
        return None
    table = {}
    spec = f"{_letters(c.names, table)},{_letters(wlabels, table)}->{_letters(out, table)}"
    # unnamed: put the contracted dim last, matmul, then permute into out's order
    mat = w if vec or not w_first else w.T
    before = [c.names[i] for i in others] + ([] if vec else [new])
    perm = [before.index(n) for n in out]

    def run(t, xs, named):
        if named:
            W = nt.tensor(w, names=tuple(wlabels))
            if kind == "einsum":
                return nt.einsum(f"{' '.join(c.names)}, {' '.join(wlabels)} -> {' '.join(out)}", t, W)
            args = (t, W) if kind == "dot" else (W, t)
            return nt.dot(*args, over=over, out=tuple(out)) if give_out else nt.dot(*args, over=over)
        y = t.permute(*others, ax) @ nt.tensor(mat)
        return y.permute(*perm) if perm else y

    return Step(f"{kind}(over={over!r}, W{wshape}{tuple(wlabels)}, out={tuple(out)})", run,
                lambda a, arrs: np.einsum(spec, a, w), shape, out, exact=False)


# ----------------------------------------------------------------------------- where / masked_fill


def b_where(c: Ctx):
    rng = c.seed_rng()
    m = c.int(0, c.ndim)
    mshape = tuple(s if c.flag() else 1 for s in c.shape[c.ndim - m:])
    mnames = tuple(n if c.flag() else None for n in c.names[c.ndim - m:])
    kind = c.pick(["masked_fill", "masked_fill_input", "where_scalar", "where_copy", "where_array"])
    if kind.startswith("where") and m == c.ndim and c.ndim < MAX_NDIM and c.flag():
        # a condition with one more dim than the tensors: the result grows to its shape
        mshape, mnames = (c.int(2, 3),) + mshape, ((c.fresh() if c.flag() else None),) + mnames
    mask = rng.random(mshape) < 0.5
    as_array = c.flag()
    shape = np.broadcast_shapes(c.shape, mshape)
    names = (None,) * (len(shape) - c.ndim) + c.names
    if len(shape) > c.ndim and not as_array:
        names = mnames[:1] + c.names
    k = c.int(0, len(c.inputs) - 1)
    value = c.pick([0.0, -1.5, 2.5])
    other = rng.uniform(-2, 2, size=c.shape[c.ndim - c.int(0, c.ndim):])
    swap = c.flag()

    def cond(named):
        if as_array:
            return mask
        return nt.tensor(mask, names=mnames if named else None)

    def run(t, xs, named):
        mk = cond(named)
        if kind == "masked_fill":
            return t.masked_fill(mk, value)
        if kind == "masked_fill_input":
            return t.masked_fill(mk, xs[k].sum().tanh())
        o = value if kind == "where_scalar" else other if kind == "where_array" else t * 0.5
        return nt.where(mk, o, t) if swap else nt.where(mk, t, o)

    def ref(a, arrs):
        if kind == "masked_fill":
            return np.where(mask, value, a)
        if kind == "masked_fill_input":
            return np.where(mask, np.tanh(np.sum(arrs[k])), a)
        o = value if kind == "where_scalar" else other if kind == "where_array" else a * 0.5
        return np.where(mask, o, a) if swap else np.where(mask, a, o)

    return Step(f"{kind}(mask{mshape}{mnames if not as_array else ' array'}, swap={swap})", run, ref,
                shape, names)


def b_where_self(c: Ctx):
    """``where`` on a condition computed from the tensor: comparisons, logical ops, ``any``/``all``
    (thresholds stay away from the values that ops make exact: 0, integers, pad values)."""
    lo, hi = c.pick([(-0.7, 0.3), (0.3, 1.3), (-1.3, -0.3)])
    how = c.pick(["gt", "lt_or", "and_not", "any", "all"] if c.ndim else ["gt", "lt_or", "and_not"])
    if how in ("any", "all"):
        ax = c.int(0, c.ndim - 1)
        r = c.ref(ax)

    def cond(t, named):
        if how == "gt":
            return t > lo
        if how == "lt_or":
            return (t < lo) | nt.logical_and(t > hi, t.isfinite())
        if how == "and_not":
            return (t > lo) & ~(t > hi)
        big = (t > lo)
        return big.any(pos(r, ax, named), keepdim=True) if how == "any" else big.all(pos(r, ax, named), keepdim=True)

    def np_cond(a):
        if how == "gt":
            return a > lo
        if how == "lt_or":
            return (a < lo) | ((a > hi) & np.isfinite(a))
        if how == "and_not":
            return (a > lo) & ~(a > hi)
        return (np.any if how == "any" else np.all)(a > lo, axis=ax, keepdims=True)

    def run(t, xs, named):
        return nt.where(cond(t, named), t.tanh(), t * t)

    return Step(f"where({how} {lo}/{hi}, tanh, square)", run,
                lambda a, arrs: np.where(np_cond(a), np.tanh(a), a * a), c.shape, c.names)


# ----------------------------------------------------------------------------- pad, flip, roll, sort, tril


def _np_pad(a, widths, value):
    crop = tuple(slice(-b if b < 0 else 0, s + e if e < 0 else s) for (b, e), s in zip(widths, a.shape))
    return np.pad(a[crop], [(max(b, 0), max(e, 0)) for b, e in widths], constant_values=value)


def b_pad(c: Ctx):
    if c.ndim == 0:
        return None
    widths = [(0, 0)] * c.ndim
    flat_form = c.flag()
    if flat_form:
        k = c.int(1, min(c.ndim, 2))
        axes = list(range(c.ndim - k, c.ndim))
    else:
        axes = c.axes(1, 2)
    for a in axes:
        b, e = c.int(-1, 2), c.int(-1, 2)
        widths[a] = (b, e) if c.shape[a] + min(b, 0) + min(e, 0) >= 1 else (0, 1)
    value = c.pick([0.0, 1.5, -2.0])
    shape = tuple(s + b + e for s, (b, e) in zip(c.shape, widths))
    if numel(shape) > MAX_NUMEL:
        return None
    refs = {a: c.ref(a) for a in axes}
    flat = []
    for a in reversed(axes):
        flat.extend(widths[a])
    fn = c.flag()

    def run(t, xs, named):
        p = tuple(flat) if flat_form else {pos(refs[a], a, named): widths[a] for a in axes}
        return nt.pad(t, p, value=value) if fn else t.pad(p, value)

    desc = f"pad({tuple(flat) if flat_form else {refs[a]: widths[a] for a in axes}}, {value})"
    return Step(desc, run, lambda a, arrs: _np_pad(a, widths, value), shape, c.names)


def b_move(c: Ctx):
    if c.ndim == 0:
        return None
    kind = c.pick(["flip", "roll", "sort", "topk"] + (["tril", "triu"] if c.ndim >= 2 else []))
    if kind == "flip":
        axes = c.axes()
        refs = [c.ref(a) for a in axes]
        form = c.int(0, 2)

        def run(t, xs, named):
            d = [pos(r, a, named) for r, a in zip(refs, axes)]
            return t.flip(*d) if form == 0 else t.flip(tuple(d)) if form == 1 else nt.flip(t, *d)

        return Step(f"flip{tuple(refs)}", run, lambda a, arrs: np.flip(a, tuple(axes)), c.shape, c.names)
    if kind == "roll":
        how = c.pick(["one", "tuple", "flat"])
        if how == "flat":
            s = c.int(-5, 5)
            return Step(f"roll({s})", lambda t, xs, named: t.roll(s),
                        lambda a, arrs: np.roll(a, s), c.shape, c.names)
        axes = c.axes(1, 1 if how == "one" else None)
        refs = [c.ref(a) for a in axes]
        shifts = [c.int(-5, 5) for _ in axes]

        def run(t, xs, named):
            d = [pos(r, a, named) for r, a in zip(refs, axes)]
            return t.roll(shifts[0], d[0]) if how == "one" else nt.roll(t, tuple(shifts), tuple(d))

        return Step(f"roll({shifts}, {refs})", run, lambda a, arrs: np.roll(a, shifts, tuple(axes)),
                    c.shape, c.names)
    if kind in ("tril", "triu"):
        k = c.int(-1, 1)
        f = np.tril if kind == "tril" else np.triu
        return Step(f"{kind}({k})", lambda t, xs, named: getattr(t, kind)(k), lambda a, arrs: f(a, k),
                    c.shape, c.names)
    ax = c.int(0, c.ndim - 1)
    r = c.ref(ax)
    big = c.flag()
    if kind == "sort":
        def ref(a, arrs):
            s = np.sort(a, axis=ax)
            return np.flip(s, ax) if big else s

        return Step(f"sort({r!r}, descending={big}).values",
                    lambda t, xs, named: t.sort(pos(r, ax, named), descending=big).values, ref, c.shape, c.names)
    k = c.int(1, c.shape[ax])
    key = (slice(None),) * ax + (slice(0, k),)

    def ref(a, arrs):
        s = np.sort(a, axis=ax)
        return (np.flip(s, ax) if big else s)[key]

    shape = c.shape[:ax] + (k,) + c.shape[ax + 1:]
    return Step(f"topk({k}, {r!r}, largest={big}).values",
                lambda t, xs, named: t.topk(k, pos(r, ax, named), largest=big).values, ref, shape, c.names)


# ----------------------------------------------------------------------------- naming


def b_naming(c: Ctx):
    named = [i for i, n in enumerate(c.names) if n is not None]
    unnamed = [i for i, n in enumerate(c.names) if n is None]
    kind = c.pick(["rename_all"] + (["rename_map", "rename_none"] if named else []) + (["refine"] if unnamed else []))
    names = list(c.names)
    if kind == "rename_map":
        ax = c.pick(named)
        old, new = c.names[ax], (c.fresh() if c.flag() else None)
        names[ax] = new
        spelled = {old: new}
        desc = f"rename({old}={new!r})"
    elif kind == "rename_none":
        names = [None] * c.ndim
        spelled = (None,)
        desc = "rename(None)"
    else:
        # rename_all gives new names (or None); refine_names only names unnamed dims.  With '...'
        # the leading dims keep their names.
        for i in range(c.ndim) if kind == "rename_all" else unnamed:
            names[i] = c.fresh(names) if c.flag() or kind == "refine" else None
        lead = c.int(0, c.ndim) if c.flag() else 0
        names[:lead] = c.names[:lead]
        spelled = (("...",) if lead else ()) + tuple(names[lead:])
        desc = f"{'rename' if kind == 'rename_all' else 'refine_names'}{spelled}"

    def run(t, xs, is_named):
        if not is_named:
            return t
        if kind == "rename_map":
            return t.rename(**spelled)
        return t.rename(*spelled) if kind != "refine" else t.refine_names(*spelled)

    return Step(desc, run, lambda a, arrs: a, c.shape, names)


# ----------------------------------------------------------------------------- in place


def _region(c: Ctx):
    """A basic key (dict by name or positional) and the boolean mask of the elements it selects."""
    by_dict = c.flag()
    key, np_key = {}, []
    for ax in range(c.ndim):
        how = c.pick(["full", "int", "slice"])
        v = slice(None) if how == "full" else _int(c, -c.shape[ax], c.shape[ax] - 1) if how == "int" \
            else _slice(c, c.shape[ax])[0]
        np_key.append(v)
        if how != "full":
            key[c.ref(ax)] = (v, ax)
    mask = np.zeros(c.shape, dtype=bool)
    mask[tuple(np_key)] = True

    def spell(named):
        if by_dict:
            return {pos(r, ax, named): v for r, (v, ax) in key.items()}
        return tuple(np_key)

    return spell, mask, tuple(np_key)


def b_inplace(c: Ctx):
    """In-place ops on a clone of the current tensor.  They refuse tensors that require grad while a graph
    is recorded, so with grad mode on (most runs) a step runs the out-of-place equivalent; the no_grad run
    of test_names_never_change_values runs them in place, and must give the same values."""
    kind = c.pick(["add_", "sub_", "mul_", "div_", "iadd", "imul", "clamp_", "copy_", "fill_", "masked_fill_"]
                  + (["setitem", "view_mul_"] if c.ndim else []))
    value = c.pick([0.0, -1.5, 2.5])
    if kind in ("setitem", "view_mul_"):
        spell, mask, np_key = _region(c)
        scalar = kind == "setitem" and c.flag()

        def run(t, xs, named):
            if nt.is_grad_enabled():
                return nt.where(mask, value if scalar else t.tanh() if kind == "setitem" else t * 2.0, t)
            u = t.clone()
            if kind == "setitem":
                u[spell(named)] = value if scalar else u.tanh()[spell(named)]
            else:
                u[spell(named)].mul_(2.0)  # through a view: the write shows in u
            return u

        def ref(a, arrs):
            return np.where(mask, value if scalar else np.tanh(a) if kind == "setitem" else a * 2.0, a)

        return Step(f"{kind}[{np_key}]{' = ' + repr(value) if scalar else ''}", run, ref, c.shape, c.names)
    if kind in ("fill_", "masked_fill_"):
        m = np.random.default_rng(c.int(0, 99)).random(c.shape[c.ndim - c.int(0, c.ndim):]) < 0.5

        def run(t, xs, named):
            if nt.is_grad_enabled():
                return t * 0.0 + value if kind == "fill_" else t.masked_fill(m, value)
            u = t.clone()
            return u.fill_(value) if kind == "fill_" else u.masked_fill_(nt.tensor(m), value)

        def ref(a, arrs):
            return a * 0.0 + value if kind == "fill_" else np.where(m, value, a)

        return Step(f"{kind}({value})", run, ref, c.shape, c.names)
    source = c.pick(["input", "self", "flip", "scalar", "array"] if c.ndim else ["input", "self", "scalar"])
    made = {"input": _operand_from_input, "self": _operand_self, "flip": _operand_flip,
            "scalar": _operand_scalar, "array": _operand_array}[source](c)
    if len(made) > 3 and len(made[3]) > c.ndim or kind == "copy_" and source == "scalar":
        return None  # in place, the other operand cannot add dims; copy_ takes no number
    desc, make, mirror = made[:3]
    strip = source in ("input", "self", "flip") and c.flag()  # then the operand's names fill the None dims
    ops = {
        "add_": (lambda u, o: u.add_(o), lambda a, o: a + o),
        "sub_": (lambda u, o: u.sub_(o), lambda a, o: a - o),
        "mul_": (lambda u, o: u.mul_(o), lambda a, o: a * o),
        "div_": (lambda u, o: u.div_(o * o + 1), lambda a, o: a / (o * o + 1)),
        "iadd": (_iadd, lambda a, o: a + o),
        "imul": (_imul, lambda a, o: a * o),
        "clamp_": (lambda u, o: u.clamp_(o - 0.5, o + 0.5), _clamped),
        "copy_": (lambda u, o: u.copy_(o), lambda a, o: a * 0.0 + o),
    }
    inplace, outplace = ops[kind]

    def run(t, xs, named):
        o = make(t, xs, named)
        if nt.is_grad_enabled():
            return outplace(t, o)
        u = t.clone()
        if strip and named:
            u = u.rename(None)
        return inplace(u, o)

    def ref(a, arrs):
        return outplace(a, mirror(a, arrs))

    return Step(f"{'t.rename(None).' if strip else 't.'}{kind}({desc})", run, ref, c.shape, c.names)


def _clamped(a, o):
    """``a`` clipped to ``[o - 0.5, o + 0.5]``, on tensors or on NumPy values."""
    if isinstance(a, nt.Tensor):
        return _clip_between(a, o, 0)
    return np.minimum(np.maximum(a, o - 0.5), o + 0.5)


def _iadd(u, o):
    u += o
    return u


def _imul(u, o):
    u *= o
    return u


# ----------------------------------------------------------------------------- the program strategy

BUILDERS = {
    "unary": b_unary, "binary": b_binary, "reduce": b_reduce, "along": b_along, "permute": b_permute,
    "flatten": b_flatten, "unflatten": b_unflatten, "reshape": b_reshape, "unsqueeze": b_unsqueeze, "index": b_index,
    "join": b_join, "matmul": b_matmul, "advanced": b_advanced, "gather": b_gather,
    "align_union": b_align_union, "broadcast": b_broadcast, "inplace": b_inplace,
    "where_self": b_where_self, "where": b_where, "pad": b_pad, "move": b_move, "naming": b_naming,
}


@st.composite
def programs(draw, max_steps=6, max_in=32):
    """Inputs (1-3 tensors, up to 4 dims of size 1-4, names from one pool with one size per name) and
    1-``max_steps`` steps, each drawn for the shape and names the previous one produces."""
    universe = draw(st.permutations(UNIVERSE))[:4]
    sizes = {n: draw(st.integers(1, 4)) for n in universe}
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))  # one stream: no two inputs share values
    inputs = []
    for i in range(draw(st.integers(1, 3))):
        ndim = draw(st.integers(0, 4))
        shape, names = [], []
        avail = list(universe)
        for _ in range(ndim):
            n = draw(st.sampled_from(avail)) if avail and draw(st.booleans()) else None
            s = sizes[n] if n is not None else draw(st.integers(1, 4))
            if numel(shape) * s > max_in:
                break
            if n is not None:
                avail.remove(n)
            shape.append(s)
            names.append(n)
        inputs.append((rng.uniform(-2, 2, size=tuple(shape)), tuple(names)))
    shape, names = inputs[0][0].shape, inputs[0][1]
    steps = []
    for _ in range(draw(st.integers(1, max_steps))):
        step = None
        while step is None:
            kind = draw(st.sampled_from(list(BUILDERS)))
            step = BUILDERS[kind](Ctx(draw, shape, names, inputs))
            if step is not None and (numel(step.shape) > MAX_NUMEL or len(step.shape) > MAX_NDIM):
                step = None
        steps.append(step)
        shape, names = step.shape, step.names
    return Program(inputs, steps)


# ----------------------------------------------------------------------------- properties


def _host(t):
    return np.asarray(t.detach().numpy())


@given(programs())
def test_program_values_names_and_gradients(prog):
    """Every step's values equal NumPy's and its names and shape the expected ones; the gradients of the
    whole program match central differences and carry the inputs' names."""
    note(repr(prog))
    xs = prog.leaves()
    arrs = [a for a, _ in prog.inputs]
    cur, ref = xs[0], arrs[0]
    for s in prog.steps:
        cur, ref = s.run(cur, xs, True), np.asarray(s.ref(ref, arrs))
        assert cur.names == s.names, f"{s.desc}: names {cur.names}, expected {s.names}"
        assert cur.shape == s.shape == ref.shape, f"{s.desc}: shape {cur.shape}, expected {s.shape} / {ref.shape}"
        assert cur.dtype == nt.float64, s.desc
        np.testing.assert_allclose(_host(cur), ref, rtol=1e-9, atol=1e-12, err_msg=s.desc)
    gradcheck(lambda *ts: prog(*ts), *xs)


@given(programs(max_steps=4, max_in=8))
def test_program_double_backward(prog):
    """Backward with create_graph=True gives named gradients that can be differentiated again, and
    gradgradcheck agrees (every op's backward is written with differentiable ops)."""
    note(repr(prog))
    xs = prog.leaves()
    out = prog(*xs)
    grads = nt.grad(out.sum(), xs, create_graph=True, allow_unused=True)
    for g, x in zip(grads, xs):
        assert g is None or (g.names == x.names and g.shape == x.shape)
    second = [(g * g).sum() for g in grads if g is not None and g.requires_grad]
    if second:
        total = second[0]
        for s in second[1:]:
            total = total + s
        gg = nt.grad(total, xs, allow_unused=True)
        for g, x in zip(gg, xs):
            assert g is None or (g.names == x.names and g.shape == x.shape)
    gradgradcheck(lambda *ts: prog(*ts), *xs)


class _Elision:
    """Forces temporary elision on for tensors of any size (it is normally for large ones only)."""

    def __init__(self, on):
        self.on = on

    def __enter__(self):
        self.saved = _elision.MIN_SIZE
        if self.on:
            _elision.MIN_SIZE = 1

    def __exit__(self, *exc):
        _elision.MIN_SIZE = self.saved


def _same_grads(got, expected, names, exact=True):
    for g, e, n in zip(got, expected, names):
        assert (g is None) == (e is None)
        if e is not None:
            assert g.names == n
            if exact:
                np.testing.assert_array_equal(_host(g), _host(e))
            else:
                np.testing.assert_allclose(_host(g), _host(e), rtol=1e-12, atol=1e-12)


@given(programs(), st.booleans())
def test_names_never_change_values(prog, elide):
    """Names never change values: the program on unnamed copies (dims by position) gives the same values
    and gradients.  Neither do the engine's modes: no_grad, retained graphs, hooks, and (when ``elide``)
    temporary elision forced on for small tensors."""
    note(repr(prog))
    weights = np.random.default_rng(0).uniform(0.5, 1.5, size=prog.steps[-1].shape)
    in_names = [n for _, n in prog.inputs]

    def run(named, elision=False, hook=False):
        xs = prog.leaves(named)
        with _Elision(elision):
            out = prog(*xs, named=named)
            if hook:
                out.register_hook(lambda g: g * 2.0)
            loss = (out * nt.tensor(weights, names=out.names)).sum()
            grads = nt.grad(loss, xs, allow_unused=True, retain_graph=True)
            again = nt.grad(loss, xs, allow_unused=True)
        _same_grads(again, grads, [n if named else (None,) * len(n) for n in in_names])
        return out, grads

    named_out, named_grads = run(True)
    plain_out, plain_grads = run(False)
    assert plain_out.names == (None,) * plain_out.ndim
    exact = all(s.exact for s in prog.steps)
    tol = dict(rtol=0, atol=0) if exact else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_host(plain_out), _host(named_out), **tol)
    _same_grads([None if g is None else g.rename(*n) for g, n in zip(plain_grads, in_names)], named_grads,
                in_names, exact=False)
    xs = prog.leaves()
    with nt.no_grad(), _Elision(elide):
        quiet = prog(*xs)
    assert not quiet.requires_grad or any(quiet is x for x in xs)  # a no-op may return its input itself
    np.testing.assert_array_equal(_host(quiet), _host(named_out))
    hooked_out, hooked_grads = run(True, elision=elide, hook=True)
    np.testing.assert_array_equal(_host(hooked_out), _host(named_out))
    _same_grads([None if g is None else g / 2.0 for g in hooked_grads], named_grads, in_names)
    out = prog(*xs)
    (out * nt.tensor(weights, names=out.names)).sum().backward()
    _same_grads([x.grad for x in xs], named_grads, in_names)


def test_int_beside_an_index_array_is_placed_as_in_numpy():
    """Found while writing the programs' advanced-index step: NumPy counts an int as an advanced index
    when the key has an index array, so ``t[:, idx, :, 0]`` puts the indexed dim first (int and array
    not adjacent) while ``t[:, 0, idx]`` keeps it in place.  The names must follow the values."""
    a = np.arange(120.0).reshape(2, 3, 4, 5)
    t = nt.tensor(a, names=("a", "b", "c", "d"))
    idx = np.array([0, 1, 0, 0, 1, 1, 0])
    cases = [
        ((slice(None), idx, slice(None), 0), ("b", "a", "c")),
        ((0, slice(None), idx), ("c", "b", "d")),
        ((slice(None), 0, idx), ("a", "c", "d")),
        ((idx, slice(None), 1), ("a", "b", "d")),
        ((idx, None, 0), ("a", None, "c", "d")),
    ]
    for key, names in cases:
        out = t[tuple(nt.tensor(k) if isinstance(k, np.ndarray) else k for k in key)]
        assert out.names == names, key
        np.testing.assert_array_equal(out.numpy(), a[key])
    assert t[{"b": nt.tensor(idx), "d": 0}].names == ("b", "a", "c")
    mask = np.array([True, False, True])
    assert t[:, nt.tensor(mask), :, 0].names == (None, "a", "c")
    np.testing.assert_array_equal(t[:, nt.tensor(mask), :, 0].numpy(), a[:, mask, :, 0])


def test_zero_dim_float_array_is_a_number_in_place_and_as_fill_value():
    """Found by the programs above: a 0-dim float NumPy array (what NumPy reductions return) has
    ``__index__``, which refuses floats, so it used to fail as a number with a bare NumPy TypeError."""
    t = nt.tensor(np.ones(3), names=("x",))
    half = np.array(0.5)
    np.testing.assert_array_equal(t.masked_fill(np.array([True, False, True]), half).numpy(), [0.5, 1, 0.5])
    np.testing.assert_array_equal(t.clone().fill_(half).numpy(), [0.5] * 3)
    np.testing.assert_array_equal(t.clone().add_(half).numpy(), [1.5] * 3)
    np.testing.assert_array_equal(t.clone().copy_(half).numpy(), [0.5] * 3)  # an array, not a number
    u = t.clone()
    u[{"x": 0}] = half
    np.testing.assert_array_equal(u.numpy(), [0.5, 1, 1])
    with pytest.raises(TypeError, match="would be truncated"):
        nt.tensor(np.arange(3)).add_(half)
    with pytest.raises(TypeError, match="use fill_ for a number"):
        t.clone().copy_(0.5)


@pytest.mark.parametrize("key", [slice(2, 10), slice(1, 10, 2), slice(None, -5, -1), slice(3, -9, -2),
                                 slice(-7, 2), slice(5, 9)])
def test_a_slice_past_the_ends_is_a_view(key):
    """Found by the programs above: on array-api-strict, a strided slice with out-of-range bounds (which
    NumPy clips) was answered with a copy, so an in-place write through it was silently lost."""
    a = np.arange(8.0).reshape(4, 2)
    u = nt.tensor(a, names=("x", None))
    v = u[{"x": key}]
    np.testing.assert_array_equal(v.numpy(), a[key])
    v.mul_(2.0)
    a[key] *= 2.0
    np.testing.assert_array_equal(u.numpy(), a)
    u[..., None, key].add_(1.0)  # the slice now on the unnamed dim, with '...' and a new dim before it
    a[..., None, key] += 1.0
    np.testing.assert_array_equal(u.numpy(), a)


def test_clip_bounds_that_are_arrays_broadcast_like_operands():
    """Found by the programs above: array bounds (NumPy scalars too) went to the backend raw, which
    array-api-strict refuses, and on NumPy a bound with more dims grew the result under the input's names."""
    x = nt.tensor([0.25, 1.0, 2.0], names=("a",), dtype=nt.float64, requires_grad=True)
    np.testing.assert_array_equal(_host(x.clip(min=np.float64(0.5))), [0.5, 1, 2])
    np.testing.assert_array_equal(_host(x.clip(np.array(0.5), np.array([2.0, 0.5, 1.5]))), [0.5, 0.5, 1.5])
    wide = x.clip(min=np.zeros((2, 3)), max=1.5)
    assert wide.names == (None, "a") and wide.shape == (2, 3)
    wide.sum().backward()
    assert x.grad.names == ("a",)
    np.testing.assert_array_equal(x.grad.numpy(), [2, 2, 0])
