"""Modules above ``ops`` use only ``namedtensor._internal`` and the public API (see ``_internal``'s docstring).

A scan of their source (function-level code included) fails on a tensor's private slots or methods
used on anything but ``self``/``cls``, and on another namedtensor module's underscore names:
``from X import _name``, ``module._name``, or a private module such as ``ops._common``.  Underscore
names shared within one subpackage (``distributed``, ``nn``...) are allowed, and so are the modules
``_names``/``_dtypes`` (their public functions) and ``_internal``.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import namedtensor
from namedtensor.tensor import Tensor

PACKAGE = Path(namedtensor.__file__).parent

#: the modules above ops: subpackages and single modules, relative to the package
UPPER = ("nn", "optim", "distributed", "testing", "serialization.py", "data.py", "interop.py", "display.py",
         "cuda.py", "checking.py", "tracing.py", "profiler.py", "compiler", "numpy_protocols.py", "onnx", "quantization")

#: private modules whose public names (or, for ``_internal``, all names) any module may use
OPEN_MODULES = frozenset({"_names", "_dtypes", "_internal", "_atomic_file"})


def _private(name: str) -> bool:
    """An underscore name that is not a dunder (``__init__``) or a protocol hook (``_repr_html_``)."""
    return name.startswith("_") and not name.endswith("_")


#: the Tensor's private slots and methods (the ones named in the issue, and any added since)
SLOTS = frozenset({"_data", "_B", "_make", "_names", "_rg", "_node", "_bump", "_vc", "_grad", "_idx"}
                  | {n for n in Tensor.__slots__ if _private(n)}
                  | {n for n in vars(Tensor) if _private(n)})


def _module_name(rel: Path) -> str:
    """``nn/module.py`` -> ``namedtensor.nn.module`` (a package's ``__init__.py`` is the package)."""
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["namedtensor", *parts])


def _subpackage(module: str, is_package: bool = False) -> Optional[str]:
    """The top-level subpackage holding ``module`` (``nn`` for ``namedtensor.nn.layers.linear``), or
    None for the package's own top-level modules."""
    parts = module.split(".")
    if len(parts) > 2 or (is_package and len(parts) == 2):
        return parts[1]
    return None


def _private_parts(dotted: str) -> List[str]:
    return [p for p in dotted.split(".")[1:] if _private(p) and p not in OPEN_MODULES]


def violations(source: str, rel: str) -> List[str]:
    """``rel:line: what`` for every use of internals that ``_internal`` should provide, in ``source``
    (the text of the module at ``rel``, a path relative to the package), in line order."""
    path = Path(rel)
    module = _module_name(path)
    is_package = path.name == "__init__.py"
    here = _subpackage(module, is_package)
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    found: List[tuple] = []
    bound: Dict[str, str] = {}  # local name -> the namedtensor module or object imported under it

    def report(node: ast.AST, what: str) -> None:
        found.append((node.lineno, node.col_offset, f"{rel}:{node.lineno}: {what}"))

    def foreign(target: str) -> bool:
        return here is None or _subpackage(target, True) != here

    def check_import(node: ast.AST, full: str) -> None:
        if _private_parts(full) and foreign(full):
            report(node, f"imports {full}, a private name")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] == "namedtensor":
                for alias in node.names:
                    bound[alias.asname or alias.name] = f"{target}.{alias.name}"
                    check_import(node, f"{target}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "namedtensor":
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    check_import(node, alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or not _private(node.attr):
            continue
        owner = node.value.id if isinstance(node.value, ast.Name) else None
        if owner in ("self", "cls"):
            continue
        if owner in bound and foreign(bound[owner]):
            report(node, f"{owner}.{node.attr}: a private name of {bound[owner]}")
        elif node.attr in SLOTS:
            report(node, f"{ast.unparse(node.value)}.{node.attr}: a tensor's private slot or method")
    return [text for _, _, text in sorted(found)]


def _upper_files() -> List[Path]:
    files = []
    for entry in UPPER:
        p = PACKAGE / entry
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    return files


def test_the_scan_covers_the_modules_above_ops():
    files = _upper_files()
    assert all(f.exists() for f in files)
    rels = {f.relative_to(PACKAGE).as_posix() for f in files}
    assert {"nn/module.py", "nn/layers/linear.py", "optim/optimizer.py", "distributed/ddp.py", "testing/gradcheck.py",
            "serialization.py", "numpy_protocols.py"} <= rels


def test_modules_above_ops_use_only_the_internal_api():
    found = []
    for f in _upper_files():
        found += violations(f.read_text(encoding="utf-8"), f.relative_to(PACKAGE).as_posix())
    assert not found, "modules above ops reach into internals:\n" + "\n".join(found)


BAD = textwrap.dedent("""\
    from .. import _names, backends
    from .._names import fmt, _check_name
    from ..ops._common import operand
    from ..tensor import Tensor
    from ..distributed.group import _require


    def f(t, g):
        x = t._data
        g._bump()
        u = Tensor._make(x, t._names, t._B)
        _names._check_name("a", "f")
        backends._devices.clear()

        def inner(p):
            from ..ops.dtype import _target

            return p._rg and p.grad_fn
        return u, inner
""")

GOOD = textwrap.dedent("""\
    from .. import _names
    from .._internal import raw, wrap
    from .._names import fmt
    from .module import _helper
    from . import _private_module


    class P:
        def m(self, t):
            self._data = raw(t)
            _private_module._x()
            container._modules.clear()
            return wrap(self._data, _names.validate(t.names, t.ndim, "m"), cls._B), fmt(t.names), _helper
""")


def test_the_scan_lists_each_use_of_internals_with_file_and_line():
    assert violations(BAD, "nn/bad.py") == [
        "nn/bad.py:2: imports namedtensor._names._check_name, a private name",
        "nn/bad.py:3: imports namedtensor.ops._common.operand, a private name",
        "nn/bad.py:5: imports namedtensor.distributed.group._require, a private name",
        "nn/bad.py:9: t._data: a tensor's private slot or method",
        "nn/bad.py:10: g._bump: a tensor's private slot or method",
        "nn/bad.py:11: Tensor._make: a private name of namedtensor.tensor.Tensor",
        "nn/bad.py:11: t._names: a tensor's private slot or method",
        "nn/bad.py:11: t._B: a tensor's private slot or method",
        "nn/bad.py:12: _names._check_name: a private name of namedtensor._names",
        "nn/bad.py:13: backends._devices: a private name of namedtensor.backends",
        "nn/bad.py:16: imports namedtensor.ops.dtype._target, a private name",
        "nn/bad.py:18: p._rg: a tensor's private slot or method",
    ]


CROSS = textwrap.dedent("""\
    from ..nn.module import _helper
    from ..nn import _private_module

    _private_module._x(_helper)
""")


def test_the_scan_allows_self_the_internal_api_and_one_subpackage():
    assert violations(GOOD, "nn/good.py") == []
    assert violations(CROSS, "nn/cross.py") == []
    # the same underscore names, used from another subpackage, are refused
    assert violations(CROSS, "optim/cross.py") == [
        "optim/cross.py:1: imports namedtensor.nn.module._helper, a private name",
        "optim/cross.py:2: imports namedtensor.nn._private_module, a private name",
        "optim/cross.py:4: _private_module._x: a private name of namedtensor.nn._private_module",
    ]
