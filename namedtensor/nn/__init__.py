"""``namedtensor.nn``: modules whose parameters carry names, and layers that say which dims they
read and write.

    import namedtensor as nt
    from namedtensor import nn

    mlp = nn.Sequential(nn.Linear("embed", "hidden", 8, 32), nn.GELU(), nn.Linear("hidden", "embed", 32, 8))
    x = nt.randn(2, 5, 8, names=("batch", "seq", "embed"))
    mlp(x).names                      # ('batch', 'seq', 'embed')
    mlp.state_dict()["0.weight"].names  # ('hidden', 'embed')

``Module`` (registration, traversal, ``state_dict``) is in :mod:`.module`, the
containers in :mod:`.containers`, initialisers in :mod:`.init`, the layers in
:mod:`.layers`, and the functions they call in :mod:`.functional`.
"""

from . import functional as functional
from . import init as init
from .containers import ModuleDict, ModuleList, Sequential
from .layers import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d, MaxPool3d,
                     Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d, GELU, MLP, Dropout, Embedding, Identity, LayerNorm, Linear, LogSoftmax, MultiheadAttention, ReLU,
                     RMSNorm, Sigmoid, SiLU, Softmax, Tanh, TransformerBlock)
from .layers import CosineSimilarity
from .module import IncompatibleKeys, Module, StateDictError
from .parameter import Parameter

__all__ = [
    "functional", "init",
    "Module", "Parameter", "StateDictError", "IncompatibleKeys",
    "Sequential", "ModuleList", "ModuleDict",
    "Linear", "Identity", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
    "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm",
    "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "Embedding", "LayerNorm", "RMSNorm", "Dropout",
    "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "LogSoftmax",
    "MultiheadAttention", "MLP", "TransformerBlock", "CosineSimilarity",
]
