"""How tensor values print in ``repr`` (NumPy's formatter, applied to a host copy)."""

from __future__ import annotations

import numpy as np


def format_values(a, indent: int) -> str:
    """The values of array ``a`` as ``repr`` shows them, continuation lines indented by ``indent``."""
    a = np.asarray(a)
    return np.array2string(a, separator=", ", prefix=" " * indent, threshold=200, edgeitems=3,
                           precision=4, suppress_small=True)
