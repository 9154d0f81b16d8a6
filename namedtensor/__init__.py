"""namedtensor: tensors with a name for every dim, through every op, with autograd.

    import namedtensor as nt
    x = nt.randn(2, 5, 8, names=("batch", "seq", "embed"))
    x.sum("seq").names          # ('batch', 'embed')

The three rules (names ride along; broadcasting is positional and checked by
name; dims are addressed by name) are in docs/design.md.  This module
re-exports the public API, declared in ``__all__`` and documented in the
README's API table; each op lives with its gradient in :mod:`namedtensor.ops`.

The ops named like Python's builtins (``sum max min abs all any round pow complex``)
and PyTorch's dtype spellings ``float int bool`` are ``nt.sum`` and so on, but
not in ``__all__``: ``from namedtensor import *`` leaves the builtins alone.
The layers ``autograd``, ``backends`` and ``ops`` stay reachable as
subpackages; the single-file modules whose names are re-exported here
(``checking``, ``display``, ``interop``, ``numpy_protocols``, ``profiler``,
``serialization``, ``tracing``) are not attributes of the package (``from namedtensor.tracing
import ...`` still works).
"""

from . import testing
from ._dtypes import (DType, bool_, complex64, complex128, float16, float32, float64, int8, int16, int32, int64, uint8,
                      uint16, uint32, uint64)
from ._names import NamesError
from .backends import get_num_threads, set_num_threads
from .backends.heap import retain_freed_memory
from .checking import Named, NamesSpec, check_names
from .autograd import enable_grad, grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled
# importing the op families attaches their methods to Tensor
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, full, full_like, linspace, manual_seed, ones,
                           ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like)
from .ops.elementwise import (add, ceil, clamp, clip, cos, div, divide, eq, erf, exp, expm1, floor, floor_divide, ge,
                              gelu, gt, isfinite, isinf, isnan, le, log, log1p, logical_and, logical_not, logical_or,
                              logical_xor, lt, maximum, minimum, mod, mul, multiply, ne, neg, positive, reciprocal, relu,
                              remainder, rsqrt, sigmoid, sign, silu, sin, softplus, sqrt, square, sub, subtract, tan,
                              tanh, true_divide, where)
from .ops.elementwise import abs as abs, pow as pow, round as round  # nt.abs: not in __all__
from .ops.elementwise import (acos, acosh, addcdiv, addcmul, asin, asinh, atan, atan2, atanh, clamp_max, clamp_min,
                              copysign, cosh, digamma, erfc, erfinv, exp2, fmod, frac, hypot, lerp, lgamma, log2,
                              log10, logaddexp, nan_to_num, polygamma, sinh, threshold, trunc)
from .ops.creation import bernoulli, multinomial, normal, randint_like, randperm
from .ops.sets import argwhere, nonzero, searchsorted, unique, unique_consecutive
from .ops.bitwise import (bitwise_and, bitwise_left_shift, bitwise_not, bitwise_or, bitwise_right_shift, bitwise_xor,
                          nextafter)
from .ops.complex import angle, conj, imag, is_complex, polar, real, resolve_conj, view_as_complex, view_as_real
from .ops.complex import complex as complex  # nt.complex: not in __all__
from .ops.indexing import diagonal, gather, index_select, isel, masked_fill, masked_select, narrow, select
from .ops.scatter import (index_add, index_copy, index_fill, index_put, masked_scatter, scatter, scatter_add,
                         scatter_reduce, take)
from .ops.joining import cat, chunk, concat, pad, split, stack, unbind
from .ops.linalg import addmm, baddbmm, bmm, dot, einsum, matmul, mm, mv, outer
from .ops.matrix import (det, inverse, logdet, matrix_power, pinverse, slogdet, tensordot, matrix_trace as trace,
                         torch_cholesky as cholesky, torch_cross as cross, torch_qr as qr, torch_svd as svd)
from .ops.movement import flip, roll, tile, tril, triu
from .ops.naming import align, align_as, align_to, permute, refine_names, rename, transpose
from .ops.rearrange import rearrange, reduce, repeat
from .ops.reductions import (amax, amin, argmax, argmin, cdist, cumprod, cumsum, equal, log_softmax, logsumexp, mean,
                             norm, prod, softmax, std, std_mean, var, var_mean)
from .ops.reductions import all as all, any as any, max as max, min as min, sum as sum  # likewise
from .ops.shape import broadcast_to, flatten, reshape, squeeze, unflatten, unsqueeze
from .ops.shaping import (cartesian_prod, diag, diag_embed, diff, fliplr, flipud, meshgrid, repeat_interleave, rot90,
                          tril_indices, triu_indices)
from .ops.sorting import ValuesIndices, argsort, kthvalue, median, mode, nanmedian, sort, topk
from .ops.scans import cummax, cummin, logcumsumexp
from .ops.statistics import (bincount, bucketize, cosine_similarity, count_nonzero, dist, histc, histogram, nanmean,
                             nanquantile, nansum, quantile, trapezoid)
from .ops.special_math import heaviside, i0, igamma, igammac, sinc, xlogy
from .ops.linalg import addbmm, addmv, chain_matmul
from .ops.helpers import (allclose, clone, from_numpy, frombuffer, get_default_dtype, is_floating_point, is_tensor,
                          isclose, numel, set_default_dtype)
from .ops.quantize import (QuantizedTensor, fake_quantize_per_channel_affine, fake_quantize_per_tensor_affine, qint8,
                           quantize_per_channel, quantize_per_tensor, quint8)
from .tensor import Tensor, install_methods
from .serialization import load, save
from . import cuda, data, fft, nn, optim, special  # they build on the Tensor and its methods above
from . import linalg  # nt.linalg, as torch.linalg
from . import onnx  # nt.onnx.export (the onnx package is imported when it runs)
from . import quantization  # nt.quantization: observers, quantized layers, the workflows
# the Array API namespace, imported so that Tensor.__array_namespace__ finds it; namedtensor.array_api, not nt.array_api
from . import array_api
from .interop import from_dlpack, from_xarray, to_pandas, to_xarray
from .numpy_protocols import lift
from .tracing import ShapeTrace, show, spec, trace_shapes
from .conversion import ConversionReport, conversion_report, gradual
from .profiler import Profile, profile
from .compiler import CompiledFunction, compile as compile  # named as the builtin: not in __all__ (as sum)
from .display import get_printoptions, set_printoptions
from .backends.meta_backend import DataDependentError
from . import checking, compiler, conversion, display, interop, numpy_protocols, profiler, serialization, tracing

# conversions, display and NumPy's protocols are Tensor methods but not ops
install_methods({**interop.METHODS, **display.METHODS, **numpy_protocols.METHODS})
del (install_methods, array_api, checking, compiler, conversion, display, interop, numpy_protocols, profiler, serialization,
     tracing)

# PyTorch's dtype spellings; defined last, since three of them shadow builtins in this module
half = float16
float = float32
double = float64
short = int16
long = int64
int = int32
bool = bool_
cfloat = complex64
cdouble = complex128

__version__ = "0.1.0"

__all__ = [
    # tensors, dtypes, errors
    "Tensor", "DType", "bool_", "float16", "float32", "float64", "int32", "int64", "half", "double", "long",
    "int8", "int16", "uint8", "uint16", "uint32", "uint64", "complex64", "complex128", "short", "cfloat", "cdouble",
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
    "repeat_interleave", "diag", "diag_embed", "diff", "rot90", "fliplr", "flipud", "meshgrid", "cartesian_prod",
    "tril_indices", "triu_indices",
    "rearrange", "reduce", "repeat",
    # complex numbers (and complex)
    "real", "imag", "conj", "resolve_conj", "angle", "polar", "view_as_real", "view_as_complex", "is_complex",
    # indexing
    "isel", "select", "narrow", "index_select", "gather", "masked_fill", "masked_select", "diagonal", "where",
    "scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_put", "masked_scatter",
    "take",
    # elementwise math (and abs, round, pow)
    "neg", "positive", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "gelu",
    "silu", "softplus", "erf", "sign", "floor", "ceil", "clip", "clamp", "reciprocal", "square",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "nextafter", "unique", "unique_consecutive", "nonzero", "argwhere", "searchsorted",
    "acos", "asin", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log2", "log10", "exp2", "trunc", "frac",
    "erfc", "erfinv", "lgamma", "digamma", "polygamma", "threshold", "nan_to_num", "clamp_min", "clamp_max",
    "atan2", "hypot", "logaddexp", "copysign", "fmod", "lerp", "addcmul", "addcdiv",
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    # reductions (and sum, max, min, any, all), sorting
    "mean", "prod", "amax", "amin", "argmax", "argmin", "std", "var", "logsumexp", "norm", "cumsum", "cumprod",
    "softmax", "log_softmax", "sort", "argsort", "topk", "ValuesIndices",
    # quantization (nt.quantization has the workflows)
    "QuantizedTensor", "qint8", "quint8", "quantize_per_tensor", "quantize_per_channel",
    "fake_quantize_per_tensor_affine", "fake_quantize_per_channel_affine",
    "median", "nanmedian", "mode", "kthvalue", "std_mean", "var_mean", "cummax", "cummin", "logcumsumexp", "cdist",
    "equal",
    # statistics and counting
    "quantile", "nanquantile", "nansum", "nanmean", "count_nonzero", "bincount", "histc", "histogram", "bucketize",
    "trapezoid", "dist", "cosine_similarity",
    # more math, comparisons and helpers
    "xlogy", "sinc", "i0", "heaviside", "igamma", "igammac", "addmv", "addbmm", "chain_matmul", "isclose", "allclose",
    "is_tensor",
    "is_floating_point", "numel", "clone", "from_numpy", "frombuffer", "get_default_dtype", "set_default_dtype", "inference_mode",
    # contractions
    "matmul", "dot", "einsum", "outer", "mm", "bmm", "mv", "addmm", "baddbmm",
    # linear algebra (nt.linalg below)
    "tensordot", "det", "logdet", "slogdet", "inverse", "pinverse", "matrix_power", "trace", "cholesky", "cross",
    "svd", "qr",
    # autograd
    "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
    # threads, memory, checkpoints
    "set_num_threads", "get_num_threads", "retain_freed_memory", "save", "load",
    # conversion, checked signatures, shape dry runs
    "lift", "to_xarray", "from_xarray", "to_pandas", "from_dlpack", "Named", "NamesSpec", "check_names",
    "spec", "trace_shapes", "show", "ShapeTrace", "gradual", "conversion_report", "ConversionReport",
    # profiling, compilation
    "profile", "Profile", "CompiledFunction",
    "set_printoptions", "get_printoptions",
    # subpackages
    "nn", "optim", "data", "cuda", "testing", "fft", "special", "linalg", "onnx", "quantization",
]
