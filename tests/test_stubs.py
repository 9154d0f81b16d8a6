"""Static type checkers see every Tensor method and the ``Named[Tensor, ...]`` annotations."""

import importlib.util
import os
import textwrap
from pathlib import Path

from mypy import api as mypy_api

import namedtensor as nt

ROOT = Path(nt.__file__).resolve().parents[1]


def stubgen():
    spec = importlib.util.spec_from_file_location("stubgen", ROOT / "tools" / "stubgen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_stubs_are_current():
    gen = stubgen()
    assert gen.STUB.read_text() == gen.render(), "the Tensor method stub is stale: run python tools/stubgen.py"


def test_op_modules_have_no_hand_kept_stubs():
    """mypy reads the op modules' own typed definitions; a stub beside one would hide them and drift."""
    assert sorted(p.name for p in (ROOT / "namedtensor").rglob("*.pyi")) == ["_tensor_methods.pyi"]


def test_stub_declares_every_installed_method():
    text = stubgen().render()
    for name in ("sum", "softmax", "align_as", "refine_names", "to_xarray", "__add__", "__getitem__", "flatten"):
        assert f"    def {name}(self" in text


def test_mypy_sees_methods_and_names_annotations(tmp_path):
    user = tmp_path / "user.py"
    user.write_text(textwrap.dedent('''\
        import namedtensor as nt
        from namedtensor import Named, Tensor


        def pool(x: Named[Tensor, "batch", "seq", "embed"]) -> Named[Tensor, "batch", "embed"]:
            return x.softmax("embed").sum("seq")


        def use(x: Tensor) -> Tensor:
            y = pool(nt.exp(x)) + 1
            reveal_type(y.align_as(x).names)
            return y.sum(dim=2.5)


        pool(3)
        Tensor.no_such_method
        reveal_type(nt.add(nt.maximum(1.0, nt.where(nt.gt(2, 1), 0, 1)), 1).clip(0))
        nt.exp(1.0)
    '''))
    env_path = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(ROOT)  # the editable install's import hook is invisible to mypy
    try:
        out, err, status = mypy_api.run([str(user), "--follow-imports=silent", "--no-error-summary",
                                         "--cache-dir", str(tmp_path / "cache")])
    finally:
        if env_path is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = env_path
    assert status == 1, out + err
    found = {}
    for line in out.strip().splitlines():
        _, number, message = line.split(":", 2)
        found.setdefault(int(number), []).append(message)
    expected = {  # line: fragments of its one message (wording varies a little between mypy versions)
        11: ["Revealed type is", "tuple[", "str | None, ...]"],
        12: ['Argument "dim" to "sum"', '"float"', "[arg-type]"],
        15: ['Argument 1 to "pool"', '"int"; expected "Tensor"', "[arg-type]"],
        16: ["no_such_method", "[attr-defined]"],
        17: ["Revealed type is", "namedtensor.tensor.Tensor"],
        18: ['Argument 1', '"float"; expected "Tensor"', "[arg-type]"],
    }
    assert sorted(found) == sorted(expected), out
    for number, fragments in expected.items():
        assert len(found[number]) == 1 and all(f in found[number][0] for f in fragments), out
