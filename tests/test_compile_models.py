"""Whole models under nt.compile against eager: a small GPT (token and position embeddings, causal
self-attention from one projection cut into queries, keys and values, a GELU MLP, the head tied to the
token embedding, next-token cross-entropy), written with named dims and as PyTorch code on unnamed
tensors, nn.TransformerBlock, and a small convolutional net (convolutions, batch norm in training mode,
pooling); each trained a few steps with AdamW, its module compiled or its whole training step compiled,
against the same model trained eagerly: the same losses, parameters and buffers (batch norm's running
statistics), and no part of the step left to run eagerly.
"""

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.nn import functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from gpt_model import gpt_class

VOCAB, BLOCK, WIDTH, HEADS, LAYERS, BATCH, STEPS = 20, 12, 16, 2, 2, 3, 4


#: the GPT that bench/train_step.py times, at small sizes
GPT = {named: gpt_class(nn, F, nt.rearrange if named else None, vocab=VOCAB, width=WIDTH, heads=HEADS, layers=LAYERS,
                        block=BLOCK) for named in (True, False)}


def gpt(named: bool):
    """The model with seeded weights (the same for every call) and its step's inputs."""
    nt.manual_seed(0)
    model = GPT[named]()
    tokens = np.random.default_rng(1).integers(0, VOCAB, (BATCH, BLOCK + 1))
    names = ("batch", "seq") if named else None
    x, y = (nt.tensor(np.ascontiguousarray(t), names=names) for t in (tokens[:, :-1], tokens[:, 1:]))
    pos = nt.arange(BLOCK, names=("seq",) if named else None)
    return model, (x, y, pos)


def block():
    nt.manual_seed(0)
    model = nn.TransformerBlock("embed", WIDTH, HEADS, 4 * WIDTH)
    x = nt.randn(BATCH, BLOCK, WIDTH, names=("batch", "seq", "embed"))
    target = nt.randn(BATCH, BLOCK, WIDTH, names=("batch", "seq", "embed"))

    class Loss(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = model

        def forward(self, x, target):
            return F.mse_loss(self.block(x, is_causal=True), target)

    return Loss(), (x, target)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 4, 3, stride=2)
        self.fc = nn.Linear(4 * 3 * 3, 5)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        return F.cross_entropy(self.fc(F.silu(self.c2(h)).flatten(1)), y)


def conv_net():
    nt.manual_seed(0)
    model = ConvNet()
    return model, (nt.randn(6, 3, 14, 14), nt.tensor(np.array([0, 1, 2, 3, 4, 0])))


def train(make, how: str):
    """Losses and final parameters and buffers of STEPS AdamW steps: ``how`` is "eager", "module" (the
    model compiled) or "step" (the whole training step compiled)."""
    model, inputs = make()
    # eps well above rounding: the keys' bias has a gradient of exactly 0 (it adds the same to every key's
    # score of a query), which rounding makes about 1e-9, and Adam's m / sqrt(v) would turn that noise into
    # steps of the full learning rate, of either sign, in eager and compiled runs alike
    opt = nt.optim.AdamW(model.parameters(), lr=1e-2, eps=1e-4)
    forward = nt.compile(model) if how == "module" else model

    def step(*inputs):
        loss = forward(*inputs)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach()

    run = nt.compile(step) if how == "step" else step
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no part of the step falls back to eager code
        warnings.filterwarnings("ignore", "nt.compile: fused CPU kernels need Numba")  # the graph runs on NumPy
        losses = [run(*inputs).item() for _ in range(STEPS)]
    compiled = {"module": forward, "step": run}.get(how)
    if compiled is not None:
        assert len(compiled._cache) == 1 and None not in compiled._cache.values()
    state = [*model.named_parameters(), *model.named_buffers()]
    return losses, {k: t.detach().numpy() for k, t in state}


@pytest.mark.parametrize("how", ["module", "step"])
@pytest.mark.parametrize("make", [lambda: gpt(True), lambda: gpt(False), block, conv_net],
                         ids=["gpt", "gpt_unnamed", "block", "conv_net"])
def test_a_model_trains_compiled_as_it_trains_eagerly(make, how):
    want_losses, want_params = train(make, "eager")
    got_losses, got_params = train(make, how)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-6)
    assert want_losses[-1] < want_losses[0]  # it learns: the steps are not all the same
    assert got_params.keys() == want_params.keys()
    for k, want in want_params.items():
        np.testing.assert_allclose(got_params[k], want, rtol=1e-5, atol=3e-6, err_msg=k)


def test_the_named_and_unnamed_gpts_compute_the_same():
    named, unnamed = train(lambda: gpt(True), "step"), train(lambda: gpt(False), "step")
    np.testing.assert_allclose(named[0], unnamed[0], rtol=1e-5)
