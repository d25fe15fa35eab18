"""Large numpy arrays on ordinary pages while a command reads and analyses a profile.

NumPy asks the kernel for transparent huge pages (``madvise(MADV_HUGEPAGE)``) for every array of
4 MiB or more. Attributing or analysing a large profile makes and frees thousands of such
temporaries, and each first touch of a huge page zeroes 2 MiB, at times after compacting memory
to find one. On this project's 2-core CI-class machine (THP in ``madvise`` mode) that was most of
the commands' system time, with the same peak:

    oprof diagnose, 1M kernels:   1.8-3.6 s system  ->  0.8 s
    oprof attribute, 1M kernels:  3.9 s system      ->  1.6-1.7 s
    oprof summary, 1M kernels:    2.7 s CPU         ->  1.2 s

So the reading and analysis commands run with NumPy's huge-page advice off and restore it after.
A user's own ``NUMPY_MADVISE_HUGEPAGE`` is left in force. Nothing here reaches a workload: the
setting is the NumPy of this process, not an environment variable its children inherit.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager


def _advice_setter() -> Callable[[bool], bool] | None:
    """NumPy's switch for huge-page advice (it returns the previous setting), where it has one."""
    import numpy as np

    core = getattr(np, "_core", None) or getattr(np, "core", None)
    setter = getattr(getattr(core, "multiarray", None), "_set_madvise_hugepage", None)
    return setter if callable(setter) else None


@contextmanager
def small_pages() -> Iterator[None]:
    """NumPy's huge-page advice off for the block (unless ``NUMPY_MADVISE_HUGEPAGE`` is set), then
    restored."""
    setter = None if "NUMPY_MADVISE_HUGEPAGE" in os.environ else _advice_setter()
    if setter is None:
        yield
        return
    previous = setter(False)
    try:
        yield
    finally:
        setter(previous)
