"""Regenerate expected_findings_{base,opt}.json: what diagnose finds on the engine's own profiles of the pair.

    python tests/data/h200_pair/make_expected_findings.py

Run it when a change to attribution or to a rule changes the findings on purpose, and say why.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2]))

from profiler_core.analysis import diagnose  # noqa: E402
from profiler_core.atomic_write import write_text_atomic  # noqa: E402
from tests.analysis.real_profiles import pair_profile  # noqa: E402


def expected(variant: str) -> dict[str, list[dict[str, object]]]:
    report = diagnose(pair_profile(variant))
    return {"findings": [{"rule_id": f.rule_id, "transformation": f.transformation, "kind": f.kind.value,
                          "operators": f.operators, "confidence": f.confidence.value,
                          "gain_bound_pct": round(f.gain_bound_pct, 1)} for f in report.findings]}


def main() -> None:
    for variant in ("base", "opt"):
        write_text_atomic(HERE / f"expected_findings_{variant}.json", json.dumps(expected(variant), indent=1) + "\n")


if __name__ == "__main__":
    main()
