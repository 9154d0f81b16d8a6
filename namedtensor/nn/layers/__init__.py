"""The layers: each reads and writes named dims, documented in its docstring.

Each also takes PyTorch's signature (``Linear(4, 8)``, ``LayerNorm(16)``, ``MultiheadAttention(8, 2)``...),
told from the named one by the arguments' types (``_forms``), and then acts on the last dims, by
position, whatever their names, with PyTorch's parameters and results.

=================  ==========================================================
module             layers
=================  ==========================================================
``linear``         ``Linear``, ``Identity``
``conv``           ``Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d``
``pooling``        ``MaxPool1d/2d/3d AvgPool1d/2d/3d AdaptiveAvgPool1d/2d/3d``
``embedding``      ``Embedding``
``normalization``  ``LayerNorm``, ``RMSNorm``
``batchnorm``      ``BatchNorm1d BatchNorm2d BatchNorm3d GroupNorm``
``dropout``        ``Dropout``
``distance``       ``CosineSimilarity``
``activation``     ``ReLU GELU SiLU Tanh Sigmoid Softmax LogSoftmax``
``attention``      ``MultiheadAttention``
``transformer``    ``MLP``, ``TransformerBlock``
=================  ==========================================================
"""

from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .distance import CosineSimilarity
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .normalization import LayerNorm, RMSNorm
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AvgPool1d, AvgPool2d, AvgPool3d,
                      MaxPool1d, MaxPool2d, MaxPool3d)
from .transformer import MLP, TransformerBlock

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "GroupNorm", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d", "MaxPool1d", "MaxPool2d", "MaxPool3d", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "GELU", "MLP", "Dropout", "Embedding", "Identity", "LayerNorm", "Linear", "LogSoftmax", "MultiheadAttention",
           "RMSNorm", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh", "TransformerBlock", "CosineSimilarity"]
