"""How tensor values print in ``repr`` and in the HTML display (NumPy's formatter, applied to a host copy),
under the print options that ``nt.set_printoptions`` sets."""

from __future__ import annotations

import sys

import numpy as np

#: the print options (``nt.set_printoptions``): the library's defaults, PyTorch's "default" profile but a
#: smaller threshold (a repr stays short in a notebook)
DEFAULTS = {"precision": 4, "threshold": 200, "edgeitems": 3, "linewidth": 75, "sci_mode": None}
OPTIONS = dict(DEFAULTS)


def _number_options() -> dict:
    """One notation for every place values are shown: repr and display cells must agree."""
    p, sci = OPTIONS["precision"], OPTIONS["sci_mode"]
    options = {"precision": p, "suppress_small": True}
    if sci is True:
        options["formatter"] = {"float_kind": lambda v: np.format_float_scientific(v, precision=p, unique=False)}
    elif sci is False:
        options["formatter"] = {"float_kind": lambda v: np.format_float_positional(v, precision=p, unique=False)}
    return options


def format_values(a, indent: int) -> str:
    """The values of array ``a`` as ``repr`` shows them, continuation lines indented by ``indent``."""
    a = np.asarray(a)
    return np.array2string(a, separator=", ", prefix=" " * indent, threshold=OPTIONS["threshold"],
                           edgeitems=OPTIONS["edgeitems"], max_line_width=OPTIONS["linewidth"], **_number_options())


def format_cells(a) -> list:
    """Every value of array ``a`` (flattened, C order) as a string, in ``repr``'s notation.

    The values share one format, chosen from all of them as ``repr`` chooses it, so a
    column of cells reads like the rows ``repr`` prints.
    """
    a = np.asarray(a).reshape(-1)
    if a.size == 0:
        return []
    # '|' never occurs in a formatted bool, int or float, so it splits the cells back apart
    s = np.array2string(a, separator="|", threshold=sys.maxsize, max_line_width=sys.maxsize, **_number_options())
    return [c.strip() for c in s[1:-1].split("|")]
