"""The package's import graph, read from the source: layers import downward only, and nothing cycles.

Every ``import`` and ``from ... import`` in ``namedtensor`` (function-level ones included) is an
edge from its module to the module it names; ``from . import x`` is an edge to the submodule ``x``
when there is one.  Each module has a layer (:data:`LAYERS`); an edge to a higher layer fails, and
so does any cycle, within a layer too.  A module that matches no pattern fails: a new module is
given its place here.  (Importing ``a.b`` also runs ``a/__init__``; that edge is the package's own,
not charged to the importer, so a package may sit above its submodules, as ``autograd`` does.)
"""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

PACKAGE = "namedtensor"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

#: (layer, module patterns), lowest first; names are relative to the package, "" is the package itself
LAYERS: Tuple[Tuple[int, Tuple[str, ...]], ...] = (
    (0, ("_names", "_dtypes", "_tensor_methods", "_atomic_file")),
    (1, ("backends", "backends.*")),
    (2, ("autograd.mode", "tensor", "autograd.graph")),
    (3, ("ops", "ops.*", "_internal", "conversion")),
    (4, ("autograd.engine", "autograd")),
    (5, ("nn", "nn.*", "optim", "optim.*")),
    (6, ("data", "distributed", "distributed.*", "serialization", "interop", "display", "numpy_protocols",
         "checking", "tracing", "profiler", "compiler", "compiler.*", "onnx", "onnx.*", "quantization", "quantization.*", "cuda", "testing", "testing.*", "demo",
         "array_api", "array_api.*", "linalg", "fft", "special",
         "")),
)


class Module(NamedTuple):
    path: str  # as shown in messages
    source: str
    is_package: bool


class Edge(NamedTuple):
    src: str
    dst: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {_show(self.src)} imports {_show(self.dst)}"


def _show(name: str) -> str:
    return PACKAGE if not name else f"{PACKAGE}.{name}"


def read_package(root: Path = ROOT) -> Dict[str, Module]:
    """Every module of the package under ``root``, by its name relative to the package."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        shown = str(path.relative_to(root.parent))
        modules[".".join(parts)] = Module(shown, path.read_text(encoding="utf-8"), is_package)
    return modules


def layer_of(name: str, layers=LAYERS) -> Optional[int]:
    for layer, patterns in layers:
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            return layer
    return None


def _known(modules, parts: List[str]) -> Optional[str]:
    """The longest prefix of ``parts`` that is a module of the package."""
    for n in range(len(parts), -1, -1):
        name = ".".join(parts[:n])
        if name in modules:
            return name
    return None


def _targets(modules, name: str, node) -> List[str]:
    """The package's modules that the import statement ``node`` in module ``name`` names."""
    if isinstance(node, ast.Import):
        bases = [a.name.split(".") for a in node.names]
        return [_known(modules, b[1:]) for b in bases if b[0] == PACKAGE]
    if node.level:
        here = name.split(".") if name else []
        package = here if modules[name].is_package else here[:-1]
        if node.level - 1 > len(package):
            raise ValueError(f"{modules[name].path}:{node.lineno}: relative import beyond the package")
        base = package[:len(package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
    else:
        parts = node.module.split(".")
        if parts[0] != PACKAGE:
            return []
        base = parts[1:]
    out = []
    for alias in node.names:
        sub = ".".join(base + [alias.name])
        out.append(sub if sub in modules else _known(modules, base))
    return out


def import_edges(modules: Dict[str, Module]) -> List[Edge]:
    """One edge per module named by an import statement, anywhere in a module (functions too)."""
    edges = []
    for name, module in modules.items():
        statements = [n for n in ast.walk(ast.parse(module.source, module.path))
                      if isinstance(n, (ast.Import, ast.ImportFrom))]
        for node in sorted(statements, key=lambda n: n.lineno):
            for dst in dict.fromkeys(_targets(modules, name, node)):
                if dst is not None and dst != name:
                    edges.append(Edge(name, dst, module.path, node.lineno))
    return edges


def unplaced(modules, layers=LAYERS) -> List[str]:
    return [f"{m.path}: {_show(name)} has no layer in LAYERS" for name, m in modules.items()
            if layer_of(name, layers) is None]


def upward(edges: List[Edge], layers=LAYERS) -> List[str]:
    out = []
    for e in edges:
        src, dst = layer_of(e.src, layers), layer_of(e.dst, layers)
        if src is not None and dst is not None and dst > src:
            out.append(f"{e} (layer {src} imports layer {dst})")
    return out


def _components(nodes, succ) -> List[List[str]]:
    """The strongly connected components of the graph (Tarjan's algorithm; the depth of its recursion
    is at most the number of modules)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in succ.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            found.append(sorted(component))

    for v in nodes:
        if v not in index:
            visit(v)
    return found


def cycles(edges: List[Edge]) -> List[str]:
    """Each group of modules that import each other (directly or around a loop), with its edges."""
    succ: Dict[str, List[str]] = {}
    for e in edges:
        succ.setdefault(e.src, []).append(e.dst)
    nodes = sorted({e.src for e in edges} | {e.dst for e in edges})
    out = []
    for component in _components(nodes, succ):
        if len(component) > 1:
            members = set(component)
            inner = "\n".join(f"    {e}" for e in edges if e.src in members and e.dst in members)
            out.append(f"cycle between {', '.join(_show(n) for n in component)}:\n{inner}")
    return out


# ----------------------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def package():
    modules = read_package()
    return modules, import_edges(modules)


def test_every_module_has_a_layer(package):
    modules, _ = package
    problems = unplaced(modules)
    assert not problems, "modules without a layer (add them to LAYERS):\n" + "\n".join(problems)


def test_no_upward_import(package):
    _, edges = package
    problems = upward(edges)
    assert not problems, "imports from a higher layer:\n" + "\n".join(problems)


def test_no_import_cycle(package):
    _, edges = package
    problems = cycles(edges)
    assert not problems, "import cycles:\n" + "\n".join(problems)


def test_the_package_is_read():
    modules = read_package()
    assert {"", "tensor", "autograd", "autograd.graph", "ops", "ops.reductions", "backends"} <= set(modules)
    assert modules["autograd"].is_package and not modules["tensor"].is_package


# ----------------------------------------------------------------------------- the checker itself


def _synthetic(**sources: str) -> Dict[str, Module]:
    """A made-up package: keyword ``a__b`` is module ``a.b``, ``a__init`` the package ``a``."""
    modules = {}
    for key, source in sources.items():
        is_package = key.endswith("__init")
        name = key[: -len("__init")].rstrip("_") if is_package else key
        name = name.replace("__", ".")
        path = f"{PACKAGE}/{name.replace('.', '/')}{'/__init__' if is_package else ''}.py"
        modules[name] = Module(path, source, is_package)
    return modules


SYNTHETIC_LAYERS = ((0, ("low", "low.*")), (1, ("high",)))


def test_checker_resolves_imports():
    modules = _synthetic(
        low__init="from . import a\nfrom .a import thing\n",
        low__a="import os\nfrom .. import high\n",
        low__b="def f():\n    from . import a, helper\n    import namedtensor.high\n",
        high="from namedtensor.low import b\nfrom .low.a import x\n",
    )
    found = {(e.src, e.dst, e.line) for e in import_edges(modules)}
    assert found == {
        ("low", "low.a", 1), ("low", "low.a", 2),  # a submodule, then a name from it
        ("low.a", "high", 2),
        ("low.b", "low.a", 2), ("low.b", "low", 2), ("low.b", "high", 3),  # function level; helper: from low
        ("high", "low.b", 1), ("high", "low.a", 2),
    }


def test_checker_reports_upward_imports_cycles_and_unplaced_modules():
    modules = _synthetic(
        low__init="",
        low__a="from . import b\n",
        low__b="def later():\n    from .a import f\n",
        low__c="from ..high import g\n",
        high="from .low import a\n",
        new="",
    )
    edges = import_edges(modules)
    assert upward(edges, SYNTHETIC_LAYERS) == [
        "namedtensor/low/c.py:1: namedtensor.low.c imports namedtensor.high (layer 0 imports layer 1)"
    ]
    assert cycles(edges) == [
        "cycle between namedtensor.low.a, namedtensor.low.b:\n"
        "    namedtensor/low/a.py:1: namedtensor.low.a imports namedtensor.low.b\n"
        "    namedtensor/low/b.py:2: namedtensor.low.b imports namedtensor.low.a"
    ]
    assert unplaced(modules, SYNTHETIC_LAYERS) == ["namedtensor/new.py: namedtensor.new has no layer in LAYERS"]


def test_checker_finds_a_longer_cycle():
    modules = _synthetic(a="from . import b\n", b="from . import c\n", c="from . import a\n", d="from . import a\n")
    (report,) = cycles(import_edges(modules))
    assert report.startswith("cycle between namedtensor.a, namedtensor.b, namedtensor.c:")
    assert "namedtensor.d" not in report
