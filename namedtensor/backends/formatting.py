"""How tensor values print in ``repr`` and in the HTML display (NumPy's formatter, applied to a host copy)."""

from __future__ import annotations

import sys

import numpy as np

# one notation for every place values are shown: repr and display cells must agree
_NUMBER_OPTIONS = {"precision": 4, "suppress_small": True}


def format_values(a, indent: int) -> str:
    """The values of array ``a`` as ``repr`` shows them, continuation lines indented by ``indent``."""
    a = np.asarray(a)
    return np.array2string(a, separator=", ", prefix=" " * indent, threshold=200, edgeitems=3,
                           **_NUMBER_OPTIONS)


def format_cells(a) -> list:
    """Every value of array ``a`` (flattened, C order) as a string, in ``repr``'s notation.

    The values share one format, chosen from all of them as ``repr`` chooses it, so a
    column of cells reads like the rows ``repr`` prints.
    """
    a = np.asarray(a).reshape(-1)
    if a.size == 0:
        return []
    # '|' never occurs in a formatted bool, int or float, so it splits the cells back apart
    s = np.array2string(a, separator="|", threshold=sys.maxsize, max_line_width=sys.maxsize, **_NUMBER_OPTIONS)
    return [c.strip() for c in s[1:-1].split("|")]
