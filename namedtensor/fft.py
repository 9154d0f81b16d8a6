"""``nt.fft``: PyTorch's ``torch.fft`` on named tensors, with gradients of every order.

Each transform takes its dims by name or position; the frequency dims keep the names of the dims
they replace (``out_name=``/``out_names=`` rename them).  Real input to the complex transforms is
made complex first, and ints and float16 compute as float32 (complex64), as in PyTorch.  The ops and
their name rule are in :mod:`namedtensor.ops.spectral`; the Array API standard's spellings (``axis=``,
``axes=``) are :mod:`namedtensor.array_api.fft`.
"""

from __future__ import annotations

from .ops.spectral import (fft, fft2, fftfreq, fftn, fftshift, hfft, ifft, ifft2, ifftn, ifftshift, ihfft, irfft,
                           irfft2, irfftn, rfft, rfft2, rfftfreq, rfftn)

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2", "irfft2", "rfftn", "irfftn",
           "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]
