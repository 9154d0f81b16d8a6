"""namedtensor: tensors with a name for every dim, through every op, with autograd.

    import namedtensor as nt
    x = nt.randn(2, 5, 8, names=("batch", "seq", "embed"))
    x.sum("seq").names          # ('batch', 'embed')

The three rules (names ride along; broadcasting is positional and checked by
name; dims are addressed by name) are in DESIGN.md.  This module re-exports
the public API; each op lives with its name rule and gradient in
:mod:`namedtensor.ops`.
"""

from __future__ import annotations

from . import testing
from ._dtypes import DType, bool_, float16, float32, float64, int32, int64
from ._names import NamesError
from .backends import get_num_threads, set_num_threads
from .checking import Named, NamesSpec, check_names
from .autograd import enable_grad, grad, is_grad_enabled, no_grad, set_grad_enabled
from .ops import _installed  # noqa: F401 - attaches the op methods to Tensor
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, full, full_like, linspace, manual_seed, ones,
                           ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like)
from .ops.elementwise import *  # noqa: F401,F403 - unary/binary math, comparisons, where, clip
from .ops.indexing import gather, index_select, isel, masked_fill, narrow, select
from .ops.joining import cat, chunk, concat, pad, split, stack, unbind
from .ops.linalg import dot, einsum, matmul, outer
from .ops.movement import flip, roll, tile, tril, triu
from .ops.naming import align, align_as, align_to, permute, refine_names, rename, transpose
from .ops.reductions import *  # noqa: F401,F403 - sum mean prod max min ... softmax log_softmax
from .ops.shape import broadcast_to, flatten, reshape, squeeze, unflatten, unsqueeze
from .ops.sorting import ValuesIndices, argsort, sort, topk
from .tensor import Tensor
from .serialization import load, save
from . import cuda, data, nn, optim  # noqa: E402 - they build on the Tensor and its methods above
from . import display as _display, interop as _interop, numpy_protocols as _numpy_protocols
from .interop import from_dlpack, from_xarray, to_pandas, to_xarray
from .numpy_protocols import lift
from .tracing import ShapeTrace, show, spec, trace_shapes
from .backends.meta_backend import DataDependentError
from .tensor import install_methods as _install_methods

for _module in (_interop, _display, _numpy_protocols):  # conversions, display and NumPy's protocols: not ops
    _install_methods(_module.METHODS)

# PyTorch's dtype spellings; defined last, since they shadow builtins in this module
half = float16
float = float32  # noqa: A001
double = float64
long = int64
int = int32  # noqa: A001
bool = bool_  # noqa: A001

__version__ = "0.1.0"
