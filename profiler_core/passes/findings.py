"""Findings as pass requests: ``--from-findings findings.json`` names the transformations to apply.

A findings file is a JSON list of findings, or an object whose ``"findings"`` key holds that
list. Each finding needs at least ``{"transformation": "<pass name or alias>"}``; a finding
whose transformation is null licenses no pass and is skipped. Anything else in a finding
(``id``, ``symptom``, ``evidence``) travels with the request into the plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from profiler_core.confinement import read_input
from profiler_core.errors import ArtifactFormatError


def read_findings(path: str | Path) -> list[dict[str, Any]]:
    """Load a findings file; ArtifactFormatError naming the file and what is wrong with it."""
    p = Path(path)
    try:
        data = orjson.loads(read_input(p, what="findings file", max_bytes=256 * 1024 * 1024))
    except FileNotFoundError as err:
        raise ArtifactFormatError(f"{p}: no such findings file; write one with 'oprof diagnose'") from err
    except (OSError, orjson.JSONDecodeError) as err:
        raise ArtifactFormatError(f"{p}: not a readable JSON findings file ({err})") from err
    if isinstance(data, dict) and "findings" in data:
        data = data["findings"]
    if not isinstance(data, list):
        raise ArtifactFormatError(f"{p}: expected a list of findings (or {{\"findings\": [...]}}), "
                                  f"got {type(data).__name__}")
    for index, finding in enumerate(data):
        if not isinstance(finding, dict) or "transformation" not in finding:
            raise ArtifactFormatError(f"{p}: finding {index} has no 'transformation' key; each finding "
                                      "needs at least {\"transformation\": \"<pass name>\"}")
        name = _transformation_name(finding)
        if name is not None and not isinstance(name, str):
            raise ArtifactFormatError(f"{p}: finding {index}: 'transformation' must be a pass name (string) "
                                      f"or null, got {type(name).__name__}")
    return data


def _transformation_name(finding: Mapping[str, Any]) -> Any:
    value = finding.get("transformation")
    if isinstance(value, Mapping):  # {"transformation": {"name": "qkv_fusion", ...}}
        return value.get("name")
    return value


def passes_named_by(findings: Sequence[Mapping[str, Any]]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(pass name, finding) for every finding that names a transformation, in file order."""
    for finding in findings:
        name = _transformation_name(finding)
        if isinstance(name, str) and name.strip():
            yield name, finding


def finding_label(finding: Mapping[str, Any], findings: Sequence[Mapping[str, Any]]) -> str:
    """How a plan names the finding that requested a pass: its id, else its position."""
    ident = finding.get("id")
    if ident is None:
        ident = next((i for i, f in enumerate(findings) if f is finding), "?")
    return f"finding {ident}"
