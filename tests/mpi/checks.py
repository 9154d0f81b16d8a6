"""Run under ``mpiexec -n 2``: every distributed check in one launch (MPI starts slowly).

Each rank writes what it found to ``rank<r>.json`` in the directory given as the first argument
(its output could interleave with the other rank's on a shared stdout), for tests/test_distributed.py
to assert on; rank 0 also saves the parameters after DDP training there (``params.safetensors``).  Errors that a
check expects are caught and reported, so a rank that failed to raise shows up as a difference
(and one that hung, as the test's timeout).
"""

import gc
import json
import os
import sys

import numpy as np
from mpi4py import MPI

import ddp_setup as S
import namedtensor as nt
import namedtensor.distributed as dist
from namedtensor import backends, nn
from namedtensor.distributed import _nccl

out = {}


def error_of(fn):
    try:
        fn()
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def same_on_every_rank(t) -> bool:
    """Whether ``t`` is equal on all ranks (all-gathered and compared with rank 0's)."""
    g = dist.all_gather(t.detach(), "rank").numpy()
    return bool(all((g[r] == g[0]).all() for r in range(len(g))))


def grads(model):
    return {k: (None if p.grad is None else p.grad.numpy().copy()) for k, p in model.named_parameters()}


# ----------------------------------------------------------------------------- NCCL start-up
# rank 1 cannot use NCCL (faked here: the check is that rank 0 learns of it and raises too, not hangs)
world_rank = MPI.COMM_WORLD.Get_rank()


def fake_prepare(local_rank):
    if world_rank == 1:
        raise RuntimeError(f"{_nccl.NEED}: no GPU on this test rank")
    return None, None, "cuda:0"


real_prepare, _nccl.prepare = _nccl.prepare, fake_prepare
out["nccl_error"] = error_of(lambda: dist.init_process_group("nccl"))
_nccl.prepare = real_prepare
out["initialized_after_failed_init"] = dist.is_initialized()

dist.init_process_group("mpi")
rank, world = dist.get_rank(), dist.get_world_size()
out["rank"], out["world"], out["backend"] = rank, world, dist.get_backend()

# ----------------------------------------------------------------------------- collectives
x = nt.tensor(np.arange(6.0).reshape(2, 3) + 10 * rank, names=("a", "b"))


def named(t):
    return [list(t.names), t.numpy().tolist()]


for op in ("sum", "mean", "max", "min"):
    y = x.clone()
    res = dist.all_reduce(y, op)
    out[f"all_reduce_{op}"] = named(res) + [res is y]
work = dist.all_reduce(x.clone(), "mean", async_op=True)
out["async_type"] = type(work).__name__
out["async_mean"] = named(work.wait()) + [work.is_completed()]
out["async_gather"] = named(dist.all_gather(x, "rank", async_op=True).wait())
y = x.clone()
out["broadcast"] = named(dist.broadcast(y, src=1))
out["broadcast_async"] = named(dist.broadcast(x.clone(), src=0, async_op=True).wait())
out["all_gather"] = named(dist.all_gather(x, "rank"))
out["all_gather_pos"] = named(dist.all_gather(x, 1))
z = nt.tensor(np.arange(8.0).reshape(2, 4) * (rank + 1), names=("a", "b"))
out["reduce_scatter"] = named(dist.reduce_scatter(z, "b"))
out["reduce_scatter_a_mean"] = named(dist.reduce_scatter(z, "a", "mean"))
out["reduce_scatter_async"] = named(dist.reduce_scatter(z, "b", "max", async_op=True).wait())
flags = nt.tensor(np.array([rank == 1, True, False]), names=("k",))
out["bool_any"] = named(dist.all_reduce(flags.clone(), "max"))
# the ranks disagree: every rank raises the same error (names, then shapes, then the op)
out["err_names"] = error_of(lambda: dist.all_reduce(x.rename("b", "a") if rank else x.clone()))
out["err_shape"] = error_of(lambda: dist.all_gather(x[{"b": slice(0, 2 + rank)}], "rank"))
out["err_op"] = error_of(lambda: dist.all_reduce(x.clone(), "sum" if rank else "max"))
out["err_uneven"] = error_of(lambda: dist.reduce_scatter(x, "b"))
out["err_new_dim"] = error_of(lambda: dist.all_gather(x, "a"))
out["err_mean_int"] = error_of(lambda: dist.all_reduce(nt.tensor([1, 2], names=("k",)), "mean"))
p = nt.tensor([1.0], names=("k",), requires_grad=True)
out["err_requires_grad"] = error_of(lambda: dist.all_reduce(p))
backends.use_cpu_backend("array_api_strict")
xs = nt.tensor(np.arange(6.0).reshape(2, 3) + 10 * rank, names=("a", "b"))
out["strict_sum"] = named(dist.all_reduce(xs.clone(), "sum"))
out["strict_gather"] = named(dist.all_gather(xs[{"a": 0}], "rank"))
backends.use_cpu_backend("numpy")

# ----------------------------------------------------------------------------- DDP: the same start, training
nt.manual_seed(100 + rank)  # different weights on every rank: DDP must start them all from rank 0's
model = S.Net()
ddp = dist.DistributedDataParallel(model, bucket_cap_mb=300 / 2 ** 20)  # 300 bytes: several buckets
out["buckets"] = [[n for n, q in model.named_parameters() if any(q is b for b in bucket.params)]
                  for bucket in ddp._buckets]
out["same_start"] = all(same_on_every_rank(t) for t in list(model.parameters()) + list(model.buffers()))
S.train(ddp, S.loaders(S.dataset(), [rank]))
if rank == 0:
    nt.save(model.state_dict(), os.path.join(sys.argv[1], "params.safetensors"))
out["same_after"] = all(same_on_every_rank(q) for q in model.parameters())
out["spare_grad_none"] = model.spare.grad is None
out["state_dict_keys"] = sorted(ddp.state_dict())
out["names_kept"] = all(q.grad is None or q.grad.names == q.names for q in model.parameters())

# ----------------------------------------------------------------------------- DDP of a compiled module
# the same training with the forward compiled: the same parameters as the eager wrapper's, no warning;
# compiling the wrapper itself runs eagerly (it counts steps, broadcasts buffers), with a warning
import warnings  # noqa: E402

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    nt.manual_seed(100 + rank)
    compiled_model = S.Net()
    S.train(dist.DistributedDataParallel(nt.compile(compiled_model), bucket_cap_mb=300 / 2 ** 20),
            S.loaders(S.dataset(), [rank]))
    out["compiled_max_diff"] = max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
                                   for a, b in zip(compiled_model.parameters(), model.parameters()))
    out["compiled_warnings"] = [str(w.message) for w in caught]
    del caught[:]
    nt.manual_seed(100 + rank)
    wrapper_model = S.Net()
    S.train(nt.compile(dist.DistributedDataParallel(wrapper_model, bucket_cap_mb=300 / 2 ** 20)),
            S.loaders(S.dataset(), [rank]))
    out["compiled_wrapper_max_diff"] = max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
                                           for a, b in zip(wrapper_model.parameters(), model.parameters()))
    out["compiled_wrapper_warnings"] = [str(w.message) for w in caught]

# ----------------------------------------------------------------------------- overlap
ds = S.dataset()
bx, by = ds[rank * 4]
for overlap in (True, False):
    nt.manual_seed(0)
    m = S.Net()
    d = dist.DistributedDataParallel(m, bucket_cap_mb=300 / 2 ** 20, overlap=overlap)
    seen = []
    # fc1's gradients are the last that backward finishes: once DDP's hooks on both ran, the buckets
    # of fc2 and fc1 have started during backward (with overlap), or none has (without); the bucket
    # of the unused parameter starts when backward ends
    for q in (m.fc1.weight, m.fc1.bias):
        q.register_post_accumulate_grad_hook(lambda t, d=d, seen=seen: seen.append((d._next, len(d._buckets))))
    S.loss_fn(d, bx.align_to("batch", ...), by.align_to("batch", ...)).backward()
    out[f"started_in_backward_overlap_{overlap}"] = seen[-1]

# ----------------------------------------------------------------------------- no_sync
xb = nt.stack([ds[i][0] for i in range(rank * 4, rank * 4 + 4)], "batch")
yb = nt.stack([ds[i][1] for i in range(rank * 4, rank * 4 + 4)], "batch")
nt.manual_seed(0)
whole = dist.DistributedDataParallel(S.Net())
S.loss_fn(whole, xb, yb).backward()
nt.manual_seed(0)
acc = dist.DistributedDataParallel(S.Net())
with acc.no_sync():
    (S.loss_fn(acc, xb[{"batch": slice(0, 2)}], yb[{"batch": slice(0, 2)}]) / 2).backward()
out["no_sync_stays_local"] = not same_on_every_rank(acc.module.fc2.weight.grad)
(S.loss_fn(acc, xb[{"batch": slice(2, 4)}], yb[{"batch": slice(2, 4)}]) / 2).backward()
ga, gw = grads(acc.module), grads(whole.module)
out["no_sync_max_diff"] = max(float(np.abs(ga[k] - gw[k]).max()) for k in gw if gw[k] is not None)
out["no_sync_none_same"] = sorted(k for k in gw if gw[k] is None) == sorted(k for k in ga if ga[k] is None)

# ----------------------------------------------------------------------------- a parameter only rank 1 uses
nt.manual_seed(0)
u = dist.DistributedDataParallel(S.Net())
loss = S.loss_fn(u, xb, yb)
if rank == 1:
    loss = loss + ((u.module.spare - 1) ** 2).sum()  # gradient -2 per element, on rank 1 only
loss.backward()
out["spare_grad_rank1_only"] = named(u.module.spare.grad)

# ----------------------------------------------------------------------------- dropping the wrapper drops its hooks
nt.manual_seed(0)
plain = S.Net()
wrapped = dist.DistributedDataParallel(plain)
hooks_while_wrapped = len(plain.fc1.weight._post_hooks)
del wrapped
gc.collect()
out["hooks_before_after_drop"] = [hooks_while_wrapped, len(plain.fc1.weight._post_hooks)]

# ----------------------------------------------------------------------------- models that differ
nt.manual_seed(0)
out["err_model_shape"] = error_of(lambda: dist.DistributedDataParallel(S.Net(hidden=8 if rank == 0 else 9)))
lin = nn.Linear("a", "b", 2, 2) if rank == 0 else nn.Linear("b", "a", 2, 2)
out["err_model_names"] = error_of(lambda: dist.DistributedDataParallel(lin))
dist.barrier()  # every rank got here: nobody hangs in a collective the others skipped
out["alive"] = True

with open(os.path.join(sys.argv[1], f"rank{rank}.json"), "w") as f:
    json.dump(out, f)
dist.destroy_process_group()
