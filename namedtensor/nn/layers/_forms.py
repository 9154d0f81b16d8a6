"""A layer's two call signatures: PyTorch's, by sizes, and the named one, by dim names.

``nn.Linear(4, 8)`` is PyTorch's ``Linear(in_features, out_features)`` and acts on the last dim,
whatever its name; ``nn.Linear("embed", "hidden", 4, 8)`` is the named form.  Each layer describes
its two signatures as the signatures of two functions, and a rule on the arguments' types says
which one a call means (:class:`Forms`).  A call that fits neither, or mixes them, is a TypeError
that shows both, so that a PyTorch call never silently means something else.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Dict, Iterable, Set, Tuple


def _plain(fn: Callable) -> str:
    """``fn``'s signature as a call reads it: no annotations (they are strings here), no return."""
    sig = inspect.signature(fn)
    params = [p.replace(annotation=p.empty) for p in sig.parameters.values()]
    return str(sig.replace(parameters=params, return_annotation=sig.empty))


def is_size(v: Any) -> bool:
    """An int that is not a bool (``True`` is not a size)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_sizes(v: Any) -> bool:
    """An int, or a non-empty tuple or list of ints (``torch.Size`` included): a PyTorch shape."""
    if isinstance(v, (tuple, list)):
        return bool(v) and all(is_size(s) for s in v)
    return is_size(v)


def argument(args: tuple, kwargs: dict, position: int, *keywords: str) -> Any:
    """The argument at ``position`` or given by one of ``keywords``; None when there is none."""
    if len(args) > position:
        return args[position]
    return next((kwargs[k] for k in keywords if k in kwargs), None)


class Forms:
    """PyTorch's signature (the function ``pytorch``) and the named one (``named``) of ``layer``;
    ``is_pytorch(args, kwargs)`` says which one a call means."""

    def __init__(self, layer: str, pytorch: Callable, named: Callable,
                 is_pytorch: Callable[[tuple, dict], bool]) -> None:
        self.layer = layer
        self._is_pytorch = is_pytorch
        self._signatures = {True: inspect.signature(pytorch), False: inspect.signature(named)}
        self._usage = (f"{layer} takes PyTorch's signature {layer}{_plain(pytorch)}, which acts on the last "
                       f"dim(s) whatever their names, or the named one {layer}{_plain(named)}")

    def bind(self, args: tuple, kwargs: dict) -> Tuple[bool, Dict[str, Any], Set[str]]:
        """``(pytorch, arguments, given)``: which form the call is, every argument of that form by name
        (defaults filled in), and the names of the arguments the call gave."""
        pytorch = self._is_pytorch(args, kwargs)
        try:
            bound = self._signatures[pytorch].bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(str(e)) from None
        given = set(bound.arguments)
        bound.apply_defaults()
        return pytorch, dict(bound.arguments), given

    def error(self, problem: str) -> TypeError:
        """A TypeError about this layer's arguments that shows both signatures."""
        return TypeError(f"{self.layer}: {problem}. {self._usage}.")

    def check(self, arguments: Dict[str, Any], ok: Callable[[Any], bool], what: str, keys: Iterable[str]) -> None:
        """Each of ``keys`` in ``arguments`` satisfies ``ok``, else the error says it must be ``what``."""
        for key in keys:
            if not ok(arguments[key]):
                raise self.error(f"{key} must be {what}, got {arguments[key]!r}")


def is_name(v: Any) -> bool:
    """A dim name or None (unnamed: the layer finds the dim by position)."""
    return v is None or isinstance(v, str)


def refuse_names(layer: str, given: Iterable[str]) -> None:
    """A layer built with ``dim=None`` finds its dims by position: names given for them would be ignored."""
    given = sorted(given)
    if given:
        raise TypeError(f"{layer}: with dim=None the layer finds its dims by position, so {', '.join(given)} "
                        "cannot be given; name the dim (e.g. 'embed') to use named dims.")


def refuse_inplace(layer: str, inplace: bool) -> None:
    """PyTorch's ``inplace=True`` overwrites the input; namedtensor's layers never do."""
    if inplace:
        raise NotImplementedError(f"{layer}: inplace=True is not supported (namedtensor's layers never overwrite "
                                  "their input); use inplace=False, the default, which gives the same values.")
