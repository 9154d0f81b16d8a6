"""``nt.onnx``: programs exported to ONNX with their dim names (the ``export`` extra: ``pip install onnx``).

:func:`export` traces a function or module as ``nt.compile`` does (compiler/capture.py) and writes the
graph as an ONNX model: parameters and constants become initializers, each op one or a few ONNX nodes
(converters.py holds the table, one function per op, writing through context.py's
:class:`~namedtensor.onnx.context.Context`), and the inputs and outputs keep their dim names.
A named dim of an input that no parameter has (``batch``, ``seq``; not ``embed``, which the weights fix)
is dynamic: the model's inputs and outputs carry it as a symbolic dim of that name, and every size
computed from it (a reshape's target, a causal mask, the positions of a position embedding) is computed
from the input's shape when the model runs, so that one export serves every batch and sequence size.

How the sizes are known: the function is traced twice, the second time with other sizes for the
dynamic dims (primes that no other size shares), and every size in the two graphs is matched to a
product of dynamic dims times a constant.  A graph whose ops or parameters change with those sizes in
a way no converter expresses is refused with an error naming the op.
"""

from .context import UnsupportedExport
from .export import export

__all__ = ["export", "UnsupportedExport"]
