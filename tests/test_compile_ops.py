"""``nt.compile`` gives the eager results and gradients for every op family of the library.

Each entry of ``CASES`` is a function (or an ``nn.Module``) and a maker of its inputs.  The compiled
function is called twice (the first call traces and builds the program, the second replays the cached
one) and each output must equal the eager output: values, names, dtype and whether it requires grad.
Every case must really compile: no signature falls back to eager (``None`` in ``cache``) and no
warning is raised.  What cannot be traced is listed in ``FALLS_BACK`` instead: it must warn, naming
the op or step and why, and still return the eager result.

Gradients, in float64: for every case with floating inputs, the gradient of a fixed random weighting
of the outputs, with respect to the inputs (and a module's parameters), must be the eager one, and
``gradcheck`` through the compiled function (central differences) must pass, except for the few
cases of ``NOT_GRADCHECKED``.

Last, the state a graph reads: parameters updated in place are seen by the next call, modules whose
parameters were written before compiling still compile, and writes to outside tensors inside the
function (a counter, BatchNorm's running statistics) happen exactly as often as eagerly.

Without Numba the CPU fuses nothing and these cases check the graphs' other passes; with it (the
``jit`` extra) they check the generated kernels too.
"""

import copy
import warnings

import numpy as np
import pytest

import namedtensor as nt
from namedtensor import nn
from namedtensor.compiler import numba_codegen
from namedtensor.nn import functional as F
from namedtensor.testing import assert_close, gradcheck
from helpers import ints, rnd

X = ("batch", "seq", "embed")
TIGHT = {"rtol": 1e-5, "atol": 1e-6}
SUMS = {"rtol": 1e-4, "atol": 1e-5}  # ops that sum many float32 terms


@pytest.fixture(scope="module", autouse=True)
def numba_notice_said():
    # Without Numba, the first compiled graph says once that fused kernels need it: that notice is
    # about the environment, not a fallback, and must not count as one of the warnings checked below.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        numba_codegen.numba_available()


@pytest.fixture(autouse=True)
def seeded():
    nt.manual_seed(0)


def x3(d, seed=0):
    return rnd(2, 5, 8, names=X, seed=seed, dtype=d)


def square(d, seed=0, n=4):
    """A batch of well-conditioned square matrices."""
    a = np.random.default_rng(seed).normal(size=(3, n, n)) + n * np.eye(n)
    return nt.tensor(a.astype(d), names=("batch", "row", "col"))


def spd(d, seed=0, n=4):
    """A batch of symmetric positive definite matrices with well-separated eigenvalues."""
    q = np.linalg.qr(np.random.default_rng(seed).normal(size=(3, n, n)))[0]
    a = q @ (np.arange(1, n + 1)[:, None] * np.swapaxes(q, -1, -2))
    return nt.tensor(a.astype(d), names=("batch", "row", "col"))


def qkv(d, seq=5, key=6, size=4):
    return (rnd(2, 2, seq, size, names=("batch", "head", "seq", "d"), seed=0, dtype=d),
            rnd(2, 2, key, size, names=("batch", "head", "key", "d"), seed=1, dtype=d),
            rnd(2, 2, key, size, names=("batch", "head", "key", "d"), seed=2, dtype=d))


def padding(key=6):
    keep = np.ones((2, key), dtype=bool)
    keep[1, key - 2:] = False
    return nt.tensor(keep, names=("batch", "key"))


def module(factory):
    """A module built from a fixed seed, in eval mode (dropout off)."""
    nt.manual_seed(0)
    return factory().eval()


class TrainStep(nn.Module):
    """Linear-GELU-Linear with a residual, LayerNorm, a head and the cross-entropy loss."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear("embed", "hidden", 8, 16)
        self.fc2 = nn.Linear("hidden", "embed", 16, 8)
        self.norm = nn.LayerNorm("embed", 8)
        self.head = nn.Linear("embed", "vocab", 8, 6)

    def forward(self, x, target):
        h = self.norm(x + self.fc2(F.gelu(self.fc1(x))))
        logits = self.head(h)
        return F.cross_entropy(logits, target, dim="vocab"), logits


def _chain(x, y):
    # a long elementwise run, with a value (h) read both inside and after it: the fused group
    # must hand out more than its last member
    h = x * y + 0.5
    g = (h.tanh() * 0.5 - y.sigmoid()).exp()
    return g, h.sum("seq"), nt.where(g > 1.0, g, h)


def _arith_chain(x, y):
    # the same shape of run with arithmetic only (the chain above takes exp, tanh and sigmoid, which the
    # CPU computes with numba_math's functions)
    h = x * y + 0.5
    g = nt.maximum(h * 0.5 - y, 0.1).sqrt() / (1.0 + y.abs())
    return g, h.sum("seq"), nt.where(g > 1.0, g, h)


SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30, 88.0, -88.0, 1e-40, 0.5, -2.0])


def _special_values(x, y):
    # NaN, infinities, signed zeros, overflow and subnormals through the fused formulas: each must give
    # what NumPy gives (NaN propagation in maximum and clip, sigmoid and softplus at the extremes)
    return (x.relu(), nt.maximum(x, y), nt.minimum(x, y), x.clip(-1, 1), x.sigmoid(), x.softplus(), F.silu(x),
            F.gelu(x), x.tanh(), nt.where(x > y, x, y), x / y, x.rsqrt(), x.exp(), x.abs().log(), x ** 3)


def _closure_weight():
    w = rnd(8, 3, names=("embed", "out"), seed=7, dtype="float64")
    # w is read from the closure: an external of the graph, read afresh at each call
    return lambda x: nt.matmul(x, w.to(x.dtype)).relu()


def _constants(x):
    # made inside the function from no input: folded while tracing
    scale = nt.arange(8.0, names=("embed",)) * 0.25 + 1.0
    return x * scale.to(x.dtype), (x.exp() + x.exp()).sum("embed")  # the second exp is merged into the first


class CausalBlock(nn.Module):
    """A TransformerBlock called with a keyword (is_causal) that the compiled call does not see."""

    def __init__(self):
        super().__init__()
        self.block = nn.TransformerBlock("embed", 8, 2)

    def forward(self, x):
        return self.block(x, is_causal=True)


def _in_place(x, y, i):
    """In-place ops on tensors the function makes, each traced as its out-of-place op (or a setitem)."""
    a = x * 1.5
    a += y
    a -= 0.25
    a *= y.abs() + 0.5
    a /= 2.0
    a.relu_()
    a.exp_()
    a.clamp_(max=3.0)
    a.sigmoid_()
    a.pow_(2)
    b = y * 2
    b.masked_fill_(y > 0.5, -1.0)
    b[0] = 0.25
    b[:, 1:3] = x[:, 1:3]
    b[i] = 0.5
    c = x - 1
    c.tanh_()
    c.copy_(x * y)
    F.relu(c, inplace=True)
    d = x + 0.0
    d.zero_()
    d.fill_(0.5)
    return a, b, c + d


def _cse_then_layer_norm(x, w):
    # merging the second exp rewrites every later node, the layer norm (whose params hold a plan) too
    return F.layer_norm(x.exp() + x.exp(), weight=w, dim="embed")


CASES = {
    # ---------------------------------------------------------------- elementwise
    "exp_log_sqrt": (lambda x: (x.exp(), (x.abs() + 0.5).log(), (x.abs() + 0.1).sqrt()),
                     lambda d: (x3(d),)),
    "sin_tanh_sigmoid": (lambda x: (x.sin(), x.tanh(), x.sigmoid()), lambda d: (x3(d),)),
    "relu_gelu": (lambda x: (x.relu(), F.gelu(x), F.gelu(x, approximate="tanh")), lambda d: (x3(d),)),
    "silu_softplus_erf": (lambda x: (F.silu(x), x.softplus(), x.erf()), lambda d: (x3(d),)),
    "abs_square_reciprocal_rsqrt": (lambda x: (x.abs(), x.square(), (x.abs() + 0.5).reciprocal(),
                                               (x.abs() + 0.5).rsqrt()), lambda d: (x3(d),)),
    "clip_pow": (lambda x: (x.clip(-0.5, 0.7), x.clip(min=0.0), (x.abs() + 0.1) ** 1.5, x.pow(3), 2 ** x),
                 lambda d: (x3(d),)),
    "maximum_minimum_where": (lambda x, y: (nt.maximum(x, y), nt.minimum(x, 0.1), nt.where(x > y, x, y * 2),
                                            nt.where(x <= 0, 0.0, x), (x >= y) == (y < 0.2)),
                              lambda d: (x3(d), x3(d, 1))),
    "fused_chain": (_chain, lambda d: (x3(d), x3(d, 1))),
    "arith_chain": (_arith_chain, lambda d: (x3(d), x3(d, 1))),
    "arith_chain_wide": (_arith_chain, lambda d: (rnd(3, 4, 3000, names=X, dtype=d),
                                                  rnd(3, 4, 3000, names=X, seed=1, dtype=d))),
    # a fused group whose first output is a comparison: that one carries no gradient, the others do
    "comparison_first_in_group": (lambda x: (x > 0, x.exp() * 2), lambda d: (x3(d),)),
    # big enough for the parallel kernel, rows longer than one chunk of it
    "fused_chain_wide": (_chain, lambda d: (rnd(3, 4, 3000, names=X, dtype=d), rnd(3, 4, 3000, names=X, seed=1, dtype=d))),
    "special_values": (_special_values, lambda d: (nt.tensor(np.resize(SPECIAL, (2, 3, 12)).astype(d), names=X),
                                                    nt.tensor(np.resize(SPECIAL[::-1], (2, 3, 12)).astype(d), names=X))),
    # ---------------------------------------------------------------- binary, broadcasting by name
    "broadcast_named": (lambda x, b, s: (x + b, x * s.align_as(x), (x - s.align_as(x)) / (b.abs() + 1.0),
                                      s.align_as(x) * b, x.sum("seq") - b),
                        lambda d: (x3(d), rnd(8, names=("embed",), seed=1, dtype=d),
                                   rnd(5, 2, names=("seq", "batch"), seed=2, dtype=d))),
    "arith": (lambda x, y: (x + y) * x - y / (1.5 + x.abs()) - x.square() + 3.0 - 0.5 * y,
              lambda d: (x3(d), x3(d, 1))),
    # ---------------------------------------------------------------- reductions
    "sum_mean": (lambda x: (x.sum("seq"), x.mean(("batch", "embed")), x.sum(), x.mean("embed", keepdim=True)),
                 lambda d: (x3(d),)),
    "var_std": (lambda x: (x.var("embed"), x.std("seq"), x.var(("seq", "embed"), unbiased=False),
                           x.std("embed", keepdim=True)), lambda d: (x3(d),)),
    "max_min_amax": (lambda x: (x.max("seq").values, x.min("embed").values, x.amax("seq"), x.amin("embed"),
                                x.amax(("batch", "seq"), keepdim=True)), lambda d: (x3(d),)),
    "logsumexp_prod_norm": (lambda x: (x.logsumexp("embed"), x.clip(0.5, 1.5).prod("seq"), x.norm(dim="seq"),
                                       x.norm(p=1, dim="embed")), lambda d: (x3(d),)),
    "softmax": (lambda x: (x.softmax("embed"), x.log_softmax("seq"), F.softmax(x, "batch")), lambda d: (x3(d),)),
    # ---------------------------------------------------------------- contractions
    "matmul": (lambda x, w: (nt.matmul(x, w), x @ w),
               lambda d: (x3(d), rnd(8, 6, names=("embed", "hidden"), seed=2, dtype=d))),
    "einsum": (lambda x, w: nt.einsum("batch seq embed, embed hidden -> batch hidden", x, w),
               lambda d: (x3(d), rnd(8, 6, names=("embed", "hidden"), seed=2, dtype=d))),
    "dot": (lambda x, w: (nt.dot(x, x, over="embed"), nt.dot(x, w, over="embed")),
            lambda d: (x3(d), rnd(8, 6, names=("embed", "hidden"), seed=2, dtype=d))),
    "linear": (lambda x, w, b: F.linear(x, w, b, dim="embed"),
               lambda d: (x3(d), rnd(6, 8, names=("out", "embed"), seed=2, dtype=d),
                          rnd(6, names=("out",), seed=3, dtype=d))),
    # ---------------------------------------------------------------- normalization, losses, attention
    "layer_norm": (lambda x, w, b: (F.layer_norm(x, weight=w, bias=b, dim="embed"),
                                    F.layer_norm(x, dim=("seq", "embed"))),
                   lambda d: (x3(d), rnd(8, names=("embed",), seed=3, dtype=d), rnd(8, names=("embed",), seed=4, dtype=d))),
    "rms_norm": (lambda x, w: (F.rms_norm(x, weight=w, dim="embed"), F.rms_norm(x, dim="embed")),
                 lambda d: (x3(d), rnd(8, names=("embed",), seed=3, dtype=d))),
    "cross_entropy": (lambda z, t, u: (F.cross_entropy(z, t, dim="vocab"),
                                       F.cross_entropy(z, u, dim="vocab", ignore_index=-100),
                                       F.cross_entropy(z, t, dim="vocab", reduction="none"),
                                       F.cross_entropy(z, t, dim="vocab", label_smoothing=0.1)),
                      lambda d: (rnd(4, 3, 6, names=("batch", "seq", "vocab"), dtype=d),
                                 ints(6, 4, 3, names=("batch", "seq")),
                                 nt.tensor(np.where(np.arange(12).reshape(4, 3) % 5 == 0, -100,
                                                    np.arange(12).reshape(4, 3) % 6), names=("batch", "seq")))),
    "mse_loss": (lambda z, y: (F.mse_loss(z, y), F.mse_loss(z, y, reduction="none"), F.mse_loss(z, y, reduction="sum")),
                 lambda d: (x3(d), x3(d, 1))),
    "more_losses": (lambda z, y: (F.l1_loss(z, y), F.huber_loss(z, y), F.smooth_l1_loss(z, y),
                                  F.binary_cross_entropy_with_logits(z, (y > 0).to(z.dtype)),
                                  F.kl_div(z.log_softmax("embed"), y.softmax("embed"), reduction="batchmean")),
                    lambda d: (x3(d), x3(d, 1))),
    "nll_loss": (lambda z, t: F.nll_loss(z.log_softmax("embed"), t, dim="embed"),
                 lambda d: (x3(d), ints(8, 2, 5, names=("batch", "seq")))),
    "group_batch_norm": (lambda x, w, b, m, v: (F.group_norm(x, 2, w, b, dim="c"),
                                                F.batch_norm(x, m, v, w, b, training=False, dim="c"),
                                                F.batch_norm(x, None, None, training=True, dim="c")),
                         lambda d: (rnd(2, 4, 3, 3, names=("batch", "c", "h", "w"), dtype=d),
                                    rnd(4, names=("c",), seed=1, dtype=d), rnd(4, names=("c",), seed=2, dtype=d),
                                    rnd(4, names=("c",), seed=3, dtype=d), rnd(4, names=("c",), seed=4, low=0.5, dtype=d))),
    "attention": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key"),
                  lambda d: qkv(d)),
    "attention_causal_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key",
                                                                                 mask=m, is_causal=True, scale=0.3),
                              lambda d: (*qkv(d), padding())),
    "attention_weights": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, dim="d", key_dim="key", mask=m,
                                                                             return_weights=True),
                          lambda d: (*qkv(d), padding())),
    "attention_pytorch_style": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                                lambda d: tuple(rnd(2, 2, 5, 4, names=(None,) * 4, seed=s, dtype=d) for s in range(3))),
    # ---------------------------------------------------------------- movement and naming
    "transpose_permute_align_rename": (lambda x: (x.transpose("batch", "embed"), x.permute("seq", "embed", "batch"),
                                                  x.align_to("embed", "batch", "seq"), x.rename(seq="time") * 2),
                                       lambda d: (x3(d),)),
    "flatten_unflatten": (lambda x: (x.flatten(("seq", "embed"), "flat"),
                                     x.flatten(("seq", "embed"), "flat").unflatten("flat", (("s", 5), ("e", 8)))),
                          lambda d: (x3(d),)),
    "reshape_expand_squeeze": (lambda x: (x.unsqueeze(1, "one").squeeze("one").reshape(10, 8, names=("rows", "embed")),
                                          x.sum("seq").align_to("batch", "seq", "embed").expand(2, 5, 8) * x,
                                          x[:, :1].squeeze("seq")),
                               lambda d: (x3(d),)),
    "pad_flip_roll_tril": (lambda x: (x.pad({"seq": (1, 2)}, value=0.5), x.flip("seq"), x.roll(2, "embed"),
                                      x.sum("batch").tril(), x.sum("batch").triu(1), x.tile((1, 2, 1))),
                           lambda d: (x3(d),)),
    "repeat_interleave": (lambda x: x.repeat_interleave(2, dim="seq"), lambda d: (x3(d),)),
    "rearrange": (lambda x: (nt.rearrange(x, "batch seq embed=(head d) -> batch head seq d", head=2),
                             nt.rearrange(x, "batch seq embed -> batch (seq embed)")),
                  lambda d: (x3(d),)),
    "index_slices_ints": (lambda x: (x[0], x[:, 1:4], x[{"seq": 2}], x.select("embed", 3), x.narrow("seq", 1, 3),
                                     x[..., ::2], x[1, -1]),
                          lambda d: (x3(d),)),
    "cat_stack": (lambda x, y: (nt.cat([x, y * 2], "seq"), nt.stack([x, -y], "pair")),
                  lambda d: (x3(d), x3(d, 1))),
    "split_chunk_unbind": (lambda x: (*x.split(3, "embed"), *x.chunk(2, "seq"), *x.unbind("batch")),
                           lambda d: (x3(d),)),
    "cumsum_cumprod": (lambda x: (x.cumsum("seq"), (x.clip(-1, 1) + 2).cumprod("embed")), lambda d: (x3(d),)),
    "sort_topk_argmax": (lambda x: (nt.sort(x, "embed").values, nt.sort(x, "seq", descending=True).values,
                                    x.topk(3, "embed").values, x.topk(2, "seq", largest=False).indices,
                                    x.argmax("seq"), nt.argsort(x, "embed")),
                         lambda d: (x3(d),)),
    # ---------------------------------------------------------------- indexing by tensors
    "gather_index_select": (lambda x, i, j: (x.gather("embed", i), x.index_select("seq", j), x[:, j]),
                            lambda d: (x3(d), ints(8, 2, 5, 3, names=X, seed=1), ints(5, 3, names=("seq",), seed=2))),
    "masked_fill": (lambda x, y: (x.masked_fill(x > 0.5, -1.0), x.masked_fill(y < 0, 0.0)),
                    lambda d: (x3(d), x3(d, 1))),
    "scatter_add": (lambda x, i, s, j, r: (x.scatter_add("embed", i, s), x.index_add("seq", j, r)),
                    lambda d: (x3(d), ints(8, 2, 5, 3, names=X, seed=1), rnd(2, 5, 3, names=X, seed=3, dtype=d),
                               ints(5, 4, names=("seq",), seed=2), rnd(2, 4, 8, names=X, seed=4, dtype=d))),
    "embedding": (lambda idx, w: F.embedding(idx, w, dim="vocab"),
                  lambda d: (ints(10, 3, 4, names=("batch", "seq")), rnd(10, 8, names=("vocab", "embed"), dtype=d))),
    # ---------------------------------------------------------------- special functions, integers, statistics
    "special": (lambda x: (x.lgamma(), x.digamma(), (x - 0.5).erfinv(), x.expm1(), x.log1p()),
                lambda d: (rnd(2, 5, 8, names=X, low=0.05, dtype=d),)),
    "integer_ops": (lambda a, b: ((a + b) * 3 // 2 - a % 3, nt.logical_and(a > 1, b < 3), (a == b).any("j"),
                                  (a != b).all("i"), a & b, a.sum("j"), a.float().mean("j"), a ** 2 + a * 1.5),
                    lambda d: (ints(5, 4, 3, names=("i", "j")), ints(5, 4, 3, names=("i", "j"), seed=1))),
    "statistics": (lambda x: (x.median("embed").values, x.diff(dim="embed"), x.cummax("seq").values,
                              x.logcumsumexp("seq"), nt.cosine_similarity(x, x.flip("seq"), dim="embed")),
                   lambda d: (x3(d),)),
    "quantile": (lambda x: x.quantile(0.3, dim="embed"), lambda d: (x3(d),)),
    # ---------------------------------------------------------------- dtypes
    "dtype_casts": (lambda x: (x.to(nt.float64), x.half().float(), x.double().sum("seq"), x.long(), x.bool(),
                               (x > 0).to(x.dtype) * x, x.to(nt.float32) + 1),
                    lambda d: (x3(d),)),
    # ---------------------------------------------------------------- convolution and pooling
    "conv1d": (lambda x, w, b: F.conv1d(x, w, b, groups=3, dilation=2, padding=1),
               lambda d: (rnd(2, 6, 9, names=(None,) * 3, dtype=d), rnd(6, 2, 3, names=(None,) * 3, seed=1, dtype=d),
                          rnd(6, names=(None,), seed=2, dtype=d))),
    "conv2d_named": (lambda x, w, b: F.conv2d(x, w, b, stride=(1, 2), padding=1, dim="c", spatial=("h", "w"),
                                              out_dim="c_out"),
                     lambda d: (rnd(2, 3, 6, 6, names=("batch", "c", "h", "w"), dtype=d),
                                rnd(4, 3, 3, 3, names=("c_out", "c", "h", "w"), seed=1, dtype=d),
                                rnd(4, names=("c_out",), seed=2, dtype=d))),
    "conv_transpose1d": (lambda x, w: F.conv_transpose1d(x, w, stride=2),
                         lambda d: (rnd(2, 3, 5, names=(None,) * 3, dtype=d), rnd(3, 4, 3, names=(None,) * 3, seed=1, dtype=d))),
    "max_avg_pool": (lambda x: (F.max_pool2d(x, 2), F.avg_pool2d(x, 3, stride=2, padding=1), F.max_pool1d(x.flatten((2, 3)), 3)),
                     lambda d: (rnd(2, 3, 6, 6, names=(None,) * 4, dtype=d),)),
    "adaptive_avg_pool": (lambda x: F.adaptive_avg_pool2d(x, 3), lambda d: (rnd(2, 3, 6, 6, names=(None,) * 4, dtype=d),)),
    # ---------------------------------------------------------------- nt.linalg, nt.fft, complex numbers
    "linalg_inv_det": (lambda a: (nt.linalg.inv(a), nt.linalg.det(a)), lambda d: (square(d),)),
    "linalg_solve_cholesky": (lambda a, s: (nt.linalg.solve(a, s.rename(col="k")), nt.linalg.cholesky(s)),
                              lambda d: (square(d), spd(d, 1))),
    "fft_rfft_abs": (lambda x: nt.fft.rfft(x, dim="seq", out_name="freq").abs(), lambda d: (x3(d),)),
    "complex_abs": (lambda x, y: (nt.complex(x, y).abs(), (nt.complex(x, y) * nt.complex(y, x)).imag),
                    lambda d: (x3(d), x3(d, 1))),
    # ---------------------------------------------------------------- what nt.compile itself does
    "closure_external": (_closure_weight(), lambda d: (x3(d),)),
    "constants_and_cse": (_constants, lambda d: (x3(d),)),
    "in_place": (_in_place, lambda d: (x3(d), x3(d, 1), ints(2, 1, names=("k",), seed=3))),
    "cse_then_layer_norm": (_cse_then_layer_norm, lambda d: (x3(d), rnd(8, names=("embed",), seed=3, dtype=d))),
    "nested_outputs": (lambda x, y, k: {"sum": x + y, "pair": [x * k, (y.exp(), k)]},
                       lambda d: (x3(d), x3(d, 1), 3)),
    # ---------------------------------------------------------------- modules
    "nn_linear": (module(lambda: nn.Linear("embed", "hidden", 8, 12)), lambda d: (x3(d),)),
    "nn_layer_norm": (module(lambda: nn.LayerNorm("embed", 8)), lambda d: (x3(d),)),
    "nn_mlp_gelu": (module(lambda: nn.MLP("embed", 8, 16)), lambda d: (x3(d),)),
    "nn_sequential": (module(lambda: nn.Sequential(nn.Linear("embed", "hidden", 8, 12), nn.GELU(approximate="tanh"),
                                                   nn.Linear("hidden", "embed", 12, 8), nn.SiLU())),
                      lambda d: (x3(d),)),
    "nn_multihead_attention": (module(lambda: nn.MultiheadAttention("embed", 8, 2)), lambda d: (x3(d),)),
    "nn_transformer_block": (module(lambda: nn.TransformerBlock("embed", 8, 2)), lambda d: (x3(d),)),
    "nn_transformer_block_causal": (module(CausalBlock), lambda d: (x3(d),)),
    "nn_embedding": (module(lambda: nn.Embedding(10, 8, "embed")), lambda d: (ints(10, 3, 4, names=("batch", "seq")),)),
    "nn_conv2d": (module(lambda: nn.Conv2d(3, 4, 3, padding=1)), lambda d: (rnd(2, 3, 6, 6, names=(None,) * 4, dtype=d),)),
    "nn_batchnorm_eval": (module(lambda: nn.BatchNorm2d(3)), lambda d: (rnd(2, 3, 6, 6, names=(None,) * 4, dtype=d),)),
    "train_step": (module(TrainStep), lambda d: (x3(d), ints(6, 2, 5, names=("batch", "seq")))),
}

# Contractions, and the layers built on them, sum many float32 terms.
TOLERANCES = {name: SUMS for name in ("matmul", "einsum", "dot", "linear", "conv1d", "conv2d_named", "conv_transpose1d",
                                      "linalg_inv_det", "linalg_solve_cholesky", "fft_rfft_abs", "attention",
                                      "attention_causal_mask", "attention_weights", "attention_pytorch_style",
                                      "nn_multihead_attention", "nn_transformer_block", "nn_transformer_block_causal",
                                      "nn_conv2d", "train_step")}


def _leaves(out):
    """The leaves of nested tuples, lists and dicts, in order."""
    if isinstance(out, (tuple, list)):
        return [leaf for o in out for leaf in _leaves(o)]
    if isinstance(out, dict):
        return [leaf for k in sorted(out) for leaf in _leaves(out[k])]
    return [out]


def _same(got, want, tol, where):
    """Equal structure, and each tensor equal in names, dtype, values and whether it requires grad."""
    got_leaves, want_leaves = _leaves(got), _leaves(want)
    assert type(got) is type(want) and len(got_leaves) == len(want_leaves), where
    for k, (g, w) in enumerate(zip(got_leaves, want_leaves)):
        if not isinstance(w, nt.Tensor):
            assert g == w, f"{where}, output {k}"
            continue
        assert isinstance(g, nt.Tensor) and g.dtype is w.dtype, f"{where}, output {k}: {g!r} vs {w!r}"
        assert g.requires_grad == w.requires_grad, f"{where}, output {k}: requires_grad {g.requires_grad}"
        try:
            assert_close(g.detach(), w.detach(), **tol)
        except AssertionError as e:
            raise AssertionError(f"{where}, output {k}: {e}") from None


def _compiled_calls(fn, inputs, n=2):
    """``nt.compile(fn)`` called ``n`` times; every call must compile (no warning, no eager fallback)."""
    compiled = nt.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results = [compiled(*inputs) for _ in range(n)]
    assert compiled._cache and None not in compiled._cache.values(), compiled.explain()
    return compiled, results


@pytest.mark.parametrize("name", CASES)
def test_compiled_equals_eager(name):
    fn, make_inputs = CASES[name]
    inputs = make_inputs("float32")
    with np.errstate(all="ignore"):  # NumPy's overflow notes (special_values) are not nt.compile's warnings
        eager = fn(*inputs)
        compiled, results = _compiled_calls(fn, inputs)
    assert len(compiled._cache) == 1  # the second call replayed the first call's program
    for call, got in enumerate(results):
        _same(got, eager, TOLERANCES.get(name, TIGHT), f"{name}, call {call + 1}")


def test_the_passes_ran():
    # the cases above test the fused op and the rewrites only if fusion, folding and merging happened
    for name, done in (("arith_chain", "fused groups"), ("constants_and_cse", "constants folded"),
                       ("constants_and_cse", "subexpressions merged")):
        fn, make_inputs = CASES[name]
        compiled, _ = _compiled_calls(fn, make_inputs("float32"), n=1)
        assert next(iter(compiled._cache.values())).report[done] >= 1, (name, compiled.explain())
        if done == "fused groups":
            assert "fused[mul+add+mul+sub+maximum+sqrt+abs+add+div" in compiled.explain()


# ----------------------------------------------------------------------------- gradients, in float64


def _grad_setup(name):
    fn, make_inputs = CASES[name]
    if isinstance(fn, nn.Module):
        fn = copy.deepcopy(fn).double()
    inputs = tuple(x.requires_grad_() if isinstance(x, nt.Tensor) and x.dtype.kind == "f" else x
                   for x in make_inputs("float64"))
    return fn, inputs


DIFFERENTIABLE = [name for name, (fn, make_inputs) in CASES.items()
                  if any(isinstance(x, nt.Tensor) and x.dtype.kind == "f" for x in make_inputs("float64"))]

# Central differences probe every input element twice; these are left to the eager comparison only:
NOT_GRADCHECKED = {
    "fused_chain_wide",  # 72,000 elements: the eager comparison checks it
    "special_values",  # NaN and infinite gradients
    "dtype_casts",  # a float16 round trip: steps of 1e-6 vanish in its rounding
    "linalg_solve_cholesky",  # perturbing one element makes the matrix unsymmetric
    "nested_outputs",  # gradcheck takes a tensor or a tuple of tensors, not a dict
}
GRADCHECKED = [name for name in DIFFERENTIABLE if name not in NOT_GRADCHECKED]


def _weighted_total(out, seed=1):
    rng = np.random.default_rng(seed)
    total = None
    for o in _leaves(out):
        if isinstance(o, nt.Tensor) and o.requires_grad:
            w = nt.tensor(rng.normal(size=o.shape).astype(o.dtype.name), names=o.names)
            term = (o * w).sum()
            term = term.real if term.dtype.kind == "c" else term
            total = term if total is None else total + term
    return total


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_compiled_gradients_equal_eager(name):
    fn, inputs = _grad_setup(name)
    wrt = [x for x in inputs if isinstance(x, nt.Tensor) and x.requires_grad]
    if isinstance(fn, nn.Module):
        wrt += list(fn.parameters())
    with np.errstate(all="ignore"):
        eager_out = fn(*inputs)
        eager = nt.grad(_weighted_total(eager_out), wrt, allow_unused=True)
        compiled, results = _compiled_calls(fn, inputs)
    for call, out in enumerate(results):
        where = f"{name}, call {call + 1}"
        _same(out, eager_out, {"rtol": 1e-12, "atol": 1e-13}, where)  # which outputs require grad, too
        with np.errstate(all="ignore"):
            got = nt.grad(_weighted_total(out), wrt, allow_unused=True)
        for k, (g, e) in enumerate(zip(got, eager)):
            assert (g is None) == (e is None), f"{where}, gradient {k}"
            if e is not None:
                assert g.names == e.names, f"{where}, gradient {k}"
                try:
                    assert_close(g, e, rtol=1e-9, atol=1e-12)
                except AssertionError as err:
                    raise AssertionError(f"{where}, gradient {k}: {err}") from None


@pytest.mark.parametrize("name", GRADCHECKED)
def test_compiled_gradcheck(name):
    fn, inputs = _grad_setup(name)
    compiled = nt.compile(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(compiled, *inputs)
    # the probes (no grad, one input a plain tensor) are signatures of their own: each compiled too
    assert len(compiled._cache) >= 2 and None not in compiled._cache.values(), compiled.explain()


# ----------------------------------------------------------------------------- state the graph reads


def test_externals_are_read_at_each_call():
    # a parameter changed in place (an optimizer step) is seen by the next compiled call
    layer = module(lambda: nn.MLP("embed", 8, 16))
    compiled = nt.compile(layer)
    x = x3("float32")
    for _ in range(2):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = compiled(x)
        _same(got, layer(x), SUMS, "after a parameter update")
        with nt.no_grad():
            for p in layer.parameters():
                p.mul_(1.5)


@pytest.mark.parametrize("make", [lambda: nn.BatchNorm2d(3), lambda: nn.Conv2d(3, 4, 3), lambda: nn.LayerNorm(6)],
                         ids=["batchnorm_eval", "conv2d", "layer_norm_pytorch_style"])
def test_modules_compile_after_in_place_parameter_updates(make):
    # trained parameters and buffers have been written in place (optimizer steps, Module.to): that
    # history is no write inside the compiled function
    layer = module(make)
    with nt.no_grad():
        for t in (*layer.parameters(), *layer.buffers()):
            if t.dtype.kind == "f":
                t.mul_(1.0)
    x = rnd(2, 3, 6, 6, names=(None,) * 4)
    _, results = _compiled_calls(layer, (x,))
    _same(results[-1], layer(x), SUMS, "after in-place updates")


# ----------------------------------------------------------------------------- what runs eagerly


def _backward_inside(x):
    loss = (x * x).sum()
    loss.backward()
    return x.grad


def _inplace(x):
    y = x * 2
    y.uniform_()  # a sampler's write (other writes trace as ops: test_compile.py)
    return y


# name: (function, inputs, fragments the warning must hold: the op or step, and why)
FALLS_BACK = {
    "item": (lambda x: x * x.sum().item(), lambda: (x3("float32"),), ("after sum", "item()")),
    "python_if_on_a_value": (lambda x: x * 2 if bool(x.mean() > 0) else -x, lambda: (x3("float32"),),
                             ("after gt", "needs values")),
    "boolean_mask": (lambda x: x[x > 0], lambda: (x3("float32"),), ("boolean mask",)),
    "nonzero": (lambda x: nt.nonzero(x > 0), lambda: (x3("float32"),), ("nonzero()",)),
    "backward_inside": (_backward_inside, lambda: (x3("float64").requires_grad_(),), ("backward",)),
    "inplace_write": (_inplace, lambda: (x3("float32"),), ("writes in place",)),
    "random_numbers": (lambda x: x + nt.randn(2, 5, 8, names=X), lambda: (x3("float32"),), ("random numbers",)),
}


@pytest.mark.parametrize("name", FALLS_BACK)
def test_untraceable_runs_eagerly_with_a_warning(name):
    fn, make_inputs, fragments = FALLS_BACK[name]
    nt.manual_seed(0)
    eager = fn(*make_inputs())
    compiled = nt.compile(fn)
    nt.manual_seed(0)  # the random cases: the eager run inside draws the same numbers
    with pytest.warns(UserWarning, match="^nt.compile:") as caught:
        got = compiled(*make_inputs())
    messages = [str(w.message) for w in caught if str(w.message).startswith("nt.compile:")]
    assert any(all(f in m for f in fragments) for m in messages), messages
    assert list(compiled._cache.values()) == [None] and "runs eagerly" in compiled.explain()
    _same(got, eager, TIGHT, name)
    # the signature is remembered as eager: the second call neither traces nor warns again (fresh inputs:
    # the backward case accumulates into its input's .grad)
    nt.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _same(compiled(*make_inputs()), eager, TIGHT, f"{name}, call 2")
    assert len(compiled._cache) == 1


def test_an_inplace_write_to_an_external_is_written_back_at_every_call():
    # the write happens at every eager call; a graph that dropped it would return stale values: a
    # write-back step copies the new value into the counter at every call
    def counting(counter):
        def fn(x):
            counter.add_(1.0)
            return x * counter.sum()
        return fn

    x = x3("float32")
    eager_counter, compiled_counter = nt.zeros(3, names=("k",)), nt.zeros(3, names=("k",))
    eager, compiled = counting(eager_counter), nt.compile(counting(compiled_counter))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in range(3):
            _same(compiled(x), eager(x), TIGHT, f"call {call + 1}")
            assert_close(compiled_counter, eager_counter, rtol=0, atol=0)
    (program,) = compiled._cache.values()
    assert [n.params["what"] for n in program.graph.nodes if n.effect()] == ["write"]


def test_batchnorm_in_training_compiles_and_updates_its_statistics_once_per_call():
    # its running statistics are written back at every call; the gradients are eager's
    eager, traced = module(lambda: nn.BatchNorm2d(3)).train(), module(lambda: nn.BatchNorm2d(3)).train()
    compiled = nt.compile(traced)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for call in range(3):
            x = rnd(2, 3, 4, 4, names=(None,) * 4, seed=call).requires_grad_()
            got, want = compiled(x), eager(x)
            _same(got, want, TIGHT, f"call {call + 1}")
            (gx, gw), (ex, ew) = (nt.grad((y * y).sum(), (x, m.weight)) for y, m in ((got, traced), (want, eager)))
            assert_close(gx, ex, **SUMS)
            assert_close(gw, ew, **SUMS)
    assert None not in compiled._cache.values()
    for (key, a), (_, b) in zip(traced.state_dict().items(), eager.state_dict().items()):
        try:
            assert_close(a, b, rtol=1e-6, atol=1e-7)
        except AssertionError as e:
            raise AssertionError(f"{key}: {e}") from None
