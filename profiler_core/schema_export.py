"""Regenerate the committed ``profile.schema.json``: ``python -m profiler_core.schema_export``."""

from __future__ import annotations

import json

from profiler_core.atomic_write import write_text_atomic
from profiler_core.schema import SCHEMA_PATH, profile_json_schema

if __name__ == "__main__":
    write_text_atomic(SCHEMA_PATH, json.dumps(profile_json_schema(), indent=1, sort_keys=True) + "\n")
    print(SCHEMA_PATH)
