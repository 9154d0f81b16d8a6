"""The public API is declared (``nt.__all__``), documented, and nothing else leaks.

The API's documentation is the README's API table and its Models section, and the namedtensor
column of docs/converting.md's cheat sheet. ``test_documented_api_is_declared`` reads the names in
their code spans and checks both ways: every name they mention exists, and every name in ``__all__``
(and in the ``__all__`` of ``nn``, ``nn.functional``, ``optim`` and ``data``) and every public
Tensor method is mentioned.
"""

import builtins
import importlib
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import namedtensor as nt
import namedtensor.distributed as dist
import namedtensor.nn.functional as F
import namedtensor.nn.init as init
import namedtensor.optim.lr_scheduler as lr_scheduler

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CONVERTING = (ROOT / "docs" / "converting.md").read_text(encoding="utf-8")

# nt.sum etc.: ops and dtypes named like Python's builtins, kept out of __all__ so that import * leaves them alone
BUILTIN_NAMED = {"abs", "all", "any", "bool", "compile", "complex", "float", "int", "max", "min", "pow", "round", "sum"}
LAYERS = {"autograd", "backends", "ops"}  # subpackages reachable as attributes, not exported by import *

# what a prefix in the docs' code means (``t`` is a tensor, ``.mT`` an attribute of one)
PREFIXES = {"t": nt.Tensor, "": nt.Tensor, "nn": nt.nn, "F": F, "init": init, "optim": nt.optim, "data": nt.data,
            "dist": dist, "fft": nt.fft, "special": nt.special}
TOP_LEVEL = (nt.Tensor,)  # where a bare name of the API table lives, besides nt
MODELS = (nt.Tensor, nt.nn, nt.nn.Module, F, init, nt.optim, lr_scheduler, nt.data, nt.testing)

_SPAN = re.compile(r"`([^`]+)`")
_STRING = re.compile(r"\"[^\"]*\"|'[^']*'")
_BRACKETS = re.compile(r"\([^()]*\)|\[[^\[\]]*\]|\{[^{}]*\}")
_WORDS = re.compile(r"\.?[A-Za-z_][\w.]*(?:\s+\.?[A-Za-z_][\w.]*)*")
_CHAIN = re.compile(r"(?<![\w.])(?:[A-Za-z_]\w*)?(?:\.[A-Za-z_]\w*)+")


def section(text: str, start: str, end: str = "\n## ") -> str:
    begin = text.index(start)
    stop = text.find(end, begin + len(start))
    return text[begin:stop if stop >= 0 else None]


def table_column(text: str, index: int) -> str:
    rows = [line for line in text.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
    return "\n".join(line.strip("|").split(" | ")[index] for line in rows)


def code_names(text: str) -> list:
    """The names in text's code spans: a span of bare words (``zeros ones empty``, ``rename(*names)``) gives
    each word; any other span (``a * s.align_as(a)``) only its dotted names. Strings and what brackets
    enclose (arguments, indices) are not names."""
    names = []
    for span in _SPAN.findall(text):
        code = _STRING.sub("", span)
        while _BRACKETS.search(code):
            code = _BRACKETS.sub("", code)
        code = code.strip().lstrip("@").removesuffix(".*").strip()
        names += code.split() if _WORDS.fullmatch(code) else _CHAIN.findall(code)
    return [name for name in names if name != "t"]


def parameters(namespaces) -> set:
    """Parameter names of the classes and functions in namespaces (``Linear(in_dim, ...)`` names ``in_dim``)."""
    found = set()
    for ns in namespaces:
        for name in getattr(ns, "__all__", ()):
            obj = getattr(ns, name)
            if callable(obj) and not isinstance(obj, ModuleType):
                try:
                    found |= set(inspect.signature(obj).parameters)
                except (TypeError, ValueError):
                    pass
    return found


def public_on_nt(name: str) -> bool:
    return name in nt.__all__ or (name in BUILTIN_NAMED and hasattr(nt, name))


def has_path(obj, path: str) -> bool:
    for part in path.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def exists(name: str, bare_in) -> bool:
    """Whether a documented name exists: ``nt.X`` public on nt, ``t.X`` on Tensor, a bare name in bare_in
    (or one of the prefixes above, which the docs introduce: ``namedtensor.distributed`` as ``dist``)."""
    head, dot, rest = name.partition(".")
    if not dot:
        return (name in PREFIXES or public_on_nt(name) or any(hasattr(ns, name) for ns in bare_in)
                or hasattr(nt.Tensor, f"__{name}__"))  # len iter repr: what len(t) and iter(t) call
    if head == "nt":
        return public_on_nt(rest.split(".")[0]) and has_path(nt, rest)
    if head == "namedtensor":
        try:
            return isinstance(importlib.import_module(name), ModuleType)
        except ImportError:
            return False
    return head not in PREFIXES or has_path(PREFIXES[head], rest)


def documented_words(names) -> set:
    """The words a documented name mentions, its prefix left out: ``nt.testing.gradcheck`` mentions
    ``testing`` and ``gradcheck``; ``np.exp`` is NumPy's and mentions nothing."""
    words = set()
    for name in names:
        head, dot, rest = name.partition(".")
        if not dot:
            words.add(name)
        elif head in PREFIXES or head in ("nt", "namedtensor"):
            words |= set(rest.split("."))
    return words


def test_documented_api_is_declared():
    models = section(README, "## Models").split("```\n")[-1]  # the bullets after the example
    cheat_sheet = table_column(section(CONVERTING, "## Cheat sheet", "## Worked example"), -1)
    sources = {  # where: its names, where its bare names live, the arguments its prose names
        "README's API table": (code_names(table_column(section(README, "## API overview"), 1)), TOP_LEVEL, set()),
        "README's Models section": (code_names(models), MODELS, parameters(MODELS)),
        # a bare word in the cheat sheet is a variable of its examples (``a * b``), not a name of the API
        "docs/converting.md's cheat sheet": ([n for n in code_names(cheat_sheet) if "." in n], (), set()),
    }
    missing = {}
    for where, (names, bare_in, arguments) in sources.items():
        for name in names:
            if not (exists(name, bare_in) or name in arguments):
                missing.setdefault(where, []).append(name)
    documented = documented_words(name for names, _, _ in sources.values() for name in names)
    undocumented = {
        "nt.__all__": [n for n in nt.__all__ if n not in documented],
        "Tensor's methods": [n for n in dir(nt.Tensor) if not n.startswith("_") and n not in documented],
    }
    for ns in (nt.nn, F, nt.optim, nt.data, nt.linalg, nt.fft, nt.special):
        undocumented[f"{ns.__name__}.__all__"] = [n for n in ns.__all__ if n not in documented]
    report = [f"documented in {where} but missing: {' '.join(names)}" for where, names in missing.items()]
    report += [f"in {what} but not documented: {' '.join(names)}" for what, names in undocumented.items() if names]
    assert not report, "\n".join(report)


def test_all_lists_existing_names_once():
    assert [n for n in nt.__all__ if not hasattr(nt, n)] == []
    assert sorted({n for n in nt.__all__ if nt.__all__.count(n) > 1}) == []


def test_only_public_names_are_attributes():
    # in a fresh interpreter: importing a submodule (other tests do) makes it an attribute of the package
    script = "import json, types, namedtensor as nt; print(json.dumps({n: isinstance(getattr(nt, n), " \
             "types.ModuleType) for n in dir(nt)}))"
    found = json.loads(subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                                      check=True).stdout)
    public = {n for n in found if not n.startswith("_")}
    assert sorted(public - set(nt.__all__) - BUILTIN_NAMED - LAYERS) == [], "attributes that are not the API"
    assert sorted((BUILTIN_NAMED | LAYERS) - public) == []
    private = sorted(n for n, module in found.items() if n.startswith("_") and not n.startswith("__") and not module)
    assert private == [], "private helpers left in namedtensor's namespace"
    assert sorted(n for n in nt.__all__ if found[n]) == ["cuda", "data", "fft", "linalg", "nn", "onnx", "optim",
                                                         "quantization", "special", "testing"]
    assert isinstance(nt.tensor(1.0), nt.Tensor)  # nt.tensor is the factory, not the module namedtensor.tensor


def test_import_star_leaves_builtins_alone():
    assert sorted(set(nt.__all__) & set(dir(builtins))) == []
    assert all(getattr(nt, n) is not getattr(builtins, n) for n in BUILTIN_NAMED)  # still there as nt.sum ...
    scope = {}
    exec("from namedtensor import *", scope)
    assert sorted(set(scope) & set(dir(builtins)) - {"__builtins__"}) == []
    assert eval("sum([1, 2]), max(1, 2), abs(-1), round(1.5), float(1), int('2'), bool(0)", scope) == (
        3, 2, 1, 2, 1.0, 2, False)
    assert scope["zeros"] is nt.zeros and scope["nn"] is nt.nn


def test_helper_modules_still_import_by_name():
    # not attributes of the package, but every import statement that names them works
    import namedtensor.checking as checking
    from namedtensor import display, interop, numpy_protocols, serialization
    from namedtensor.tracing import trace_shapes

    assert trace_shapes is nt.trace_shapes and serialization.save is nt.save and checking.Named is nt.Named
    assert interop.from_xarray is nt.from_xarray and numpy_protocols.lift is nt.lift
    assert nt.Tensor.plot is display.plot


def test_readme_model_example_runs(tmp_path, monkeypatch):
    # the README's Models example, run as written (it saves a checkpoint in the working directory)
    section_text = README[README.index("## Models"):]
    code = section_text.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    scope = {}
    exec(compile(code, "README.md (Models)", "exec"), scope)
    assert scope["loss"].ndim == 0 and scope["loss"].item() > 0
    assert scope["model"].head.weight.names == ("vocab", "embed")
    assert (tmp_path / "ckpt.safetensors").exists()


def test_readme_interop_example_runs():
    section_text = README[README.index("## Conversion and interop"):]
    code = section_text.split("```python\n", 1)[1].split("```", 1)[0]
    scope = {}
    exec(compile(code, "README.md (Conversion and interop)", "exec"), scope)
    assert scope["pool"](scope["x"]).names == ("batch", "embed")
    assert tuple(scope["da"].dims) == ("batch", "seq", "embed")
    trace = scope["trace"]
    assert trace.result.names == ("batch", "seq", "embed") and trace.result.shape == (4096, 2048, 8)
    assert "scaled_dot_product_attention" in trace.ops and trace.total_flops > 0
