"""Reverse-mode autograd: the graph (:mod:`.graph`), the backward pass (:mod:`.engine`) and gradcheck."""

from .graph import Node, Op, apply, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .engine import grad, queue_callback, run_backward, zero_grads

__all__ = ["Node", "Op", "apply", "enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled", "grad",
           "queue_callback", "run_backward", "zero_grads"]
