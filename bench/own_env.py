"""The environment the benchmark scripts run in.

OpenBLAS tuning variables that this workplace sets for old CPUs (``OPENBLAS_CORETYPE``,
``OPENBLAS_L2_SIZE``) slow NumPy down, and BLAS and OpenMP must have the threads a run compares: a
script calls :func:`run_in_own_environment` before it imports NumPy, and runs again, once, without
those variables and with the thread counts set.  Only the script's own process and its children see
the change; tests and CI never do.
"""

from __future__ import annotations

import os
import sys
from typing import Dict, Optional

OPENBLAS_TUNING = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def run_in_own_environment(threads: int, extra: Optional[Dict[str, str]] = None) -> None:
    """Re-run this script without the OpenBLAS tuning variables, BLAS and OpenMP on ``threads`` threads
    and ``extra`` set; returns at once in the re-run (``_NT_BENCH_CHILD`` marks it)."""
    if os.environ.get("_NT_BENCH_CHILD"):
        return
    env = {k: v for k, v in os.environ.items() if k not in OPENBLAS_TUNING}
    env.update(_NT_BENCH_CHILD="1", OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads), **(extra or {}))
    os.execve(sys.executable, [sys.executable, *sys.argv], env)
