"""The Array API standard's namespace (2024.12) on namedtensor's ``Tensor``: ``t.__array_namespace__()``.

The standard's spellings that clash with the PyTorch-style top level live here, on the same
tensors: ``max``/``min`` return values only, ``std``/``var`` default to ``correction=0``,
``sort`` returns values only, ``repeat`` is NumPy's, ``concat``/``permute_dims``/``expand_dims``
take the standard's arguments.  Every ``axis`` takes names as well as ints (rule 3) and every
function gives names by the library's rules; every function and dtype of the standard is there, with
its ``linalg`` and ``fft`` extensions.  ``x.size`` is both: an ``int`` (the standard's element count)
that, called, is PyTorch's method.  See docs/converting.md, "The Array API namespace" (the conflicts
and their resolutions) and "Array API conformance" (the standard's test suite).

Modules: ``_dtypes`` (dtypes, dtype functions, inspection), ``creation``, ``elementwise``,
``statistical`` (statistical and utility), ``manipulation``, ``searching`` (searching, sorting,
sets), ``indexing`` (indexing), ``linalg`` and ``fft`` (the extensions).
"""

from __future__ import annotations

import math
import sys

from ..tensor import Tensor
from ._dtypes import *  # noqa: F403  (each module's __all__ is its share of the standard)
from ._dtypes import __all__ as _d
from .creation import *  # noqa: F403
from .creation import __all__ as _c
from .elementwise import *  # noqa: F403
from .elementwise import __all__ as _e
from .indexing import *  # noqa: F403
from .indexing import __all__ as _i
from .manipulation import *  # noqa: F403
from .manipulation import __all__ as _m
from .searching import *  # noqa: F403
from .searching import __all__ as _s
from .statistical import *  # noqa: F403
from .statistical import __all__ as _t

__array_api_version__ = "2024.12"

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None

__all__ = ["__array_api_version__", "e", "inf", "nan", "newaxis", "pi", *_d, *_c, *_e, *_i, *_m, *_s, *_t]

from . import fft, linalg  # noqa: E402, F401  (the standard's extensions, xp.fft and xp.linalg)

# Tensor.__array_namespace__ returns this module; it sits below this package, which registers itself
Tensor._array_api = sys.modules[__name__]
