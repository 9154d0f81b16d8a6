"""Rich display of tensors: ``t._repr_html_()`` for Jupyter and ``t.plot()`` with matplotlib.

The HTML shows the names as headers: a header line (``batch: 4 × seq: 16``, dtype,
device, grad state), then the values — a 0-dim tensor's value, a 1-D tensor as one
row under its dim's name, a 2-D tensor as a table with the row dim's name in the
corner and the column dim's name over the columns, and for higher ranks a summary
(min/max/mean; for complex data, which has no order, the largest modulus and the mean) plus the
first 2-D slice, its position stated.  Dims longer than
``MAX_ITEMS`` show their first and last ``EDGE_ITEMS`` entries around an ellipsis.
Values are formatted as ``repr`` formats them.  Unnamed dims read ``dim 0``, ``dim 1``...

``t.plot()`` draws a 1-D tensor as a line and a 2-D tensor as a heatmap, axes labelled
by the dim names; matplotlib is an optional extra, imported on first use.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from html import escape
from typing import Any, Optional

from . import _dtypes, _names
from ._internal import backend_of
from .backends.formatting import DEFAULTS, OPTIONS, format_cells
from .tensor import Tensor

MAX_ITEMS = 20  # a dim longer than this is truncated ...
EDGE_ITEMS = 5  # ... to its first and last EDGE_ITEMS entries

# one style block per fragment, scoped to it, keeps the cells themselves bare
_STYLE = ("<style>.namedtensor table{border-collapse:collapse;font-family:monospace;font-size:12px;margin-top:4px}"
          ".namedtensor th,.namedtensor td{padding:1px 6px;border:1px solid #ccc}"
          ".namedtensor td{text-align:right}.namedtensor th{background:#f3f3f3}</style>")


def _label(names: Sequence[str | None], ax: int) -> str:
    """A dim's name, or ``dim N`` when it has none."""
    n = names[ax]
    return f"dim {ax}" if n is None else n


def _positions(size: int) -> list[int | None]:
    """The indices shown along a dim of ``size``; ``None`` marks the ellipsis."""
    if size <= MAX_ITEMS:
        return list(range(size))
    return list(range(EDGE_ITEMS)) + [None] + list(range(size - EDGE_ITEMS, size))


def _window(B, x, axes: Sequence[int]):
    """``x`` cut down to the shown entries along ``axes`` (first and last EDGE_ITEMS of long dims)."""
    for ax in axes:
        size = x.shape[ax]
        if size > MAX_ITEMS:
            head = [slice(None)] * x.ndim
            tail = [slice(None)] * x.ndim
            head[ax] = slice(0, EDGE_ITEMS)
            tail[ax] = slice(size - EDGE_ITEMS, size)
            x = B.concat([B.getitem(x, tuple(head)), B.getitem(x, tuple(tail))], axis=ax)
    return x


def _cells(t: Tensor, x) -> list[str]:
    """The values of backend array ``x`` (from ``t``), formatted as ``repr`` formats them, flattened."""
    return format_cells(backend_of(t).to_numpy(x))


def _header(t: Tensor) -> str:
    dims = " × ".join(f"{_label(t.names, i)}: {s}" for i, s in enumerate(t.shape)) or "scalar"
    parts = [f"<b>{escape(dims)}</b>", escape(t.dtype.name)]
    if t.device != "cpu":
        parts.append(escape(t.device))
    if t.grad_fn is not None:
        parts.append(f"grad_fn={escape(t.grad_fn.op.name)}")
    elif t.requires_grad:
        parts.append("requires_grad=True")
    return '<div class="nt-header">' + " · ".join(parts) + "</div>"


def _th(text: str, extra: str = "") -> str:
    return f"<th{extra}>{escape(text)}</th>"


def _td(text: str) -> str:
    return f"<td>{escape(text)}</td>"


def _index_cells(positions: Sequence[int | None]) -> str:
    return "".join(_th("…" if p is None else str(p)) for p in positions)


def _row_cells(values: list[str], positions: Sequence[int | None]) -> str:
    """Data cells for one row: ``values`` in order, an ellipsis cell where ``positions`` has ``None``."""
    it = iter(values)
    return "".join(_td("…") if p is None else _td(next(it)) for p in positions)


def _table_1d(t: Tensor, x, ax: int) -> str:
    """One row of values under a header naming dim ``ax`` and holding its indices."""
    cols = _positions(x.shape[0])
    values = _cells(t, _window(backend_of(t), x, (0,)))
    head = "<tr>" + _th(_label(t.names, ax)) + _index_cells(cols) + "</tr>"
    body = "<tr>" + _th("") + _row_cells(values, cols) + "</tr>"
    return f"<table><thead>{head}</thead><tbody>{body}</tbody></table>"


def _table_2d(t: Tensor, x, row_ax: int, col_ax: int) -> str:
    """Rows along dim ``row_ax`` (named in the corner), columns along ``col_ax`` (named above them)."""
    rows, cols = _positions(x.shape[0]), _positions(x.shape[1])
    values = _cells(t, _window(backend_of(t), x, (0, 1)))
    ncols = len(cols) - (None in cols)
    head = ("<tr>" + _th("") + _th(_label(t.names, col_ax), f' colspan="{len(cols)}"') + "</tr>"
            + "<tr>" + _th(_label(t.names, row_ax)) + _index_cells(cols) + "</tr>")
    body, k = [], 0
    for r in rows:
        if r is None:
            body.append("<tr>" + _th("⋮") + "".join(_td("⋮") for _ in cols) + "</tr>")
            continue
        body.append("<tr>" + _th(str(r)) + _row_cells(values[k:k + ncols], cols) + "</tr>")
        k += ncols
    return f"<table><thead>{head}</thead><tbody>{''.join(body)}</tbody></table>"


def _stats(t: Tensor) -> str:
    """``min/max/mean`` of numeric (non-bool) data, as ``repr`` writes numbers; '' for bool data; for complex
    data the largest modulus and the mean."""
    if t.dtype.kind == "b":
        return ""
    B, x = backend_of(t), t.array
    if t.dtype.kind == "c":
        return f"max |z| {_cells(t, B.max(B.abs(x), axis=None))[0]} · mean {_cells(t, B.mean(x, axis=None))[0]}"
    lo, hi = _cells(t, B.min(x, axis=None)), _cells(t, B.max(x, axis=None))
    # the mean of integers is a float: take it in float64 so strict backends accept it
    mean = _cells(t, B.mean(x if t.dtype.kind == "f" else B.astype(x, B.native(_dtypes.float64)), axis=None))
    return f"min {lo[0]} · max {hi[0]} · mean {mean[0]}"


def _body(t: Tensor) -> str:
    x = t.array
    if t.ndim == 0:
        return f'<div class="nt-value"><code>{escape(_cells(t, x)[0])}</code></div>'
    if t.numel() == 0:
        zero = ", ".join(_label(t.names, i) for i, s in enumerate(t.shape) if s == 0)
        return f'<div class="nt-empty"><i>empty tensor (no elements: {escape(zero)} has size 0)</i></div>'
    if t.ndim == 1:
        return _table_1d(t, x, 0)
    if t.ndim == 2:
        return _table_2d(t, x, 0, 1)
    lead = t.ndim - 2
    where = ", ".join(f"{_label(t.names, i)}=0" for i in range(lead))
    summary = f'<div class="nt-summary">{escape(_stats(t))}</div>'
    note = f'<div class="nt-slice">first slice shown: {escape(where)}</div>'
    first = backend_of(t).getitem(x, (0,) * lead)
    return summary + note + _table_2d(t, first, lead, lead + 1)


def repr_html(t: Tensor) -> str:
    """An HTML fragment showing ``t`` (Jupyter calls it as ``t._repr_html_()``)."""
    return f'<div class="namedtensor">{_STYLE}{_header(t)}{_body(t)}</div>'


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError('plot() needs matplotlib: pip install "named-tensors[plot]"') from None
    return plt


def _host_values(t: Tensor):
    """``t``'s values on the host, in a dtype matplotlib draws (float16 widened, bool as int)."""
    B, x = backend_of(t), t.detach().array
    if t.dtype.kind == "b":
        x = B.astype(x, B.native(_dtypes.int64))
    elif t.dtype.itemsize < 4:
        x = B.astype(x, B.native(_dtypes.float32))
    return B.to_numpy(x)


def plot(t: Tensor, ax: Any = None, **kwargs: Any) -> Any:
    """Draw a 1-D tensor as a line or a 2-D tensor as a heatmap (imshow + colorbar), axes labelled by dim names.

    Draws on ``ax`` (default: matplotlib's current axes) and returns it; ``kwargs`` go to
    ``ax.plot`` / ``ax.imshow``.  Other ranks raise ValueError: select or reduce dims first.
    """
    if t.ndim not in (1, 2):
        if t.ndim == 0:
            hint = "a 0-dim tensor is one number: t.item()"
        else:
            # unnamed dims are picked by position, named ones by name
            dim = "0" if t.names[0] is None else repr(t.names[0])
            hint = f"select or reduce dims first, e.g. t[{{{dim}: 0}}] or t.mean({dim})"
        raise ValueError(
            f"plot() draws 1-D tensors as a line and 2-D tensors as a heatmap; this one has {t.ndim} dims "
            f"{_names.fmt(t.names)}: {hint}."
        )
    if t.numel() == 0:
        raise ValueError(f"plot(): the tensor is empty (shape {t.shape}), there is nothing to draw.")
    if t.dtype.kind == "c":
        raise ValueError(f"plot(): complex values ({t.dtype!r}) have no one value to draw; plot t.real, t.imag, "
                         "t.abs() or t.angle().")
    plt = _pyplot()
    if ax is None:
        ax = plt.gca()
    values = _host_values(t)
    if t.ndim == 1:
        ax.plot(range(t.shape[0]), values, **kwargs)
        ax.set_xlabel(_label(t.names, 0))
    else:
        kwargs.setdefault("aspect", "auto")
        image = ax.imshow(values, **kwargs)
        ax.figure.colorbar(image, ax=ax)
        ax.set_ylabel(_label(t.names, 0))
        ax.set_xlabel(_label(t.names, 1))
    return ax


_PROFILES = {
    "default": DEFAULTS,
    "short": {"precision": 2, "threshold": DEFAULTS["threshold"], "edgeitems": 2},
    "full": {"precision": DEFAULTS["precision"], "threshold": sys.maxsize, "edgeitems": DEFAULTS["edgeitems"]},
}


def set_printoptions(precision: Optional[int] = None, threshold: Optional[float] = None,
                     edgeitems: Optional[int] = None, linewidth: Optional[int] = None, profile: Optional[str] = None,
                     sci_mode: Optional[bool] = None) -> None:
    """PyTorch's ``torch.set_printoptions``, for ``repr`` and the HTML display: ``precision`` digits after the
    point, more than ``threshold`` elements summarised to ``edgeitems`` at each end of a dim, lines of
    ``linewidth`` characters, ``sci_mode`` True (scientific), False (fixed point) or None (chosen from
    the values).  ``profile`` sets them all first: ``"default"`` (the library's: precision 4, threshold
    200, edgeitems 3, linewidth 75), ``"short"`` or ``"full"`` (nothing summarised)."""
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}.")
        OPTIONS.update(DEFAULTS)
        OPTIONS.update(_PROFILES[profile])
    for name, value, least in (("precision", precision, 0), ("threshold", threshold, 0), ("edgeitems", edgeitems, 1),
                               ("linewidth", linewidth, 1)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= least:
            raise ValueError(f"set_printoptions: {name} must be a number >= {least}, got {value!r}.")
        OPTIONS[name] = sys.maxsize if value == float("inf") else int(value)  # inf: never summarise
    if sci_mode is not None and not isinstance(sci_mode, bool):
        raise TypeError(f"set_printoptions: sci_mode must be True, False or None, got {sci_mode!r}.")
    # PyTorch's rule: sci_mode=None in a call restores the automatic choice
    OPTIONS["sci_mode"] = sci_mode


def get_printoptions() -> dict:
    """The current print options, as ``torch.get_printoptions`` gives them."""
    return dict(OPTIONS)


METHODS = {"_repr_html_": repr_html, "plot": plot}
