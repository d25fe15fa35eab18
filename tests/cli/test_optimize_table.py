"""The trials table's reason column: the worst leaf's clause, never cut inside a number."""

from __future__ import annotations

from profiler_core.cli.optimize import _brief

REASON = ("output past_key_values.layers[1].keys: 23117 of 524288 elements outside rtol=0.05, atol=0.05 "
          "(max abs err 1.36, max rel err 20.2); output past_key_values.layers[5].keys: 19771 of 524288 "
          "elements outside rtol=0.05, atol=0.05 (max abs err 1.05, max rel err 20)")


def test_brief_keeps_the_first_leaf_whole() -> None:
    brief = _brief(REASON)
    assert brief.startswith("output past_key_values.layers[1].keys: 23117 of 524288 elements outside rtol=0.05, ")
    assert brief.endswith("(max abs err 1.36, max rel err 20.2) ...")


def test_brief_cuts_a_long_clause_at_a_word() -> None:
    brief = _brief(REASON.split("; ")[0], width=80)
    assert brief.endswith(" ...") and "rtol=0.0 " not in brief
    assert brief[:-4] == REASON[:len(brief) - 4] and REASON[len(brief) - 4] == " "
    assert _brief("not faster") == "not faster"
