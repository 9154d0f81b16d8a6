"""The layers: each reads and writes named dims, documented in its docstring.

Each also takes PyTorch's signature (``Linear(4, 8)``, ``LayerNorm(16)``, ``MultiheadAttention(8, 2)``...),
told from the named one by the arguments' types (``_forms``), and then acts on the last dims, by
position, whatever their names, with PyTorch's parameters and results.

=================  ==========================================================
module             layers
=================  ==========================================================
``linear``         ``Linear``, ``Identity``
``embedding``      ``Embedding``
``normalization``  ``LayerNorm``, ``RMSNorm``
``dropout``        ``Dropout``
``activation``     ``ReLU GELU SiLU Tanh Sigmoid Softmax LogSoftmax``
``attention``      ``MultiheadAttention``
``transformer``    ``MLP``, ``TransformerBlock``
=================  ==========================================================
"""

from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Tanh
from .attention import MultiheadAttention
from .dropout import Dropout
from .embedding import Embedding
from .linear import Identity, Linear
from .normalization import LayerNorm, RMSNorm
from .transformer import MLP, TransformerBlock

__all__ = ["GELU", "MLP", "Dropout", "Embedding", "Identity", "LayerNorm", "Linear", "LogSoftmax", "MultiheadAttention",
           "RMSNorm", "ReLU", "SiLU", "Sigmoid", "Softmax", "Tanh", "TransformerBlock"]
