"""docs/converting.md's "Not in namedtensor (yet)" stays true: every name it lists is PyTorch's and is absent
from namedtensor, so a name that gets added must leave the list."""

import re
from pathlib import Path

import pytest
import torch

import namedtensor as nt

DOC = Path(__file__).resolve().parent.parent / "docs" / "converting.md"


def _listed():
    """The ``torch.X`` and ``Tensor.X`` names the section lists, as (owner, name) pairs."""
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Not in namedtensor (yet)\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"`(torch|Tensor)\.(\w+)`", section)


LISTED = _listed()
OWNERS = {"torch": (torch, nt), "Tensor": (torch.Tensor, nt.Tensor)}


def test_the_section_lists_names_once_each():
    # the regex must see the section (a renamed heading would leave nothing to check)
    assert len(LISTED) >= 40
    assert len(LISTED) == len(set(LISTED)), [p for p in LISTED if LISTED.count(p) > 1]


@pytest.mark.parametrize("owner, name", LISTED, ids=[f"{o}.{n}" for o, n in LISTED])
def test_listed_name_is_pytorchs_and_not_namedtensors(owner, name):
    theirs, ours = OWNERS[owner]
    assert hasattr(theirs, name), f"{owner}.{name} is not in PyTorch: the list names only what PyTorch has"
    assert not hasattr(ours, name), f"{owner}.{name} exists in namedtensor now: remove it from the section"
