"""Fused chains: one op that runs a straight-line chain of other ops (what ``nt.compile`` fuses).

A :class:`Chain` lists its members, each an op of the library with its arguments: the chain's own
inputs (``("in", k)``), earlier members' outputs (``("tmp", j)``) and Python numbers.  ``fused(chain,
kernels)`` makes the Op class that runs it.  Its forward calls ``kernel(B, arrays)``, code generated for
the whole chain for the graph's backend (see ``namedtensor/compiler/formulas.py``), which computes the
members' values in their dtypes: the name rule of the fused op is that its outputs carry the names the
members gave them.

The backward recomputes instead of storing: the node saves only the chain's inputs (and, for a chain
ending in a softmax, its output, as the eager softmax saves it).  Where the compiler
generated a backward kernel for the backend (the chain's backward, written from the same formulas) and no
graph of the gradient is wanted, one pass over the inputs and the outputs' gradients gives every input's
gradient.  Otherwise the backward runs the members again as ops (so each records its own node) and
then calls the members' backward functions in reverse order, passing gradients along the chain.  The intermediate values live only
during that backward, and since the members' backward functions are written with tensor ops, a
gradient taken with ``create_graph=True`` is differentiable again: in grad mode the recomputation runs
on the saved inputs themselves, so the new graph reaches back into their history.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

from .. import _names
from ..autograd.graph import Op, apply
from ..autograd.mode import enable_grad, is_grad_enabled
from ..tensor import Tensor
from ._common import sum_to

__all__ = ["Member", "Chain", "fused"]

Ref = Tuple[str, int]  # ("in", k): the chain's k-th input; ("tmp", j): member j's (first) output


class Member(NamedTuple):
    """One op of a chain: ``op`` applied to ``args`` (refs or Python numbers) with ``params``; its output
    has ``names`` and ``dtype`` (the dtype's name, as the trace recorded it)."""

    op: type
    args: Tuple[Any, ...]
    params: Dict[str, Any]
    names: Tuple[Optional[str], ...]
    dtype: str


class Chain(NamedTuple):
    """Members in order, and which of their outputs leave the chain (member indices)."""

    members: Tuple[Member, ...]
    outputs: Tuple[int, ...]

    def label(self) -> str:
        return "+".join(m.op.name for m in self.members)


def _is_ref(a: Any) -> bool:
    return a.__class__ is tuple and len(a) == 2 and a[0] in ("in", "tmp")


def _replay(chain: Chain, inputs) -> list:
    """The members applied as ops to ``inputs`` (tensors or numbers): every member's output tensor."""
    tmp = []
    for m in chain.members:
        args = [(inputs[a[1]] if a[0] == "in" else tmp[a[1]]) if _is_ref(a) else a for a in m.args]
        tmp.append(apply(m.op, tuple(args), m.names, **m.params))
    return tmp


def _backward(chain: Chain, node, grads) -> tuple:
    saved = node.saved_tensors()[:len(node.in_shapes)]  # the inputs (a saved output follows them)
    graph = is_grad_enabled()  # create_graph: recompute on the saved inputs, inside their history
    inputs = list(saved if graph else (x.detach().requires_grad_(x._rg) if isinstance(x, Tensor) else x
                                       for x in saved))
    with enable_grad():
        values = _replay(chain, inputs)
    pending: Dict[Ref, Tensor] = {}

    def give(ref: Ref, g) -> None:
        if g is not None:
            pending[ref] = g if ref not in pending else pending[ref] + g

    for k, j in enumerate(chain.outputs):
        give(("tmp", j), grads[k])
    for j in range(len(chain.members) - 1, -1, -1):
        g = pending.pop(("tmp", j), None)
        member_node = values[j]._node
        if g is None or member_node is None:
            continue
        for a, ga in zip(chain.members[j].args, member_node.op.backward(member_node, g)):
            if _is_ref(a):
                give(a, ga)
    return tuple(pending.get(("in", k)) for k in range(len(saved)))


def _kernel_backward(node, grads, kernel: Callable) -> tuple:
    """The gradients from a generated backward kernel: one array per input at the outputs' shape, summed
    to the input's shape where it was broadcast."""
    saved = node.saved_tensors()
    B = node.B
    full = kernel(B, [x._data for x in saved], [g._data for g in grads])
    out = []
    for k, g in enumerate(full):
        if g is None or node.edges[k] is None:
            out.append(None)
        else:
            out.append(sum_to(Tensor._make(g, _names.unnamed(len(g.shape)), B), node.in_shapes[k], node.in_names[k]))
    return tuple(out)


def fused(chain: Chain, kernels: Dict[str, Callable], backward_kernels: Optional[Dict[str, Callable]] = None,
          saves_output: bool = False) -> type:
    """The Op class that runs ``chain`` (one output per entry of ``chain.outputs``).  ``kernels`` maps a
    backend's name to ``kernel(B, arrays) -> tuple of arrays`` computing the same outputs (a fused op
    exists for the backends that have one: without a kernel its members are better run as themselves).
    ``backward_kernels`` maps a backend's name to ``kernel(B, input arrays, output gradients) -> one
    gradient array or None per input``, which the backward runs when it builds no graph (else it
    recomputes through the members' own backwards).  With ``saves_output`` (a chain ending in a softmax,
    whose output costs more to recompute than to keep, as the eager softmax keeps it) the node saves the
    outputs too, and the backward kernel's input arrays end with them."""
    kernels = dict(kernels)
    backward_kernels = dict(backward_kernels or {})
    n_in = 1 + max((a[1] for m in chain.members for a in m.args if _is_ref(a) and a[0] == "in"), default=-1)

    def forward(B, *arrays):
        kernel = kernels.get(B.name)
        if kernel is None:
            raise NotImplementedError(f"fused[{chain.label()}]: no kernel was generated for the {B.name} backend "
                                      f"(the graph was compiled for {', '.join(kernels)}).")
        outs = kernel(B, arrays)
        return outs if len(outs) > 1 else outs[0]

    def backward(node, *grads):
        if not is_grad_enabled():
            kernel = backward_kernels.get(node.B.name)
            if kernel is not None:
                return _kernel_backward(node, grads, kernel)
        return _backward(chain, node, grads)

    return type("_Fused", (Op,), {
        "name": f"fused[{chain.label()}]", "saves": tuple(range(n_in)), "saves_output": saves_output,
        "n_outputs": len(chain.outputs),
        "differentiable": any(m.op.differentiable for m in chain.members),
        "complex_grad": all(m.op.complex_grad for m in chain.members), "chain": chain, "kernels": kernels,
        "backward_kernels": backward_kernels,
        "forward": staticmethod(forward), "backward": staticmethod(backward),
    })
