"""The ops, one module per family; importing this package attaches their methods to ``Tensor``.

In a family module each op is an :class:`~namedtensor.autograd.graph.Op` (forward on raw arrays,
backward with tensor ops) right above its public function, which gets the output names from one
rule of :mod:`namedtensor._names` and runs the op with ``apply``; the module ends with its
``METHODS`` table, the functions that become ``Tensor`` methods.  docs/design.md has the name rule
of each family and the checklist "Adding an op".

=================  ===========================================================
module             ops
=================  ===========================================================
``creation``       ``tensor``, ``as_tensor``, factories, ``*_like``, random
``elementwise``    unary math, binary operators, comparisons, ``where``, ``clip``
``special_math``   PyTorch's ``xlogy sinc i0 heaviside`` (elementwise, made as those are)
``helpers``        ``isclose allclose is_tensor is_floating_point numel clone from_numpy``
                   ``get_default_dtype set_default_dtype``, ``t.where(condition, y)``
``reductions``     ``sum mean prod max min amax amin argmax argmin std var std_mean``
                   ``var_mean logsumexp norm any all cumsum cumprod softmax log_softmax``
                   ``cdist equal``
``scans``          ``cummax cummin logcumsumexp``
``statistics``     PyTorch's ``quantile nanquantile nansum nanmean count_nonzero bincount``
                   ``histc histogram bucketize trapezoid dist cosine_similarity``
``naming``         ``rename rename_ refine_names align_to align_as align permute transpose``
                   ``swapaxes``, NumPy's ``astype copy ravel``
``shape``          ``reshape flatten unflatten squeeze unsqueeze expand broadcast_to``
``joining``        ``cat stack split chunk unbind pad``
``movement``       ``flip roll repeat tile tril triu``
``shaping``        PyTorch's ``repeat_interleave unfold view_as reshape_as diag diag_embed``
                   ``diff rot90 fliplr flipud meshgrid cartesian_prod tril_indices triu_indices``
``rearrange``      ``rearrange reduce repeat`` (einops' patterns by name; functions only)
``indexing``       ``t[...]``, ``isel select narrow index_select gather masked_fill``
                   ``masked_select diagonal``
``scatter``        ``scatter scatter_add scatter_reduce index_add index_copy index_fill``
                   ``index_put masked_scatter take`` and their in-place forms
``linalg``         ``matmul dot einsum outer``, PyTorch's ``mm bmm mv addmm baddbmm addmv addbmm``
                   ``chain_matmul``
``matrix``         ``nt.linalg``'s matrix functions (``inv det solve cholesky eigh qr svd pinv``
                   ``matrix_norm``...) and ``tensordot``, ``logdet``... (functions only)
``sorting``        ``sort argsort topk median nanmedian mode kthvalue``
``complex``        ``real imag conj resolve_conj angle complex polar view_as_real``
                   ``view_as_complex is_complex``, ``.real .imag .H .mH``
``dtype``          ``to float double half long int bool short char byte cfloat cdouble``
                   ``clone``, the standard's ``to_device``
``inplace``        ``add_ sub_ mul_ div_ masked_fill_ zero_ fill_ copy_``, ``t[...] = v``
``dense``          ``linear embedding dropout`` (fused; functions only)
``conv``           ``conv conv1d conv2d conv3d`` (fused; functions only)
``pooling``        ``max_pool* avg_pool* adaptive_avg_pool*`` (1d/2d/3d; functions only)
``normalization``  ``layer_norm rms_norm`` (fused; functions only)
``batchnorm``      ``batch_norm group_norm`` (per channel; functions only)
``losses``         ``cross_entropy nll_loss mse_loss`` (fused; functions only)
``attention``      ``scaled_dot_product_attention causal_mask`` (functions only)
``spectral``       the FFTs of ``nt.fft`` (functions only)
``sets``           ``unique unique_consecutive nonzero argwhere searchsorted``
``bitwise``        ``bitwise_and bitwise_or bitwise_xor bitwise_not bitwise_left_shift``
                   ``bitwise_right_shift nextafter``, the operators ``& | ^ ~ << >>``
``quantize``       ``quantize_per_tensor quantize_per_channel QuantizedTensor`` and fake
                   quantization (functions only; ``nt.quantization`` builds on them)
=================  ===========================================================

The fused families have no methods; :mod:`namedtensor.nn.functional` re-exports them.  ``rearrange``'s
ops are top-level functions only (``nt.rearrange``; ``t.repeat`` is PyTorch's).  Private
helpers: ``_common`` (operands and broadcast gradients), ``_fused`` (what the fused ops share),
``_elision`` (reusing a temporary operand's buffer in large elementwise ops).
"""

from __future__ import annotations

from ..tensor import install_methods
from . import (bitwise, complex, creation, dtype, elementwise, helpers, indexing, inplace, joining, linalg, movement,
               naming, reductions, scans, scatter, sets, shape, shaping, sorting, special_math, statistics)

install_methods({name: fn
                 for family in (creation, elementwise, reductions, scans, naming, shape, joining, movement, indexing,
                                linalg, sorting, dtype, inplace, complex, shaping, scatter, statistics, special_math,
                                helpers, bitwise, sets)
                 for name, fn in family.METHODS.items()})
