"""``nt.linalg``: linear algebra on named tensors, PyTorch's ``torch.linalg`` spellings (the Array API
standard's ``linalg`` extension).

Every matrix function takes its two matrix dims by name or position with ``dims=(row, col)`` (the last two by
default, as PyTorch); the other dims are batch dims and come first in the result, in their order.  The name
rules and the gradients are those of :mod:`namedtensor.ops.matrix` (docs/design.md, "Name rules, family by
family"); ``matmul``, ``outer`` and ``tensordot`` are the contractions of :mod:`namedtensor.ops.linalg`.

    import namedtensor as nt
    a = nt.randn(4, 3, 3, names=("batch", "row", "col"), dtype=nt.float64)
    nt.linalg.inv(a).names                        # ('batch', 'row', 'col')
    nt.linalg.det(a).names                        # ('batch',)
    nt.linalg.svd(a, name="k").U.names            # ('batch', 'row', 'k')
"""

from .ops.linalg import matmul, outer
from .ops.matrix import (EighResult, QRResult, SlogdetResult, SVDResult, cholesky, cross, det, diagonal, eigh,
                         eigvalsh, inv, matrix_norm, matrix_power, matrix_rank, matrix_transpose, multi_dot, pinv, qr,
                         slogdet, solve, svd, svdvals, tensordot, trace, vecdot, vector_norm)
from .ops.matrix import linalg_norm as norm

__all__ = [
    "cholesky", "cross", "det", "diagonal", "eigh", "eigvalsh", "inv", "matmul", "matrix_norm", "matrix_power",
    "matrix_rank", "matrix_transpose", "multi_dot", "norm", "outer", "pinv", "qr", "slogdet", "solve", "svd",
    "svdvals", "tensordot", "trace", "vecdot", "vector_norm", "EighResult", "QRResult", "SlogdetResult",
    "SVDResult",
]
