"""``nt.compile``: named programs traced once, optimised, with elementwise chains fused into generated kernels.

Where things live: ``ir.py`` (the graph of named values), ``capture.py`` (tracing on the meta device,
signatures), ``passes.py`` (constant folding, common subexpressions, dead code, fusion), ``formulas.py``
(the scalar formulas, forward and backward), ``numba_codegen.py`` and ``cuda_codegen.py`` (the CPU and GPU
kernels made of them), ``program.py`` (a graph as straight-line Python), ``guards.py`` (what the function
reads from outside, and the guards that read it again at each call), ``api.py`` (``nt.compile`` and its cache).  The fused op itself is ``namedtensor/ops/fusion.py``.
docs/design.md, "Compilation", states the rules.
"""

from .api import CompiledFunction, compile

__all__ = ["compile", "CompiledFunction"]
