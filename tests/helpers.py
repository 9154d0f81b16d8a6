"""Helpers shared by test modules: seeded tensors, gradients of weighted sums."""

import numpy as np

import namedtensor as nt


def grads(fn, inputs, create_graph):
    """Gradients of sum(fn(*inputs) * fixed weights), the backward run with or without a graph."""
    inputs = [x.detach().requires_grad_() for x in inputs]
    out = fn(*inputs)
    w = nt.tensor(np.random.default_rng(5).uniform(-1, 1, size=out.shape), names=out.names, dtype=out.dtype)
    return [g.detach().numpy() for g in nt.grad((out * w).sum(), inputs, create_graph=create_graph)]


def t64(shape, names=None, seed=0, requires_grad=True):
    """A float64 tensor of uniform values in [-2, 2] (seeded), for value and gradient checks."""
    a = np.random.default_rng(seed).uniform(-2, 2, size=shape)
    return nt.tensor(a, names=names, requires_grad=requires_grad)


def rnd(*shape, names, seed=0, dtype="float32", low=None):
    """A seeded tensor: normal values, or uniform in [low, 1) when ``low`` is given."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=shape) if low is None else rng.uniform(low, 1.0, size=shape)
    return nt.tensor(a.astype(dtype), names=names)


def ints(high, *shape, names, seed=0):
    """A seeded tensor of ints in [0, high)."""
    return nt.tensor(np.random.default_rng(seed).integers(0, high, size=shape), names=names)


def clipped_batchnorm_step(device="cpu"):
    """``(model, step)``: a model with BatchNorm in training on ``device`` and its SGD step, which clips the
    first weight under ``no_grad`` before the forward and returns the detached loss (writes into a
    buffer and a parameter, for nt.compile's write-back steps)."""
    nt.manual_seed(0)
    nn = nt.nn
    model = nn.Sequential(nn.Linear("x", "h", 4, 6), nn.BatchNorm1d("h", 6), nn.ReLU(), nn.Linear("h", "y", 6, 2))
    model = model.to(device).train()
    opt = nt.optim.SGD(model.parameters(), lr=0.05)

    def step(x):
        with nt.no_grad():
            model[0].weight.clamp_(-0.3, 0.3)
        loss = model(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    return model, step
