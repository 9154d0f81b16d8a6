"""tools/array_api_conformance.py: the cases docs/converting.md lists as failing, and the check of a run."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("array_api_conformance", ROOT / "tools" / "array_api_conformance.py")
tool = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tool)


def test_the_docs_list_each_known_failure_with_a_reason():
    known = tool.known_failures((ROOT / "docs" / "converting.md").read_text(encoding="utf-8"))
    assert known == ["test_binary[__floordiv__(", "test_iop[__ifloordiv__("]


def test_a_bullet_without_a_reason_is_no_known_failure():
    text = "### Array API conformance\n\n- `test_a`: the reason\n- `test_b`:\n- `test_c` no colon\n\n## Next\n- `x`: y\n"
    assert tool.known_failures(text) == ["test_a"]
