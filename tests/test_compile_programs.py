"""``nt.compile`` on random programs against eager execution: values, names, dtypes and gradients.

Hypothesis draws a program: one to three inputs named by suffixes of ``("a", "b", "c")`` (some dims of
size 1, broadcast), then a chain of elementwise ops (unary functions, binary ops on any two earlier
values, operations with Python numbers), some of whose intermediate values are returned beside the
last one, and the chain may end in a reduction or a softmax along one of its dims.  These are the
graphs the compiler fuses into generated kernels (with Numba: one forward and one backward kernel per
chain, reductions at the ends included), so the draw reaches the codegen's broadcasting, its outputs,
its reductions and the backward formulas of every op in the table.  The compiled function must give
the eager results (float64 to 1e-12, float32 to float32's rounding), raise no warning (nothing falls
back), and the gradients of a fixed weighting of the outputs must be the eager ones.

CI runs a bounded, derandomized number of programs; a long run by hand:

    NT_PROGRAM_EXAMPLES=2000 python -m pytest tests/test_compile_programs.py -p no:cacheprovider
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import namedtensor as nt
from namedtensor.testing import assert_close

EXAMPLES = int(os.environ.get("NT_PROGRAM_EXAMPLES", "40"))
DIMS, SIZES = ("a", "b", "c"), (3, 4, 5)

#: one value in, one out; inputs kept where each op is smooth and finite
UNARY = {
    "exp": lambda x: (x * 0.5).exp(),
    "tanh": lambda x: x.tanh(),
    "sigmoid": lambda x: x.sigmoid(),
    "relu": lambda x: x.relu(),
    "gelu": lambda x: x.gelu(),
    "neg": lambda x: -x,
    "abs": lambda x: x.abs(),
    "square": lambda x: x * x,
    "sqrt": lambda x: (x * x + 1.0).sqrt(),
    "log": lambda x: (x.abs() + 1.0).log(),
    "pow": lambda x: (x * x + 0.5) ** 1.5,
    "reciprocal": lambda x: 1.0 / (x * x + 1.0),
    "scale": lambda x: x * 0.75 - 0.25,
    "cube": lambda x: x ** 3,
    "fourth": lambda x: (x * 0.5) ** 4,
    "inverse_square": lambda x: (x * x + 1.0) ** -2,
    "clamp": lambda x: x.clamp(-0.5, 0.8),
    "erf": lambda x: x.erf(),
    "expm1": lambda x: (x * 0.5).expm1(),
    "log1p": lambda x: (x * x).log1p(),
    "sin": lambda x: x.sin(),
    "cos": lambda x: x.cos(),
    "silu": lambda x: nt.nn.functional.silu(x),
    "softplus": lambda x: nt.softplus(x),
}
#: two values in, broadcasting by position, names checked
BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / (y * y + 1.0),
    "maximum": lambda x, y: nt.maximum(x, y),
    "minimum": lambda x, y: nt.minimum(x, y),
    "where": lambda x, y: nt.where(x > y, x, y * 0.5),
    "mask": lambda x, y: nt.where((x > 0) & (y < 0.5) | ~nt.logical_or(x > y, y > 1.0), x, y),
    "logaddexp": lambda x, y: nt.logaddexp(x, y),
    "copysign": lambda x, y: nt.copysign(x, y),
}
#: what may end the chain, along one of the last value's dims
ENDS = {
    "sum": lambda x, d: x.sum(d),
    "mean": lambda x, d: x.mean(d),
    "softmax": lambda x, d: x.softmax(d),
    "log_softmax": lambda x, d: x.log_softmax(d),
    "logsumexp": lambda x, d: x.logsumexp(d),
    "amax": lambda x, d: x.amax(d),
}


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(["float64", "float32"]))
    inputs = []
    for _ in range(draw(st.integers(1, 3))):
        rank = draw(st.integers(1, 3))
        names = DIMS[3 - rank:]
        sizes = tuple(1 if draw(st.booleans()) and draw(st.booleans()) else SIZES[DIMS.index(n)] for n in names)
        inputs.append((names, sizes))
    steps = []
    n_values = len(inputs)
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            steps.append(("unary", draw(st.sampled_from(sorted(UNARY))), draw(st.integers(0, n_values - 1))))
        else:
            steps.append(("binary", draw(st.sampled_from(sorted(BINARY))), draw(st.integers(0, n_values - 1)),
                          draw(st.integers(0, n_values - 1))))
        n_values += 1
    returned = sorted(set(draw(st.lists(st.integers(len(inputs), n_values - 2), max_size=2)))) if n_values - 2 >= len(inputs) else []
    end = draw(st.sampled_from([None] + sorted(ENDS)))
    return dict(dtype=dtype, inputs=inputs, steps=steps, returned=returned, end=end,
                end_dim=draw(st.integers(0, 2)), seed=draw(st.integers(0, 2**16)))


def run(program, *xs):
    """The program's outputs: the returned intermediates, then the last value (ended)."""
    values = list(xs)
    for step in program["steps"]:
        if step[0] == "unary":
            values.append(UNARY[step[1]](values[step[2]]))
        else:
            values.append(BINARY[step[1]](values[step[2]], values[step[3]]))
    last = values[-1]
    if program["end"] is not None:
        last = ENDS[program["end"]](last, last.names[program["end_dim"] % last.ndim])
    return tuple(values[i] for i in program["returned"]) + (last,)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(programs())
def test_a_random_program_compiles_to_the_eager_values_and_gradients(program):
    rng = np.random.default_rng(program["seed"])
    dtype = program["dtype"]
    xs = [nt.tensor(rng.standard_normal(sizes).astype(dtype), names=names).requires_grad_()
          for names, sizes in program["inputs"]]
    want = run(program, *xs)
    compiled = nt.compile(lambda *a: run(program, *a))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing falls back to eager
        for _ in range(2):  # the call that traces, then the program's replay
            got = compiled(*xs)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == "float64" else {"rtol": 2e-5, "atol": 2e-6}
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.names == w.names and g.dtype == w.dtype and g.requires_grad == w.requires_grad
        assert_close(g, w, **tol)
    weights = [nt.tensor(rng.standard_normal(w.shape).astype(dtype), names=w.names) for w in want]

    def weighted(outs):
        return sum((o * c).sum() for o, c in zip(outs, weights))

    grads_want = nt.grad(weighted(want), xs, allow_unused=True)
    grads_got = nt.grad(weighted(got), xs, allow_unused=True)
    for g, w in zip(grads_got, grads_want):
        assert (g is None) == (w is None)
        if w is not None:
            assert g.names == w.names
            assert_close(g, w, **tol)
