"""Temporary elision for large elementwise ops: write ``a * b + c`` into the buffer of ``a * b``.

NumPy reuses the buffer of a temporary operand (an array nobody else can see)
instead of allocating a new result; for large arrays a fresh allocation costs
more than the arithmetic (page faults on new memory).  Tensors hide their
arrays from NumPy's check, so this module does the same check one level up:
a tensor that only the interpreter's stack references, whose array only that
tensor references and owns its memory, can take the result in place.

Reference counts differ between Python versions (newer ones may borrow stack
references), so the counts that mean "temporary" are measured at import on
this interpreter; if a named variable cannot be told apart from a temporary,
elision stays off and every op allocates as usual.
"""

from __future__ import annotations

import dis
import operator as _operator
import sys

from ..autograd import graph

#: below this many elements a new buffer is cheap and the checks are not worth it
MIN_SIZE = 1 << 16

_getrefcount = getattr(sys, "getrefcount", None)


#: what the op functions count references with: ``sys.getrefcount`` itself (a wrapper would add a
#: reference of its own), or, where the interpreter has none, a stand-in (elision is off there)
refcount = _getrefcount if _getrefcount is not None else (lambda x: 1 << 30)
_getframe = getattr(sys, "_getframe", None)
_BINARY_OPCODES = frozenset(code for name, code in dis.opmap.items() if name.startswith(("BINARY_", "INPLACE_")))


def from_binary_op(depth: int) -> bool:
    """Whether the Python frame ``depth`` levels up is executing a binary-operator instruction.

    Then the operands came straight from its evaluation stack.  When C code calls the operator
    (``operator.add``, ``sum``), that frame is at a call instead, and the C code may hold
    borrowed references that the refcount cannot see, so nothing is elided.
    """
    try:
        frame = _getframe(depth + 1)
        return frame.f_code.co_code[frame.f_lasti] in _BINARY_OPCODES
    except (AttributeError, IndexError, ValueError, TypeError):
        return False


def _calibrate():
    """Max refcounts of a temporary operand seen inside an op's function when it is entered as an
    operator (``x + y``) and as a call (``nt.add(x, y)``, ``x.add(y)``): ``(operator, call)``, or None
    when some named variable shows a count that low (then elision is unsafe here)."""
    if _getrefcount is None:
        return None
    gil = getattr(sys, "_is_gil_enabled", None)
    if gil is not None and not gil():
        return None  # free-threaded Python: counts may be deferred, and another thread may hold a reference

    def probe(a, b):
        refs = _getrefcount(a)  # the same statement shape as the op functions' first line
        return refs

    def frame_probe(a, b):
        return from_binary_op(1)

    class _Probe:
        __slots__ = ("_data",)
        add = probe

    _Probe.__add__ = probe  # installed after the class, as Tensor's operators are

    def operator_temporary():
        return max(_Probe() + 1, _Probe() + _Probe())

    def call_temporary():
        return probe(_Probe(), 1)

    def named_operator():
        x = _Probe()
        return min(x + 1, x + _Probe())

    def named_call():
        x = _Probe()
        return probe(x, 1)

    def named_method():
        x = _Probe()
        return x.add(1)

    def held_operator():
        box = [_Probe()]
        return box[0] + 1

    def held_call():
        box = [_Probe()]
        return probe(box[0], 1)

    class _FrameProbe:
        __slots__ = ()

    _FrameProbe.__add__ = frame_probe
    if _getframe is None or not (_FrameProbe() + 1) or _operator.add(_FrameProbe(), 1):
        return None
    via_operator = operator_temporary()
    via_call = max(call_temporary(), _Probe().add(1))
    if min(named_operator(), held_operator()) <= via_operator:
        return None
    if min(named_call(), named_method(), held_call()) <= via_call:
        return None
    return via_operator, via_call


_limits = _calibrate()
enabled = _limits is not None
#: a refcount at or below this, seen in an op function entered as an operator / as a call, is a temporary
OPERATOR_REFS, CALL_REFS = _limits if enabled else (-1, -1)


def _private_array(t) -> bool:
    """The tensor's array is referenced by the tensor alone and owns its memory."""
    # refs: the tensor's slot and getrefcount's argument
    return _getrefcount(t._data) <= 2 and t._B.owns_writable(t._data)


def _broadcasts_into(small, big) -> bool:
    if len(small) > len(big):
        return False
    for s, b in zip(reversed(small), reversed(big)):
        if s != b and s != 1:
            return False
    return True


def target(a, b, refs_a: int, refs_b: int, via_operator: bool, saves_inputs: bool):
    """The array to write ``op(a, b)`` into, or None.

    ``refs_*`` are the operands' refcounts seen by the op function, entered as an operator
    (``x + y``) or as a call (``nt.add(x, y)``).  Called from the op
    function's helper, so the user's frame is three levels up.  While a graph is recorded, only
    ops whose backward needs no input (add, sub) may overwrite one.
    """
    if saves_inputs and graph._grad_enabled and (a._rg or (b.__class__ is a.__class__ and b._rg)):
        return None
    B = a._B
    if not B.supports_out:
        return None
    if via_operator:
        if not from_binary_op(3):
            return None
        limit = OPERATOR_REFS
    else:
        limit = CALL_REFS
    # no local may hold an operand's array while _private_array counts its references
    if b.__class__ is a.__class__:
        if b._B is not B or a._data.dtype != b._data.dtype:
            return None
        if refs_a <= limit and _broadcasts_into(b._data.shape, a._data.shape) and _private_array(a):
            return a._data
        if refs_b <= limit and _broadcasts_into(a._data.shape, b._data.shape) and _private_array(b):
            return b._data
        return None
    # a Python scalar keeps a float tensor's dtype, and an int tensor's with an int (NumPy 2 rules)
    if refs_a <= limit and (B.dtype_of(a._data).kind == "f" or b.__class__ is int) and _private_array(a):
        return a._data
    return None
