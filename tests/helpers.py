"""Helpers shared by the test modules of the contractions and the fused ops."""

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
