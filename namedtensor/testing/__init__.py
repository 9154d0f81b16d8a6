"""Public testing tools: ``gradcheck``/``gradgradcheck``, ``assert_close`` and Hypothesis strategies
(:mod:`namedtensor.testing.strategies`, which needs the ``hypothesis`` package)."""

from .gradcheck import GradcheckError, assert_close, gradcheck, gradgradcheck

__all__ = ["GradcheckError", "assert_close", "gradcheck", "gradgradcheck"]
