"""Fixtures for the pass tests: a fresh Dynamo cache per test, examples in their small configuration."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.passes.models import EXAMPLES


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    yield
    torch._dynamo.reset()


@pytest.fixture
def small_examples(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The examples directory, with the examples set to their small CPU configurations."""
    monkeypatch.setenv("OPROF_EXAMPLE_SMALL", "1")
    return EXAMPLES
