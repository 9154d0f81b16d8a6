"""The base through which static type checkers see the methods that ops attach to ``Tensor``.

At run time the class is empty (the op modules install their functions on ``Tensor`` itself, see
``tensor.install_methods``); its stub ``_tensor_methods.pyi``, written by ``tools/stubgen.py``
from those functions' signatures, declares every one of them for mypy and pyright.
"""


class TensorMethods:
    __slots__ = ()
