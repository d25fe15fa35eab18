"""Layer deduplication: find structurally identical repeated blocks, mark them, share counters.

Measured iterations repeat exactly, and transformer-style models repeat one block N times.
An operator's signature is (name, input shapes, kernel count); the measured region is split
into iterations, and inside the first iteration the longest tandem repeat of signatures
(at least ``MIN_BLOCK_OPS`` operators long) is taken as the layer:

    sigs: A B C  D E F  D E F  D E F  G      -> block "D E F" at 3, length 3, 3 copies
    roles: -  -  -  rep rep rep dup dup dup dup dup dup -

Duplicates point at their representative (``inherited_from``). A duplicate whose kernels
have no counters (the counter run skipped it) inherits its representative's, kernel by
kernel, marked ``inherited``; a duplicate that was measured keeps its own numbers.

The marking runs on the engine's columns (operator_build.mark_repeated_layers); this module
holds the search they share with the reference engine in the tests.
"""

from __future__ import annotations

from collections.abc import Sequence

MIN_BLOCK_OPS = 3
MAX_SEARCH_OPS = 3000  # the tandem-repeat search is quadratic; longer iterations skip it


def best_tandem_repeat(sigs: Sequence[int]) -> tuple[int, int, int] | None:
    """(start, block length, copies) of the repeat that covers the most operators."""
    n = len(sigs)
    best: tuple[int, int, int] | None = None
    best_saved = 0
    for length in range(MIN_BLOCK_OPS, n // 2 + 1):
        run = 0
        for i in range(n - length):
            if sigs[i] == sigs[i + length]:
                run += 1
                copies = run // length + 1
                saved = (copies - 1) * length
                if copies >= 2 and saved > best_saved:
                    start = i - run + 1
                    best, best_saved = (start, length, copies), saved
            else:
                run = 0
    return best
