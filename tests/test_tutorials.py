"""The tutorials run top to bottom on this machine, each in under two minutes, without an error."""

import re
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"
NOTEBOOKS = ["01_named_tensors.ipynb", "02_attention.ipynb", "03_converting_code.ipynb", "04_autograd.ipynb",
             "05_gpu.ipynb", "06_porting_a_pytorch_model.ipynb", "07_compiling.ipynb"]


def test_the_tutorials_are_all_here():
    assert sorted(p.name for p in TUTORIALS.glob("*.ipynb")) == NOTEBOOKS


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs(name, tmp_path):
    saved = nbformat.read(TUTORIALS / name, as_version=4)
    code = [c for c in saved.cells if c.cell_type == "code"]
    assert code and all(c.execution_count for c in code), f"{name} is not saved with its outputs"
    assert not any(o.output_type == "error" for c in code for o in c.outputs), f"{name} was saved with an error"
    # a cell that raises fails the run (CellExecutionError); errors shown on purpose are caught in their
    # cell; the timeout (per cell) turns a hang into a failure
    NotebookClient(saved, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()


def test_readme_links_them_in_reading_order():
    readme = (TUTORIALS.parent / "README.md").read_text()
    linked = list(dict.fromkeys(re.findall(r"tutorials/(\d\d_\w+\.ipynb)", readme)))
    assert linked == NOTEBOOKS
