"""namedtensor: tensors with a name for every dim, through every op, with autograd.

    import namedtensor as nt
    x = nt.randn(2, 5, 8, names=("batch", "seq", "embed"))
    x.sum("seq").names          # ('batch', 'embed')

The three rules (names ride along; broadcasting is positional and checked by
name; dims are addressed by name) are in docs/design.md.  This module
re-exports the public API, declared in ``__all__`` and documented in the
README's API table; each op lives with its gradient in :mod:`namedtensor.ops`.

The ops named like Python's builtins (``sum max min abs all any round pow``)
and PyTorch's dtype spellings ``float int bool`` are ``nt.sum`` and so on, but
not in ``__all__``: ``from namedtensor import *`` leaves the builtins alone.
The layers ``autograd``, ``backends`` and ``ops`` stay reachable as
subpackages; the single-file modules whose names are re-exported here
(``checking``, ``display``, ``interop``, ``numpy_protocols``, ``serialization``,
``tracing``) are not attributes of the package (``from namedtensor.tracing
import ...`` still works).
"""

from . import testing
from ._dtypes import DType, bool_, float16, float32, float64, int32, int64
from ._names import NamesError
from .backends import get_num_threads, set_num_threads
from .checking import Named, NamesSpec, check_names
from .autograd import enable_grad, grad, is_grad_enabled, no_grad, set_grad_enabled
# importing the op families attaches their methods to Tensor
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, full, full_like, linspace, manual_seed, ones,
                           ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like)
from .ops.elementwise import (add, ceil, clamp, clip, cos, div, divide, eq, erf, exp, expm1, floor, floor_divide, ge,
                              gelu, gt, isfinite, isinf, isnan, le, log, log1p, logical_and, logical_not, logical_or,
                              logical_xor, lt, maximum, minimum, mod, mul, multiply, ne, neg, reciprocal, relu,
                              remainder, rsqrt, sigmoid, sign, silu, sin, softplus, sqrt, square, sub, subtract, tan,
                              tanh, true_divide, where)
from .ops.elementwise import abs as abs, pow as pow, round as round  # nt.abs: not in __all__
from .ops.elementwise import (acos, acosh, addcdiv, addcmul, asin, asinh, atan, atan2, atanh, clamp_max, clamp_min,
                              copysign, cosh, digamma, erfc, erfinv, exp2, fmod, frac, hypot, lerp, lgamma, log2,
                              log10, logaddexp, nan_to_num, polygamma, sinh, threshold, trunc)
from .ops.creation import bernoulli, multinomial, normal, randint_like, randperm
from .ops.indexing import diagonal, gather, index_select, isel, masked_fill, masked_select, narrow, select
from .ops.joining import cat, chunk, concat, pad, split, stack, unbind
from .ops.linalg import addmm, baddbmm, bmm, dot, einsum, matmul, mm, mv, outer
from .ops.movement import flip, roll, tile, tril, triu
from .ops.naming import align, align_as, align_to, permute, refine_names, rename, transpose
from .ops.rearrange import rearrange, reduce, repeat
from .ops.reductions import (amax, amin, argmax, argmin, cdist, cumprod, cumsum, equal, log_softmax, logsumexp, mean,
                             norm, prod, softmax, std, std_mean, var, var_mean)
from .ops.reductions import all as all, any as any, max as max, min as min, sum as sum  # likewise
from .ops.shape import broadcast_to, flatten, reshape, squeeze, unflatten, unsqueeze
from .ops.sorting import ValuesIndices, argsort, kthvalue, median, mode, nanmedian, sort, topk
from .ops.scans import cummax, cummin, logcumsumexp
from .tensor import Tensor, install_methods
from .serialization import load, save
from . import cuda, data, nn, optim  # they build on the Tensor and its methods above
# the Array API namespace, imported so that Tensor.__array_namespace__ finds it; namedtensor.array_api, not nt.array_api
from . import array_api
from .interop import from_dlpack, from_xarray, to_pandas, to_xarray
from .numpy_protocols import lift
from .tracing import ShapeTrace, show, spec, trace_shapes
from .conversion import ConversionReport, conversion_report, gradual
from .backends.meta_backend import DataDependentError
from . import checking, conversion, display, interop, numpy_protocols, serialization, tracing

# conversions, display and NumPy's protocols are Tensor methods but not ops
install_methods({**interop.METHODS, **display.METHODS, **numpy_protocols.METHODS})
del install_methods, array_api, checking, conversion, display, interop, numpy_protocols, serialization, tracing

# PyTorch's dtype spellings; defined last, since three of them shadow builtins in this module
half = float16
float = float32
double = float64
long = int64
int = int32
bool = bool_

__version__ = "0.1.0"

__all__ = [
    # tensors, dtypes, errors
    "Tensor", "DType", "bool_", "float16", "float32", "float64", "int32", "int64", "half", "double", "long",
    "NamesError", "DataDependentError",
    # creation
    "tensor", "as_tensor", "arange", "empty", "eye", "full", "linspace", "ones", "rand", "randint", "randn", "zeros",
    "empty_like", "full_like", "ones_like", "rand_like", "randn_like", "zeros_like", "manual_seed",
    "randperm", "randint_like", "bernoulli", "multinomial", "normal",
    # naming
    "rename", "refine_names", "align_to", "align_as", "align", "permute", "transpose",
    # shape, joining, movement
    "flatten", "unflatten", "squeeze", "unsqueeze", "broadcast_to", "reshape",
    "cat", "concat", "stack", "split", "chunk", "unbind", "pad",
    "flip", "roll", "tile", "tril", "triu",
    "rearrange", "reduce", "repeat",
    # indexing
    "isel", "select", "narrow", "index_select", "gather", "masked_fill", "masked_select", "diagonal", "where",
    # elementwise math (and abs, round, pow)
    "neg", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu",
    "silu", "softplus", "erf", "sign", "floor", "ceil", "clip", "clamp", "reciprocal", "square",
    "acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "trunc", "frac",
    "erfc", "erfinv", "lgamma", "digamma", "polygamma", "threshold", "nan_to_num", "clamp_min", "clamp_max",
    "atan2", "hypot", "logaddexp", "copysign", "fmod", "lerp", "addcmul", "addcdiv",
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    # reductions (and sum, max, min, any, all), sorting
    "mean", "prod", "amax", "amin", "argmax", "argmin", "std", "var", "logsumexp", "norm", "cumsum", "cumprod",
    "softmax", "log_softmax", "sort", "argsort", "topk", "ValuesIndices",
    "median", "nanmedian", "mode", "kthvalue", "std_mean", "var_mean", "cummax", "cummin", "logcumsumexp", "cdist",
    "equal",
    # contractions
    "matmul", "dot", "einsum", "outer", "mm", "bmm", "mv", "addmm", "baddbmm",
    # autograd
    "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    # threads, checkpoints
    "set_num_threads", "get_num_threads", "save", "load",
    # conversion, checked signatures, shape dry runs
    "lift", "to_xarray", "from_xarray", "to_pandas", "from_dlpack", "Named", "NamesSpec", "check_names",
    "spec", "trace_shapes", "show", "ShapeTrace", "gradual", "conversion_report", "ConversionReport",
    # subpackages
    "nn", "optim", "data", "cuda", "testing",
]
