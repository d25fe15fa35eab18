"""Copies and fills that CUPTI reports as kernels: the driver's own copy and set kernels.

A ``cudaMemcpyAsync`` or ``cudaMemsetAsync`` captured into a CUDA graph becomes a copy or set
node, which the driver runs as one or two kernels of its own (``memcpy32_post``, ``memset32``,
``memset32_aligned1D``, ...). Depending on the driver and on when the profiler attached, CUPTI
reports those nodes as memcpy/memset activities or as kernels under these names; Nsight
Compute never profiles them (they are not launched through the kernel launch API). Read as
kernels they would be launches ncu "missed" and kernels no operator issued; read as what they
are, they are copies: timed on the timeline, filed with the call that made them, and not
expected in the ncu report. The names are the driver's: plain identifiers without the
``void name<...>(...)`` signature every compiled C++ kernel carries.
"""

from __future__ import annotations

import re

_DRIVER_COPY = re.compile(r"^(memcpy|memset)\d*(?:_[A-Za-z0-9]+)*$")


def driver_copy_kind(name: str) -> str | None:
    """``"memcpy"`` or ``"memset"`` for a kernel name that is the driver's copy/set kernel, else None."""
    found = _DRIVER_COPY.match(name)
    return found.group(1) if found else None
