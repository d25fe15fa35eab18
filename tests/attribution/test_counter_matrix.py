"""The counter matrix the engine fills is laid out a counter at a time with a NaN row below it:
padding it for a kernel without counters is a view, never a copy of every counter."""

from __future__ import annotations

import numpy as np

from profiler_core.attribution.kernel_table import counter_matrix, padded_counters


def test_padding_a_counter_matrix_is_a_view_with_the_same_values() -> None:
    values = counter_matrix(5, 3)
    assert values.shape == (5, 3) and np.isnan(values).all()
    values[1] = [1.0, 2.0, 3.0]
    values[:, 2] = np.arange(5)
    padded = padded_counters(values)
    assert np.shares_memory(padded, values) and padded.shape == (6, 3)
    np.testing.assert_array_equal(padded[:5], values)
    assert np.isnan(padded[5]).all()
    assert padded.T.flags.c_contiguous  # a counter's values are one run


def test_any_other_matrix_is_padded_by_a_copy() -> None:
    plain = np.arange(12, dtype=float).reshape(4, 3)
    for values in (plain, plain[:3], plain.T.copy().T):
        padded = padded_counters(values)
        assert not np.shares_memory(padded, values) and padded.shape == (len(values) + 1, 3)
        np.testing.assert_array_equal(padded[:-1], values)
        assert np.isnan(padded[-1]).all()
    spoiled = counter_matrix(4, 2)
    spoiled.base[:, -1] = 7.0  # the padding row written to: a view would hand it out as counters
    assert not np.shares_memory(padded_counters(spoiled), spoiled)
    assert np.isnan(padded_counters(spoiled)[-1]).all()
