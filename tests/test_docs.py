"""docs/converting.md runs: every ```python block, in order, in one namespace, in a temporary
working directory (the checkpoint example writes a file), so the page cannot rot.

Blocks that show an error catch it and keep it in a variable; the tests check that each such error
happened and that the page quotes its real message.
"""

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

import namedtensor as nt

DOC = Path(__file__).resolve().parent.parent / "docs" / "converting.md"
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Run every python block in order in one namespace; return (namespace, printed text, workdir)."""
    text = DOC.read_text(encoding="utf-8")
    blocks = _BLOCK.findall(text)
    assert len(blocks) >= 10, "the python blocks were not found"
    work = tmp_path_factory.mktemp("docs")
    ns = {"__name__": "converting_md"}
    out = io.StringIO()
    here = os.getcwd()
    nt.manual_seed(0)
    try:
        os.chdir(work)
        with contextlib.redirect_stdout(out):
            for i, code in enumerate(blocks):
                exec(compile(code, f"{DOC.name}[python block {i}]", "exec"), ns)
    finally:
        os.chdir(here)
    return ns, out.getvalue(), work


def test_every_python_block_runs_in_order(run):
    ns, printed, work = run
    assert (work / "ckpt.safetensors").exists()
    assert "(4, 4, 4) False" in printed  # the buggy NumPy function: no error, wrong numbers
    assert ns["out4"].names == ns["out5"].names == ("batch", "seq", "head_dim")


@pytest.mark.parametrize("var, fragment", [
    ("broadcast_error", "To broadcast by name use b.align_as(a)"),
    ("matmul_error", "the contracted dims differ"),
    ("mask_error", "position -2 from the right: 'batch' vs 'seq'"),
    ("signature_error", "size conflict on dim 'seq'"),
])
def test_error_demos_raise_names_error(run, var, fragment):
    ns, _, _ = run
    assert isinstance(ns.get(var), nt.NamesError), f"the block that sets {var} raised no NamesError"
    assert fragment in str(ns[var])


@pytest.mark.parametrize("var", ["matmul_error", "mask_error"])
def test_quoted_error_messages_are_the_real_ones(run, var):
    ns, _, _ = run
    text = DOC.read_text(encoding="utf-8")
    assert "```\n" + str(ns[var]) + "\n```" in text, f"the message the page quotes for {var} is stale"


def test_dry_run_table_is_the_real_one(run):
    ns, printed, _ = run
    quoted = DOC.read_text(encoding="utf-8").split("The printed table starts like this:\n\n```text\n", 1)[1]
    quoted = quoted.split("```", 1)[0].splitlines()
    assert str(ns["trace"]).splitlines()[:len(quoted)] == quoted
    assert ns["trace"].total_flops == 2 * 2 * 64 * 4096 * 4096 * 128
    assert "scores: (batch=64, seq=4096, key=4096) float32 on meta" in printed
