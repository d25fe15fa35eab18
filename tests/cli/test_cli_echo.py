"""The CLI echoes at most a prefix of a bad value: a huge path or name is one short line, not all of it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from profiler_core.cli import load_commands
from profiler_core.echo import KEEP_CHARS, MESSAGE_CHARS, clip_message, shown


@pytest.mark.parametrize("length", [3000, 100_000])
def test_a_huge_profile_path_is_echoed_as_a_prefix(tmp_path: Path, length: int) -> None:
    result = CliRunner().invoke(load_commands(), ["summary", str(tmp_path / ("Q" * length))])
    assert result.exit_code == 2, result.output
    text = result.output
    assert "Q" * 20 in text and "Q" * (KEEP_CHARS + 50) not in text.replace("\n", ""), text[:300]
    assert len(text) < 800 and "Traceback" not in text


def test_shown_keeps_a_prefix_and_says_how_long() -> None:
    assert shown("aten::mm#0") == "'aten::mm#0'"
    assert shown("Q" * 5000) == f"{'Q' * KEEP_CHARS!r}... (5000 characters)"


def test_clip_message_cuts_long_tokens_and_keeps_the_fix() -> None:
    short = "kernels[3] (id 3): duration_ns 5 differs; re-run 'oprof attribute'"
    assert clip_message(short) == short
    clipped = clip_message(f"/ws/{'Q' * 5000}: no such profile; run 'oprof attribute' to make one")
    assert clipped.startswith("/ws/QQQ") and "(5004 characters): no such profile" in clipped
    words = clip_message(" ".join(["word"] * 2000) + " FIX")
    assert len(words) < MESSAGE_CHARS + 100 and words.endswith("FIX")
