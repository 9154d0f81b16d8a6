"""Contractions: ``matmul``/``@`` (and PyTorch's ``mm bmm mv addmm baddbmm addmv addbmm chain_matmul``),
``nt.dot`` (by name),
``nt.einsum`` (over names) and ``nt.outer``.

Name rules (all in :mod:`namedtensor._names`):

* ``matmul`` (:func:`~namedtensor._names.matmul`): NumPy's matmul, 1-D operands
  and broadcast batch dims included.  Batch dims unify (rule 2); the two
  contracted dims must have equal names when both are named (stricter than
  PyTorch, to catch accidental alignment); the output is ``batch + a[-2] + b[-1]``
  and may not repeat a name.  ``mm`` (2-D @ 2-D), ``bmm`` (3-D @ 3-D, equal batch sizes) and ``mv``
  (2-D @ 1-D) are matmul with PyTorch's shape requirements, and ``chain_matmul`` is ``mm`` product by
  product; ``addmm``/``baddbmm``/``addmv``/``addbmm`` add ``beta * input``, which broadcasts onto the
  product (``addbmm``'s summed over its batch dim) and unifies with its names (rule 2).
* ``dot(*tensors, over=...)`` (:func:`~namedtensor._names.contract`): every dim
  is named; the names in ``over``, each in two operands at least, are summed; every other
  name appears once in the output (a name shared by several operands is a batch dim, with equal sizes), in
  order of first appearance unless ``out=`` orders them.
* ``einsum(spec, *tensors)`` (:func:`~namedtensor._names.parse_einsum`): the spec's
  words name each operand's dims (refining them) and the output's.
* ``outer(a, b)`` (:func:`~namedtensor._names.outer`): ``a.names + b.names``, disjoint; a broadcast
  product (``mul``'s gradients).

``dot`` and ``einsum`` run one op, ``_Einsum``, whose gradient for each
operand is again an einsum (of the output's gradient and the other operands), so
higher-order gradients come for free (for complex operands the others are
conjugated: PyTorch's convention).  Operands must share a dtype kind (float with
float, complex with complex, int with int), as in PyTorch; mixed widths promote
(the autograd engine casts each gradient back to its operand's dtype), and so do
signed with unsigned integers, as in NumPy 2 (uint8 with int8 gives int16).
"""

from __future__ import annotations

import numbers
from functools import lru_cache
from typing import Any, Optional, Sequence, Tuple, Union

from .. import _names
from ..autograd.graph import Op, apply
from ..tensor import Tensor
from ._common import is_bool, operand, sum_to, tensor_arg, with_names
from .shape import _broadcast_plain, _unsqueeze_axes

# ----------------------------------------------------------------------------- shared checks


def _as_operand(x, like: Optional[Tensor], op: str) -> Tensor:
    """A tensor operand: arrays become unnamed tensors; Python scalars are refused (contractions need dims)."""
    if isinstance(x, Tensor):
        return x
    if like is None:
        raise TypeError(f"{op}: expected Tensors, got {type(x).__name__}.")
    x = operand(x, like, op)
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: operands need at least 1 dim, got the scalar {x!r}; use * to scale a tensor.")
    return x


def _check_dtypes(op: str, tensors: Sequence[Tensor]) -> None:
    """Refuse bool operands and mixed kinds (float with int, real with complex), as PyTorch does.  Signed and
    unsigned integers are one kind and promote as in NumPy 2 and the Array API (uint8 with int8 gives int16),
    except uint64 with a signed integer, which no integer dtype holds (NumPy gives float64)."""
    first = tensors[0].dtype
    if first.kind != "b" and all(t.dtype is first for t in tensors):
        return
    dts = [t.dtype for t in tensors]
    kinds = {"i" if d.kind == "u" else d.kind for d in dts}
    if "b" in kinds or len(kinds) > 1:
        raise TypeError(
            f"{op}: operands must all be floating point or all integer, got {', '.join(repr(d) for d in dts)} "
            "(complex ones go with complex ones). Convert with .to(dtype) (e.g. .float()) first."
        )
    if any(d.name == "uint64" for d in dts) and any(d.kind == "i" for d in dts):
        raise TypeError(
            f"{op}: uint64 with a signed integer ({', '.join(repr(d) for d in dts)}) has no integer dtype to "
            "promote to; convert one operand with .to(dtype) (e.g. .long()) first."
        )


# ----------------------------------------------------------------------------- matmul


@lru_cache(maxsize=4096)
def _matmul_shapes(sa: Tuple[int, ...], sb: Tuple[int, ...]) -> Optional[str]:
    """What is wrong with the shapes of ``a @ b`` (sizes only), or ``None``."""
    ka = sa[-1]
    kb = sb[-2] if len(sb) >= 2 else sb[-1]
    if ka != kb:
        where = "second-to-last" if len(sb) >= 2 else "only"
        return (f"the contracted dims have different sizes: {ka} (last dim of a, shape {sa}) vs {kb} "
                f"({where} dim of b, shape {sb})")
    ba, bb = sa[:-2], sb[:-2]
    for k in range(1, min(len(ba), len(bb)) + 1):
        x, y = ba[-k], bb[-k]
        if x != y and x != 1 and y != 1:
            return (f"the batch dims do not broadcast: shapes {sa} and {sb} differ at batch position {-k} "
                    f"from the right ({x} vs {y})")
    return None


class _Matmul(Op):
    name = "matmul"
    complex_grad = True
    saves = (0, 1)

    @staticmethod
    def forward(B, a, b):
        return B.matmul(a, b)

    @staticmethod
    def backward(node, g):
        a, b = node.saved_tensors()
        sa, sb = node.in_shapes
        na, nb = node.in_names
        # the gradients are matmuls of their own; computed unnamed (the operands' names are
        # restored at the end) so that no name rule of the forward can trip on them
        a = with_names(a, _names.unnamed(len(sa)))
        b = with_names(b, _names.unnamed(len(sb)))
        g = with_names(g, _names.unnamed(g.ndim))
        # 1-D operands become matrices (a row, a column), as NumPy does internally
        gshape = tuple(g.shape)
        if len(sb) == 1:
            b = b.reshape(sb[0], 1)
            gshape = gshape + (1,)
        if len(sa) == 1:
            a = a.reshape(1, sa[0])
            gshape = gshape[:-1] + (1,) + gshape[-1:]
        if gshape != tuple(g.shape):
            g = g.reshape(gshape)
        # .mH: the conjugate transpose, PyTorch's convention for complex operands (.mT for real ones)
        ga = _to_operand(g @ b.mH, a.shape, sa, na) if node.edges[0] is not None else None
        gb = _to_operand(a.mH @ g, b.shape, sb, nb) if node.edges[1] is not None else None
        return ga, gb


def _to_operand(g: Tensor, matrix_shape, shape, names) -> Tensor:
    """Sum a gradient over broadcast batch dims, then undo the 1-D-as-matrix promotion."""
    g = sum_to(g, tuple(matrix_shape), _names.unnamed(len(matrix_shape)))
    if len(shape) == 1:
        return g.reshape(shape, names=names)
    return with_names(g, names)


def matmul(a: Any, b: Any) -> Tensor:
    """Matrix product with NumPy's rules (1-D operands, broadcast batch dims).

    Names: batch dims unify (rule 2); the contracted dims (``a``'s last, ``b``'s second-to-last,
    or a 1-D operand's only dim) must have equal names when both are named; the output is
    ``batch + (a.names[-2], b.names[-1])`` (minus the dims of 1-D operands), without repeats.
    """
    return _matmul(a, b, "matmul")


def _matmul(a: Any, b: Any, op: str, ndims: Optional[Tuple[int, int]] = None) -> Tensor:
    """``a @ b`` for ``op``, whose operands must have ``ndims`` dims when given (``mm``: 2 and 2)."""
    if isinstance(a, Tensor):
        b = _as_operand(b, a, op)
    else:
        a = _as_operand(a, b if isinstance(b, Tensor) else None, op)
    if ndims is not None and (a.ndim, b.ndim) != ndims:
        raise ValueError(f"{op}: expected operands of {ndims[0]} and {ndims[1]} dims, got shapes {a.shape} and "
                         f"{b.shape} (names {_names.fmt(a._names)} and {_names.fmt(b._names)}); matmul (@) takes "
                         "any number of dims.")
    names = _names.matmul(a._names, b._names, op)
    sa, sb = a._data.shape, b._data.shape
    problem = _matmul_shapes(tuple(sa), tuple(sb))
    if problem is None and ndims == (3, 3) and sa[0] != sb[0]:
        problem = f"the batch sizes differ: {sa[0]} vs {sb[0]} ({op} does not broadcast them)"
    if problem is not None:
        raise ValueError(f"{op}: {problem}; names {_names.fmt(a._names)} and {_names.fmt(b._names)}.")
    _check_dtypes(op, (a, b))
    return apply(_Matmul, (a, b), names)


def mm(input: Tensor, mat2: Any) -> Tensor:
    """The product of two matrices (2-D only, as ``torch.mm``); names as :func:`matmul`."""
    return _matmul(tensor_arg(input, "mm"), mat2, "mm", (2, 2))


def bmm(input: Tensor, mat2: Any) -> Tensor:
    """Batched matrix product of ``(b, n, m)`` and ``(b, m, p)`` (3-D only, equal batch sizes, as
    ``torch.bmm``); names as :func:`matmul`."""
    return _matmul(tensor_arg(input, "bmm"), mat2, "bmm", (3, 3))


def mv(input: Tensor, vec: Any) -> Tensor:
    """The product of a matrix and a vector (2-D and 1-D, as ``torch.mv``); names as :func:`matmul`."""
    return _matmul(tensor_arg(input, "mv"), vec, "mv", (2, 1))


def _add_product(op: str, input: Any, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    """``beta * input + alpha * product``; ``input`` broadcasts onto the product, whose shape the result
    keeps, and the names unify (rule 2).  With ``beta == 0`` input's values are not read, so nan and
    inf in it do not propagate (PyTorch's rule)."""
    for what, v in (("beta", beta), ("alpha", alpha)):
        if is_bool(v) or not isinstance(v, numbers.Number):
            raise TypeError(f"{op}: {what} must be a number, got {type(v).__name__} {v!r}.")
    input = _as_operand(input, product, op)
    names = _names.unify(product._names, input._names, op)
    shape = tuple(product.shape)
    lead = len(shape) - input.ndim
    if lead < 0 or any(s != 1 and s != shape[lead + i] for i, s in enumerate(input.shape)):
        raise ValueError(f"{op}: input of shape {input.shape} does not broadcast to the product's shape {shape}.")
    scaled = product if alpha == 1 else product * alpha
    if beta == 0:
        return with_names(scaled, names)
    return (input if beta == 1 else input * beta) + scaled


def addmm(input: Any, mat1: Tensor, mat2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat1 @ mat2)``, matrices 2-D, as ``torch.addmm``; ``input`` broadcasts
    onto the product and its names unify with the product's (rule 2)."""
    return _add_product("addmm", input, _matmul(tensor_arg(mat1, "addmm", "mat1"), mat2, "addmm", (2, 2)),
                        beta, alpha)


def baddbmm(input: Any, batch1: Tensor, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2)``, batches 3-D, as ``torch.baddbmm``; ``input``
    broadcasts onto the product and its names unify with the product's (rule 2)."""
    return _add_product("baddbmm", input, _matmul(tensor_arg(batch1, "baddbmm", "batch1"), batch2, "baddbmm", (3, 3)),
                        beta, alpha)


def addmv(input: Any, mat: Tensor, vec: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``, a 2-D matrix and a 1-D vector, as ``torch.addmv``; ``input``
    broadcasts onto the product and its names unify with the product's (rule 2)."""
    return _add_product("addmv", input, _matmul(tensor_arg(mat, "addmv", "mat"), vec, "addmv", (2, 1)), beta, alpha)


def addbmm(input: Any, batch1: Tensor, batch2: Any, *, beta: float = 1, alpha: float = 1) -> Tensor:
    """``beta * input + alpha * bmm(batch1, batch2).sum(0)``, batches 3-D, as ``torch.addbmm``: the batch
    dim is summed; ``input`` broadcasts onto the product and its names unify with the product's (rule 2)."""
    product = _matmul(tensor_arg(batch1, "addbmm", "batch1"), batch2, "addbmm", (3, 3))
    return _add_product("addbmm", input, product.sum(0), beta, alpha)


def chain_matmul(*matrices: Tensor) -> Tensor:
    """The product of 2-D matrices from left to right, as ``torch.chain_matmul`` (deprecated there for
    ``torch.linalg.multi_dot``); names as :func:`matmul`, product by product."""
    if not matrices:
        raise TypeError("chain_matmul: expected at least one matrix.")
    if len(matrices) == 1:
        m = tensor_arg(matrices[0], "chain_matmul")
        if m.ndim != 2:
            raise ValueError(f"chain_matmul: expected 2-D matrices, got shape {m.shape}.")
        return m
    out = matrices[0]
    for m in matrices[1:]:
        out = _matmul(tensor_arg(out, "chain_matmul"), m, "chain_matmul", (2, 2))
    return out


def _rmatmul(b: Tensor, a) -> Tensor:
    return matmul(_as_operand(a, b, "matmul"), b)


# ----------------------------------------------------------------------------- einsum (one op)

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _letters(ids: Tuple[int, ...]) -> str:
    return "".join(_LETTERS[i] for i in ids)


@lru_cache(maxsize=64)
def _einsum_op(n: int) -> type:
    """The einsum op for ``n`` operands (it saves them all: each gradient needs the others)."""
    return type(f"_Einsum{n}", (_EinsumBase,), {"saves": tuple(range(n))})


class _EinsumBase(Op):
    """``B.einsum`` over dim ids: ``ids[i]`` are operand ``i``'s, ``out`` the output's (ints, no repeats
    within an operand)."""

    name = "einsum"
    complex_grad = True

    @staticmethod
    def forward(B, *arrays, ids, out):
        return B.einsum(",".join(_letters(i) for i in ids) + "->" + _letters(out), *arrays)

    @staticmethod
    def backward(node, g):
        saved = node.saved_tensors()
        ids, out = node.params["ids"], node.params["out"]
        grads = []
        for i, own in enumerate(ids):
            if node.edges[i] is None:
                grads.append(None)
                continue
            # linear in each operand: the gradient contracts g with the others' conjugates (PyTorch's convention)
            others = [saved[j].conj() for j in range(len(saved)) if j != i]
            other_ids = (out,) + tuple(ids[j] for j in range(len(ids)) if j != i)
            present = set(out).union(*other_ids[1:])
            # a dim summed in operand i alone gets a constant gradient along it: compute the
            # gradient without it, then broadcast it back
            kept = tuple(d for d in own if d in present)
            in_names = node.in_names[i]
            names = tuple(n for d, n in zip(own, in_names) if d in present)
            gi = _einsum(tuple([g] + others), other_ids, kept, _names.validate(names, len(names)))
            if len(kept) != len(own):
                missing = tuple(k for k, d in enumerate(own) if d not in present)
                gi = _broadcast_plain(_unsqueeze_axes(gi, missing), tuple(node.in_shapes[i]), in_names)
            grads.append(gi)
        return tuple(grads)


def _einsum(tensors: Tuple[Tensor, ...], ids, out, names, op: str = "einsum") -> Tensor:
    """Run the einsum op on tensors whose dims have ``ids``; the output gets ``names``."""
    _check_dtypes(op, tensors)
    return apply(_einsum_op(len(tensors)), tensors, names, ids=ids, out=out)


def _check_sizes(op: str, tensors: Sequence[Tensor], all_names, ids) -> None:
    """Dims with the same id must have the same size (no broadcasting in a contraction by name)."""
    sizes: dict = {}
    for t, names, t_ids in zip(tensors, all_names, ids):
        for name, d, s in zip(names, t_ids, t._data.shape):
            prev = sizes.setdefault(d, (s, t))
            if prev[0] != s:
                raise ValueError(
                    f"{op}: dim {name!r} has size {prev[0]} in the operand with names "
                    f"{_names.fmt(prev[1]._names)} (shape {prev[1].shape}) but size {s} in the operand "
                    f"with names {_names.fmt(t._names)} (shape {t.shape}); a dim shared by name must "
                    "have one size."
                )


@lru_cache(maxsize=4096)
def _plan(all_names: Tuple[_names.Names, ...], over: Optional[Tuple[str, ...]], out: Optional[Tuple[str, ...]],
          op: str):
    """``_names.contract``'s plan, refusing more distinct dims than einsum has letters."""
    plan = _names.contract(all_names, over, out, op)
    count = 1 + max((d for t_ids in plan[0] for d in t_ids), default=-1)  # ids number the dims from 0
    if count > len(_LETTERS):
        raise ValueError(f"{op}: {count} distinct dims; at most {len(_LETTERS)} can take part in one contraction.")
    return plan


def _contract(op: str, tensors: Tuple[Tensor, ...], all_names, over, out) -> Tensor:
    """Contract ``tensors`` whose dims are named ``all_names``: sum ``over`` (``None``: all but ``out``)."""
    ids, out_ids, out_names = _plan(all_names, over, out, op)
    _check_sizes(op, tensors, all_names, ids)
    return _einsum(tensors, ids, out_ids, out_names, op)


def _as_names(x, what: str, op: str) -> Tuple[str, ...]:
    if isinstance(x, str):
        return (x,)
    if isinstance(x, (tuple, list)):
        return tuple(x)
    raise TypeError(f"{op}: {what} must be a dim name or a tuple of names, got {type(x).__name__} {x!r}.")


def dot(*tensors: Tensor, over: Union[str, Sequence[str]], out: Optional[Sequence[str]] = None) -> Tensor:
    """Contract by name: sum over the dims named in ``over``; keep every other name once.

    Every dim of every operand must be named, and a name in ``over`` must be a dim of two operands
    at least (a dim of one operand is summed with ``.sum``, so a typo is an error, not a wrong sum).
    A name that several operands share and that is not in ``over`` is a batch dim (its sizes must be equal).  The output's dims come in
    order of first appearance, or in the order ``out`` gives.

        nt.dot(q, k, over="embed")        # (batch, seq, embed) . (batch, key, embed) -> (batch, seq, key)
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise TypeError("dot: give at least one tensor.")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"dot: expected Tensors, got {type(t).__name__}.")
    over = _as_names(over, "over", "dot")
    out = None if out is None else _as_names(out, "out", "dot")
    return _contract("dot", tensors, tuple(t._names for t in tensors), over, out)


def einsum(spec: str, *tensors) -> Tensor:
    """Einstein summation over names: ``nt.einsum("batch seq d, d out -> batch seq out", x, w)``.

    Operands are separated by ``,``, their dims by spaces, and each word is a dim name; a spec
    without spaces is read letter by letter as in NumPy (``"ij,jk->ik"``).  Each operand's names
    are refined with the spec's (an unnamed dim takes the spec's name, a named dim must already
    have it); dims left out of the output are summed; the output is named by the spec's output words.
    """
    if not isinstance(spec, str):
        raise TypeError(f"einsum: the spec must be a str, got {type(spec).__name__}.")
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    like = next((t for t in tensors if isinstance(t, Tensor)), None)
    tensors = tuple(_as_operand(t, like, "einsum") for t in tensors)
    refined, out = _names.parse_einsum(spec, tuple(t._names for t in tensors), "einsum")
    return _contract("einsum", tensors, refined, None, out)


def outer(a: Tensor, b: Tensor) -> Tensor:
    """Outer product of tensors of any number of dims: shape ``a.shape + b.shape``, names
    ``a.names + b.names`` (which must not share a name; use :func:`dot` for shared batch dims)."""
    b = _as_operand(b, tensor_arg(a, "outer"), "outer")
    names = _names.outer(a._names, b._names, "outer")
    _check_dtypes("outer", (a, b))
    # one product per pair, broadcast: einsum would add each product to a +0.0, turning -0.0 into 0.0
    na = a.ndim
    rows = _unsqueeze_axes(with_names(a, _names.unnamed(na)), tuple(range(na, na + b.ndim)))
    return with_names(rows * with_names(b, _names.unnamed(b.ndim)), names)


METHODS = {"matmul": matmul, "__matmul__": matmul, "__rmatmul__": _rmatmul, "outer": outer, "mm": mm, "bmm": bmm,
           "mv": mv, "addmm": addmm, "baddbmm": baddbmm, "addmv": addmv, "addbmm": addbmm}
