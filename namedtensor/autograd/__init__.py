"""Reverse-mode autograd: grad mode (:mod:`.mode`), the graph (:mod:`.graph`) and the backward pass
(:mod:`.engine`), whose ``Tensor`` methods (``backward``...) are installed here.

The package sits at the engine's layer (above the ops); ``tensor`` and the ops import only the
modules below it: :mod:`.mode` and :mod:`.graph`.
"""

from ..tensor import install_methods
from .engine import METHODS, grad, queue_callback, run_backward, zero_grads
from .graph import Node, Op, apply
from .mode import enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled

install_methods(METHODS)

__all__ = ["Node", "Op", "apply", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "grad",
           "queue_callback", "run_backward", "zero_grads", "inference_mode"]
