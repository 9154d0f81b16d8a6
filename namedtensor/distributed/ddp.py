"""``DistributedDataParallel``: the same model on every rank, each rank on its own batches, the
gradients averaged over the ranks during backward.

The techniques of the PyTorch DDP paper (Li et al., "PyTorch Distributed", VLDB 2020):

* **Same start.**  At construction every rank checks, with one small all-gather, that all ranks
  have the same parameters and buffers (keys, dim names, shapes, dtypes): a mismatch raises the
  same error on every rank instead of hanging.  Then rank 0's values are broadcast to the others.
* **Buckets.**  The parameters, in reverse order of registration (about the order in which
  backward finishes their gradients), are grouped into buckets of at most ``bucket_cap_mb`` MiB
  (one dtype and device each): one all-reduce per bucket, not per parameter.
* **Overlap.**  A post-accumulate hook on every parameter copies its gradient into its bucket's
  flat buffer as soon as backward has finished it; when a bucket's last gradient is in, its
  non-blocking all-reduce starts while backward goes on with the earlier layers.  Buckets start in
  index order on every rank (one that is ready early waits for those before it), so the ranks'
  collectives match.  ``overlap=False`` starts them all after backward instead (for comparison).
* **Before the optimizer step.**  When backward ends (an engine callback), the buckets not yet
  started start, all are awaited, and every gradient becomes its mean over the ranks, copied back
  into ``param.grad`` with its names.
* **Steps stay aligned.**  A step is a forward in training mode with grad enabled, outside
  ``no_sync``.  Each bucket also carries one slot per rank with that rank's step, so a rank that
  caught an exception and skipped a step's backward cannot have its next gradients averaged with
  another rank's previous ones: every rank raises the same RuntimeError naming the ranks' steps.
  Bucket waits time out like collectives (``init_process_group(timeout=...)``).

Unused parameters need no flag: a parameter that gets no gradient on a rank in a backward counts
as zero there, and its bucket starts when backward ends.  Each bucket also carries one count per
parameter of the ranks that used it: a parameter that no rank used keeps its ``.grad`` (None
stays None, so the optimizer skips it on every rank alike).  ``no_sync()`` accumulates gradients
locally; the first backward after it averages the sum.  Wrap the model after moving or casting
it (buckets are built for the parameters' dtypes and devices).  With ``create_graph=True`` the
averaged gradients are values: their graphs are not averaged.
"""

from __future__ import annotations

import contextlib
import weakref
from functools import partial
from typing import Any, Iterator, List, Mapping, Optional, Tuple

from .._internal import backend_of, bump_version, raw, wrap
from .._names import fmt
from ..autograd.engine import queue_callback
from ..autograd.graph import is_grad_enabled, no_grad
from ..nn.module import Module, compiled_target
from ..tensor import Tensor
from . import collectives
from .group import ProcessGroup, require_group


#: the largest integer below which a float of each size (in bytes) holds every integer exactly
_EXACT = {2: 2 ** 11, 4: 2 ** 24, 8: 2 ** 53}


class _Bucket:
    """Gradients reduced together: a flat buffer holding each parameter's gradient at its offset,
    then one slot per parameter counting the ranks that used it, then one slot per rank holding its
    step (the all-reduce sums zeros into the others' slots, so every rank reads every rank's step)."""

    __slots__ = ("params", "spans", "total", "flat", "ready", "pending", "handle", "seq", "modulus")

    def __init__(self, params: List[Tensor], transport: Any, world: int) -> None:
        self.params = params
        self.spans: List[Tuple[int, int]] = []
        offset = 0
        for p in params:
            self.spans.append((offset, offset + p.numel()))
            offset += p.numel()
        self.total = offset
        like, _ = transport.stage(backend_of(params[0]), raw(params[0]))
        self.flat = transport.empty((offset + len(params) + world,), like)
        self.modulus = _EXACT[self.flat.dtype.itemsize]  # steps are sent modulo it, exactly
        self.ready = [False] * len(params)
        self.pending = len(params)
        self.handle: Any = None
        self.seq = 0

    def put(self, k: int, grad: Tensor, transport: Any) -> None:
        """Copy parameter ``k``'s gradient into the flat buffer."""
        start, stop = self.spans[k]
        buf, _ = transport.stage(backend_of(grad), raw(grad))
        self.flat[start:stop] = buf.reshape(-1)
        self.ready[k] = True
        self.pending -= 1

    def start(self, group: ProcessGroup, step: int) -> None:
        """Zero the slots of parameters without a gradient, mark which were used and this rank's
        step, start the all-reduce."""
        for k, used in enumerate(self.ready):
            if not used:
                start, stop = self.spans[k]
                self.flat[start:stop] = 0
            self.flat[self.total + k] = 1 if used else 0
        steps = self.total + len(self.params)
        self.flat[steps:] = 0
        self.flat[steps + group.rank] = step % self.modulus
        self.handle = group.transport.all_reduce(self.flat, "sum")
        self.seq = group.watch.start()

    def wait(self, group: ProcessGroup, what: str) -> None:
        """Wait for the all-reduce (under the group's timeout)."""
        group.watch.wait(partial(group.transport.test, self.handle), what, self.seq)
        self.handle = None

    def steps(self, mine: int) -> List[int]:
        """Every rank's step, read from the reduced buffer (this rank's is ``mine``)."""
        m = self.modulus
        sent = self.flat[self.total + len(self.params):].tolist()
        return [mine + (int(v) - mine + m // 2) % m - m // 2 for v in sent]

    def write(self, transport: Any, world: int) -> None:
        """Write each used parameter's mean gradient into its ``.grad``."""
        grads = self.flat[:self.total]
        grads /= world
        users = self.flat[self.total:self.total + len(self.params)].tolist()
        for p, (start, stop), n in zip(self.params, self.spans, users):
            if n == 0:  # no rank used it: leave .grad as it is
                continue
            B = backend_of(p)
            value = transport.to_backend(B, grads[start:stop].reshape(p.shape))
            g = p.grad
            if g is not None and not g.requires_grad and B.owns_writable(raw(g)):
                B.setitem(raw(g), ..., value)
                bump_version(g)
            else:
                p.grad = wrap(B.asarray(value, copy=True), p.names, B)
        self.reset()

    def reset(self) -> None:
        self.ready = [False] * len(self.params)
        self.pending = len(self.params)


def _check_steps(steps: List[int]) -> None:
    """Raise, on every rank alike, unless all ranks sent the same step."""
    if all(s == steps[0] for s in steps):
        return
    by_step: dict = {}
    for r, s in enumerate(steps):
        by_step.setdefault(s, []).append(r)
    shown = "; ".join(f"{'rank' if len(rs) == 1 else 'ranks'} {', '.join(map(str, rs))} at step {s}"
                      for s, rs in sorted(by_step.items(), key=lambda item: item[1][0]))
    raise RuntimeError(
        f"DistributedDataParallel: the ranks are at different steps: {shown} (a step is a forward in training "
        "mode with grad enabled, outside no_sync). Averaging would mix gradients of different steps, so no "
        ".grad was written. Every rank must run the same steps: a rank that catches an exception and skips a "
        "step falls out of step; let the exception end the job instead, and evaluate under nt.no_grad().")


def _signature(module: Module) -> list:
    out = []
    for kind, items in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
        for key, t in items:
            out.append((kind, key, t.names, tuple(t.shape), t.dtype.name, t.requires_grad))
    return out


def _describe(entry) -> str:
    _, _, names, shape, dtype, rg = entry
    return f"names {fmt(names)}, shape {shape}, {dtype}{'' if rg else ', no grad'}"


def _differences(mine: list, theirs: list, rank: int) -> List[str]:
    """How rank ``rank``'s model differs from rank 0's, one line per tensor (at most 4)."""
    a = {(e[0], e[1]): e for e in mine}
    b = {(e[0], e[1]): e for e in theirs}
    out = []
    for key in list(a) + [k for k in b if k not in a]:
        kind, name = key
        if key not in b:
            out.append(f"{kind} {name!r}: on rank 0, missing on rank {rank}")
        elif key not in a:
            out.append(f"{kind} {name!r}: on rank {rank}, missing on rank 0")
        elif a[key] != b[key]:
            out.append(f"{kind} {name!r}: rank 0 has {_describe(a[key])}; rank {rank} has {_describe(b[key])}")
    if not out:  # the same tensors in another order
        out.append(f"rank {rank} registers the same tensors in another order than rank 0")
    return out[:4] + ([f"... and {len(out) - 4} more"] if len(out) > 4 else [])


def _check_same_model(group: ProcessGroup, module: Module) -> None:
    """Raise the same error on every rank unless all ranks' models have alike parameters and buffers."""
    every = group.watch.exchange(_signature(module), "DistributedDataParallel")
    odd = [r for r, s in enumerate(every) if s != every[0]]
    if not odd:
        return
    lines = []
    for r in odd[:3]:
        lines += _differences(every[0], every[r], r)
    others = f" (ranks {odd[3:]} differ too)" if len(odd) > 3 else ""
    raise ValueError(
        "DistributedDataParallel: the ranks' models differ" + others + ":\n  " + "\n  ".join(lines)
        + "\nEvery rank must build the same model (the same parameter and buffer keys, dim names, shapes "
        "and dtypes, registered in the same order) before wrapping it."
    )


def _remove_hooks(removers: list) -> None:
    for remove in removers:
        remove()


class DistributedDataParallel(Module):
    """Data-parallel training of ``module`` over the process group (see the module docstring).

        dist.init_process_group("mpi")
        model = DistributedDataParallel(Net())           # the same on every rank from here on
        opt = nt.optim.AdamW(model.parameters())
        for x, y in DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds)):
            loss = loss_fn(model(x), y)
            opt.zero_grad()
            loss.backward()                               # gradients averaged over the ranks
            opt.step()

    ``module`` may be ``nt.compile(model)``: the wrapper trains ``model`` with its compiled forward.
    ``bucket_cap_mb``: the size of a gradient bucket in MiB; ``broadcast_buffers``: copy rank 0's
    buffers (running statistics) to every rank before each forward in training mode; ``overlap``:
    all-reduce each bucket during backward as soon as it is ready (False: all after backward).
    ``state_dict``/``load_state_dict`` are the wrapped module's (keys without a ``module.`` prefix),
    so a checkpoint loads into the plain model.
    """

    def __init__(self, module: Module, bucket_cap_mb: float = 25.0, broadcast_buffers: bool = True,
                 overlap: bool = True) -> None:
        super().__init__()
        run = module
        # DDP(nt.compile(model)): the module's parameters and state, its compiled forward (compiling the
        # wrapper instead runs eagerly: it counts steps and broadcasts buffers, which a graph skips)
        module = compiled_target(module)
        if not isinstance(module, Module):
            raise TypeError(f"DistributedDataParallel: expected an nn.Module or nt.compile of one, got "
                            f"{type(module).__name__}.")
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb!r}.")
        group = require_group("DistributedDataParallel")
        _check_same_model(group, module)
        self.module = module
        self._run = run  # what forward calls: the module, or its compiled form
        self.bucket_cap_mb = bucket_cap_mb
        self.broadcast_buffers = broadcast_buffers
        self.overlap = overlap
        self._group = group
        self._sync = True
        self._next = 0  # the first bucket not started in this backward
        self._queued = False  # whether this backward's end-callback is queued
        self._step = 0  # forwards in training mode with grad enabled, outside no_sync
        with no_grad():
            works = [collectives.broadcast(t, 0, async_op=True, check=False)
                     for t in list(module.parameters()) + list(module.buffers())]
            for w in works:
                w.wait()
        self._buckets = self._build_buckets([p for p in reversed(list(module.parameters())) if p.requires_grad])
        removers = []
        ref = weakref.ref(self)
        for b, bucket in enumerate(self._buckets):
            for k, p in enumerate(bucket.params):
                removers.append(p.register_post_accumulate_grad_hook(_hook(ref, b, k)))
        weakref.finalize(self, _remove_hooks, removers)

    def _build_buckets(self, params: List[Tensor]) -> List[_Bucket]:
        cap = self.bucket_cap_mb * 2 ** 20
        groups: List[List[Tensor]] = []
        size = 0
        for p in params:
            nbytes = p.numel() * p.dtype.itemsize
            last = groups[-1] if groups else None
            if last is None or size + nbytes > cap or p.dtype != last[0].dtype or backend_of(p) is not backend_of(last[0]):
                groups.append([p])
                size = nbytes
            else:
                last.append(p)
                size += nbytes
        return [_Bucket(ps, self._group.transport, self._group.size) for ps in groups]

    # ------------------------------------------------------------------ backward
    def _ready(self, b: int, k: int, p: Tensor) -> None:
        """Parameter ``k`` of bucket ``b`` has its gradient for this backward."""
        if not self._sync:
            return
        if not self._queued:
            queue_callback(self._finish)
            self._queued = True
        group = self._group
        bucket = self._buckets[b]
        bucket.put(k, p.grad, group.transport)
        if self.overlap and bucket.pending == 0:
            buckets = self._buckets
            while self._next < len(buckets) and buckets[self._next].pending == 0:
                buckets[self._next].start(group, self._step)
                self._next += 1
        group.transport.progress([bk.handle for bk in self._buckets[:self._next] if bk.handle is not None])

    def _finish(self) -> None:
        """At the end of backward: start the remaining buckets, wait for all, check that every rank
        is at this step, average the gradients."""
        self._queued = False
        group = self._group
        for bucket in self._buckets[self._next:]:
            bucket.start(group, self._step)
        self._next = 0
        for b, bucket in enumerate(self._buckets):
            bucket.wait(group, self._what(b))
        for bucket in self._buckets:
            _check_steps(bucket.steps(self._step))
        for bucket in self._buckets:
            bucket.write(group.transport, group.size)

    def _what(self, b: int) -> str:
        return (f"DistributedDataParallel: all_reduce of gradient bucket {b} of {len(self._buckets)} "
                f"(step {self._step})")

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Inside, backward only accumulates gradients locally (no communication); the first
        backward after it averages the accumulated sum over the ranks."""
        previous = self._sync
        self._sync = False
        try:
            yield
        finally:
            self._sync = previous

    # ------------------------------------------------------------------ running
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The wrapped module's forward (after copying rank 0's buffers, see ``broadcast_buffers``)."""
        if self._queued:  # a backward that raised before its end: drop what it started
            self._abandon()
        if self._sync and self.training and is_grad_enabled():
            self._step += 1
        if self.broadcast_buffers and self.training and self._group.size > 1:
            with no_grad():
                for t in self.module.buffers():
                    collectives.broadcast(t, 0, check=False)
        return self._run(*args, **kwargs)

    def _abandon(self) -> None:
        self._queued = False
        for b, bucket in enumerate(self._buckets):
            if bucket.handle is not None:
                bucket.wait(self._group, self._what(b))
            bucket.reset()
        self._next = 0

    def state_dict(self, *args: Any, **kwargs: Any):
        """The wrapped module's state dict (keys without a ``module.`` prefix)."""
        return self.module.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, rename: Optional[Any] = None):
        """Load into the wrapped module (keys as the plain module's)."""
        return self.module.load_state_dict(state_dict, strict=strict, rename=rename)

    def extra_repr(self) -> str:
        sizes = ", ".join(f"{sum(p.numel() for p in b.params):,}" for b in self._buckets)
        return (f"rank {self._group.rank} of {self._group.size}, {len(self._buckets)} buckets of "
                f"{sizes} elements, overlap={self.overlap}")


def _hook(ref: "weakref.ref", b: int, k: int):
    """The post-accumulate hook of parameter ``k`` of bucket ``b``; it keeps the wrapper only weakly,
    so that dropping the wrapper frees it (and removes the hooks)."""
    def hook(p: Tensor) -> None:
        ddp = ref()
        if ddp is not None:
            ddp._ready(b, k, p)
    return hook
