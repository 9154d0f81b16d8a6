"""namedtensor: tensors with a name for every dim, through every op, with autograd.

    import namedtensor as nt
    x = nt.randn(2, 5, 8, names=("batch", "seq", "embed"))
    x.sum("seq").names          # ('batch', 'embed')

See DESIGN.md for the three rules; the public API is re-exported here.
"""

from __future__ import annotations

from . import _dtypes
from ._dtypes import DType, bool_, float16, float32, float64, int32, int64
from ._names import NamesError
from .tensor import Tensor
from . import ops as _ops  # noqa: F401 - attaches the op methods to Tensor
from .autograd import enable_grad, grad, is_grad_enabled, no_grad, set_grad_enabled
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, full, full_like, linspace, manual_seed, ones,
                           ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like)
from .ops.elementwise import *  # noqa: F401,F403
from .ops.elementwise import where
from .ops.naming import align
from .ops.reductions import *  # noqa: F401,F403

half = float16
float = float32  # noqa: A001 - PyTorch spelling
double = float64
long = int64
int = int32  # noqa: A001
bool = bool_  # noqa: A001

__version__ = "0.1.0"
