"""Temporary elision for large elementwise ops: write ``a * b + c`` into the buffer of ``a * b``.

NumPy reuses the buffer of a temporary operand (an array nobody else can see)
instead of allocating a new result; for large arrays a fresh allocation costs
more than the arithmetic (page faults on new memory).  Tensors hide their
arrays from NumPy's check, so this module does the same check one level up:
a tensor that only the interpreter's stack references, whose array only that
tensor references and owns its memory, can take the result in place.
:func:`reusing_buffers` wraps a binary op's function with that check.

Reference counts differ between Python versions (newer ones may borrow stack
references), so the counts that mean "temporary" are measured at import on
this interpreter; if a named variable cannot be told apart from a temporary,
elision stays off and every op allocates as usual.
"""

from __future__ import annotations

import dis
import functools
import operator as _operator
import sys
import time
from typing import Callable, Tuple

from .._names import unify
from ..autograd import mode
from ..autograd.graph import record
from ..tensor import Tensor
from ._common import SCALARS

#: below this many elements a new buffer is cheap and the checks are not worth it
MIN_SIZE = 1 << 16

_getrefcount = getattr(sys, "getrefcount", None)
_clock = time.perf_counter_ns
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
        refs = _getrefcount(a)  # the same statement shape as the first line of reusing_buffers' functions
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


def target(a: Tensor, b, refs_a: int, refs_b: int, limit: int, saves_inputs: bool, grad_enabled: bool):
    """The array to write ``op(a, b)`` into, or None.

    ``refs_*`` are the operands' refcounts seen on entering the op, and ``limit`` the count at or
    below which an operand is a temporary there.  While a graph is recorded (``grad_enabled``), only
    ops whose backward needs no input (add, sub) may overwrite one.
    """
    if saves_inputs and grad_enabled and (a._rg or (isinstance(b, Tensor) and b._rg)):
        return None
    B = a._B
    if not B.supports_out:
        return None
    # no local may hold an operand's array while _private_array counts its references
    if isinstance(b, Tensor):
        if b._B is not B or a._data.dtype != b._data.dtype:
            return None
        if refs_a <= limit and _broadcasts_into(b._data.shape, a._data.shape) and _private_array(a):
            return a._data
        if refs_b <= limit and _broadcasts_into(a._data.shape, b._data.shape) and _private_array(b):
            return b._data
        return None
    # a Python scalar keeps a complex tensor's dtype, a float tensor's unless complex, and an int tensor's with
    # an int (NumPy 2 rules)
    if (b.__class__ in SCALARS and refs_a <= limit and _keeps_dtype(B.dtype_of(a._data).kind, b)
            and _private_array(a)):
        return a._data
    return None


def _keeps_dtype(kind: str, scalar) -> bool:
    """Whether a tensor of ``kind`` combined with the Python ``scalar`` keeps its dtype (NumPy 2's weak scalars)."""
    cls = scalar.__class__
    return kind == "c" or (kind == "f" and cls is not complex) or (kind in "iu" and cls is int)


def _into_temporary(op, out_fn: str, a, b, refs_a: int, refs_b: int, limit: int):
    """``op(a, b)`` written into a temporary operand's buffer, or None where none can take it."""
    if not isinstance(a, Tensor):
        return None  # a scalar first operand: the tensor on the right is seen through the reflected operator
    grad_enabled, tracer = mode.state.current
    if tracer is not None:
        start = _clock()  # the op's time for a profile, as apply takes it
    out = target(a, b, refs_a, refs_b, limit, bool(op.saves), grad_enabled)
    if out is None:
        return None
    B = a._B
    if isinstance(b, Tensor):
        an, bn = a._names, b._names
        names = an if an is bn else unify(an, bn, op.name)  # the binary ops' rule; before anything is written
        y = Tensor._make(getattr(B, out_fn)(a._data, b._data, out=out), names, B)
        needs_grad = a._rg or b._rg
    else:
        y = Tensor._make(getattr(B, out_fn)(a._data, b, out=out), a._names, B)
        needs_grad = a._rg
    if needs_grad and grad_enabled and op.differentiable:
        record(op, (a, b), (y,), {}, None, B)
    if tracer is not None:
        mode.state.span = (start, _clock())
        tracer(op, (a, b), (y,), {})
    return y


def reusing_buffers(fn: Callable, op: type, out_fn: str) -> Tuple[Callable, Callable]:
    """Binary op ``op``'s function ``fn``, made to write a large result into a temporary operand's
    buffer (with backend function ``out_fn``, which takes ``out=``): ``(call, operator)``, its entry
    points for ``nt.add(x, y)`` / ``x.add(y)`` and for ``x + y``.

    Two, because a temporary's refcount differs between them; each takes the counts first thing,
    where :func:`_calibrate` measured them.  Small operands go straight to ``fn``.
    """
    if not enabled:
        return fn, fn

    def call(a, b) -> Tensor:
        refs_a = _getrefcount(a)  # before anything else holds a or b
        refs_b = _getrefcount(b)
        if a.__class__ is Tensor and a._data.size >= MIN_SIZE or b.__class__ is Tensor and b._data.size >= MIN_SIZE:
            y = _into_temporary(op, out_fn, a, b, refs_a, refs_b, CALL_REFS)
            if y is not None:
                return y
        return fn(a, b)

    def operator(a, b) -> Tensor:
        refs_a = _getrefcount(a)
        refs_b = _getrefcount(b)
        if (a.__class__ is Tensor and a._data.size >= MIN_SIZE
                or b.__class__ is Tensor and b._data.size >= MIN_SIZE) and from_binary_op(1):
            y = _into_temporary(op, out_fn, a, b, refs_a, refs_b, OPERATOR_REFS)
            if y is not None:
                return y
        return fn(a, b)

    return functools.update_wrapper(call, fn), functools.update_wrapper(operator, fn)
