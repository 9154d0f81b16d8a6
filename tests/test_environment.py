"""The test environment has what the ``test`` extra installs.

Tests that compare against PyTorch, einops or array-api-compat use ``pytest.importorskip`` so that
they can run where a user lacks those packages; this test makes sure that such skips never hide in
an environment made from the ``test`` extra (CI's), where they would silently drop the comparisons.
"""

import importlib

import pytest

EXTRA = ("torch", "einops", "array_api_compat", "array_api_extra", "sklearn", "scipy", "array_api_strict")


@pytest.mark.parametrize("module", EXTRA)
def test_the_test_extra_is_installed(module):
    importlib.import_module(module)
