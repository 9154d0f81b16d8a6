"""Optimizers, gradient clipping and learning-rate schedulers for named tensors (PyTorch's ``torch.optim``).

    opt = nt.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    sched = nt.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=1000)
    loss.backward(); nt.optim.clip_grad_norm_(model.parameters(), 1.0); opt.step(); sched.step(); opt.zero_grad()

Updates happen in place on each parameter's own buffer and backend; state tensors carry the
parameter's names, so optimizer checkpoints keep them.
"""

from . import lr_scheduler
from .adam import Adam, AdamW
from .clip import clip_grad_norm_, clip_grad_value_
from .lr_scheduler import (CosineAnnealingLR, ExponentialLR, LambdaLR, LinearLR, LRScheduler, MultiStepLR,
                           SequentialLR, StepLR)
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "AdamW", "CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR",
           "MultiStepLR", "Optimizer", "SequentialLR", "StepLR", "clip_grad_norm_", "clip_grad_value_", "lr_scheduler"]
