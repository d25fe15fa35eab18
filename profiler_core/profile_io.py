"""Reading, writing and checking profile.json: the models are schema.py's, and this module is
where a profile meets the disk.

    profile = read_profile("profile.json")      # validates; names the offending field
    write_profile("profile.json", profile)       # atomic: temp file + rename

A large profile's kernels and operators are Parquet tables beside profile.json
(columnar_profile.py, imported only for such a profile: numpy and pyarrow stay unloaded for a small
one); reading and writing pass through it, so this module sits with the columnar engine's layer,
above the models it reads (docs/architecture.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import orjson
from pydantic import ValidationError

from profiler_core.atomic_write import write_bytes_atomic
from profiler_core.columnar_files import TableGoneError, remove_stale_tables
from profiler_core.confinement import read_input
from profiler_core.errors import SchemaError
from profiler_core.schema import SCHEMA_VERSION, Profile, first_error


def check_references(profile: Profile) -> None:
    """Raise ``SchemaError`` at the first reference that points nowhere, or a kernel that ends before it starts.

    Checks: operator keys and kernel ids are unique; every kernel's ``attribution.operator_key``
    and every ``inherited_from`` name an operator (kernel) of this profile; every operator's
    ``kernel_ids`` and every unattributed entry name a kernel of it. A large profile's tables
    are checked column by column (attribution/table_checks.py).
    """
    if not isinstance(profile.kernels, list):
        from profiler_core.columnar_profile import columnar_references  # numpy, pyarrow: for large profiles only

        return columnar_references(profile)
    keys: set[str] = set()
    for op in profile.operators:
        if op.key in keys:
            raise SchemaError(f"operator key {op.key!r} appears twice; each operator needs its own key")
        keys.add(op.key)
    ids: set[int] = set()
    for k in profile.kernels:
        if k.id in ids:
            raise SchemaError(f"kernel id {k.id} appears twice; kernel ids are positions in timeline order")
        ids.add(k.id)
        if k.end_ns < k.start_ns:
            raise SchemaError(f"kernel {k.id} ends ({k.end_ns} ns) before it starts ({k.start_ns} ns)")
        key = k.attribution.operator_key
        if key is not None and key not in keys:
            raise SchemaError(f"kernel {k.id} is attributed to operator {key!r}, which the profile does not list")
    for k in profile.kernels:
        if k.inherited_from is not None and k.inherited_from not in ids:
            raise SchemaError(f"kernel {k.id} inherits counters from kernel {k.inherited_from}, which is not listed")
    for op in profile.operators:
        missing = next((i for i in op.kernel_ids if i not in ids), None)
        if missing is not None:
            raise SchemaError(f"operator {op.key!r} lists kernel {missing}, which the profile does not list")
        if op.inherited_from is not None and op.inherited_from not in keys:
            raise SchemaError(f"operator {op.key!r} inherits from operator {op.inherited_from!r}, which is not listed")
    for u in profile.unattributed:
        if u.kernel_id not in ids:
            raise SchemaError(f"unattributed entry names kernel {u.kernel_id}, which the profile does not list")


INDENT_MAX_KERNELS = 20_000  # above this, compact JSON: indentation doubles size and write time


def write_profile(path: str | os.PathLike[str], profile: Profile) -> Path:
    """Write ``profile`` as JSON, atomically (indented while small enough to read by eye).

    A profile whose kernels are columns (a large capture) is written as profile.json holding
    operators and coverage, plus its kernels in Parquet beside it (profiler_core/columnar_profile.py).
    """
    if not isinstance(profile.kernels, list):
        from profiler_core.columnar_profile import write_columnar_profile

        return write_columnar_profile(path, profile)
    indent = 1 if len(profile.kernels) <= INDENT_MAX_KERNELS else None
    written = write_bytes_atomic(path, profile.__pydantic_serializer__.to_json(profile, indent=indent))
    remove_stale_tables(Path(path))  # the tables of a columnar profile this one replaced
    return written




def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate a profile.json; a bad file raises ``SchemaError`` naming the field.

    Validated three ways: strict JSON (no NaN/Infinity, numbers that fit a double, nesting
    bounded), the schema, then the document's own consistency (``profile_checks``). A columnar
    profile replaced while it was being read (its tables gone with the old generation) is read
    again, once.
    """
    p = Path(path)
    try:
        return _read_profile(p)
    except TableGoneError:
        return _read_profile(p)


def _read_profile(p: Path) -> Profile:
    from profiler_core.profile_checks import profile_problem  # the chip table: loaded when a profile is read

    try:
        raw = read_input(p, what="profile.json")
    except FileNotFoundError as err:
        raise SchemaError(f"{p}: no such profile; run 'oprof attribute' to make one") from err
    except OSError as err:
        raise SchemaError(f"{p}: cannot read profile ({err.strerror or err})") from err
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise SchemaError(
            f"{p}: not valid JSON ({err}); the file is truncated, edited or not a profile.json"
        ) from err
    if not isinstance(data, dict):
        raise SchemaError(f"{p}: holds a JSON {type(data).__name__}, not a profile object; "
                          "pass a profile.json written by 'oprof attribute'")
    version = data.get("schema_version")
    if "schema_version" not in data:
        raise SchemaError(f"{p}: invalid profile, it has no schema_version: not a profile.json written by "
                          "'oprof attribute'")
    if type(version) is not int or version != SCHEMA_VERSION:
        raise SchemaError(
            f"{p}: schema_version {version!r} is not supported "
            f"(this oprof reads version {SCHEMA_VERSION}); re-run 'oprof attribute'"
        )
    try:
        profile = Profile.model_validate(data)
    except ValidationError as err:
        raise SchemaError(f"{p}: invalid profile, {first_error(err)}") from err
    if profile.kernel_table is not None:
        from profiler_core.columnar_profile import attach_kernel_table

        attach_kernel_table(p, profile)
    try:
        check_references(profile)
    except SchemaError as err:
        raise SchemaError(f"{p}: invalid profile, {err}; re-run 'oprof attribute' to rewrite it") from err
    if isinstance(profile.kernels, list):
        problem = profile_problem(profile)
    else:
        from profiler_core.columnar_profile import columnar_problem

        problem = columnar_problem(profile)
    if problem is not None:
        raise SchemaError(f"{p}: inconsistent profile, {problem}; re-run 'oprof attribute' on its run")
    return profile
