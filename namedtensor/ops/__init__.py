"""The ops, one module per family; each op is its name rule, forward and backward in one place.

=================  ===========================================================
module             ops
=================  ===========================================================
``creation``       ``tensor``, ``as_tensor``, factories, ``*_like``, random
``elementwise``    unary math, binary operators, comparisons, ``where``, ``clip``
``reductions``     ``sum mean prod max min amax amin argmax argmin std var``
                   ``logsumexp norm any all cumsum cumprod softmax log_softmax``
``naming``         ``rename refine_names align_to align_as align permute transpose``
``shape``          ``reshape flatten unflatten squeeze unsqueeze expand broadcast_to``
``joining``        ``cat stack split chunk unbind pad``
``movement``       ``flip roll repeat tile tril triu``
``indexing``       ``t[...]``, ``isel select narrow index_select gather masked_fill``
``linalg``         ``matmul dot einsum outer``
``sorting``        ``sort argsort topk``
``dtype``          ``to float double half long int bool clone``
``inplace``        ``add_ sub_ mul_ div_ masked_fill_ zero_ fill_ copy_``, ``t[...] = v``
=================  ===========================================================
"""

from __future__ import annotations

import importlib

from ..tensor import install_methods

FAMILIES = ("creation", "elementwise", "reductions", "naming", "shape", "joining", "movement", "indexing",
            "linalg", "sorting", "dtype", "inplace")

_installed = []
for _family in FAMILIES:
    try:
        _module = importlib.import_module(f".{_family}", __name__)
    except ModuleNotFoundError as _e:
        if _e.name != f"{__name__}.{_family}":
            raise
        continue
    install_methods(getattr(_module, "METHODS", {}))
    _installed.append(_family)
