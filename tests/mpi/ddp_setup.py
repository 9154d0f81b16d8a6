"""The model, data and training loop shared by the 2-rank script (checks.py, under mpiexec) and the
single-process reference in tests/test_distributed.py: both must build exactly the same thing."""

import numpy as np

import namedtensor as nt
from namedtensor import nn
from namedtensor.data import DataLoader, TensorDataset

SAMPLES, PER_RANK_BATCH, STEPS, LR = 24, 4, 3, 0.1


class Net(nn.Module):
    """Two layers with a buffer, and a parameter that no forward uses (it keeps grad None)."""

    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear("feat", "hidden", 5, hidden, dtype=nt.float64)
        self.fc2 = nn.Linear("hidden", "out", hidden, 3, dtype=nt.float64)
        self.register_buffer("scale", nt.full((3,), 0.5, names=("out",), dtype=nt.float64))
        self.spare = nn.Parameter(nt.zeros(2, names=("spare",), dtype=nt.float64))

    def forward(self, x):
        return self.fc2(self.fc1(x).tanh()) * self.scale


def dataset() -> TensorDataset:
    rng = np.random.default_rng(7)
    x = nt.tensor(rng.standard_normal((SAMPLES, 5)), names=("example", "feat"))
    y = nt.tensor(rng.standard_normal((SAMPLES, 3)), names=("example", "out"))
    return TensorDataset(x, y, dim="example")


def loss_fn(model, x, y):
    return ((model(x) - y) ** 2).mean()


def train(model, loaders, steps: int = STEPS) -> None:
    """SGD on the batches of ``loaders`` taken together: one loader per rank under DDP (each its own
    share), or, for the reference, both ranks' loaders concatenated into one batch."""
    opt = nt.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
    iters = [iter(loader) for loader in loaders]
    for _ in range(steps):
        batches = [next(it) for it in iters]
        x = nt.cat([b[0] for b in batches], "batch")
        y = nt.cat([b[1] for b in batches], "batch")
        opt.zero_grad()
        loss_fn(model, x, y).backward()
        opt.step()


def loaders(ds, ranks, world: int = 2):
    from namedtensor.distributed import DistributedSampler

    out = []
    for r in ranks:
        sampler = DistributedSampler(ds, num_replicas=world, rank=r, shuffle=True, seed=3)
        out.append(DataLoader(ds, batch_size=PER_RANK_BATCH, sampler=sampler))
    return out
