"""Bounds on the tools' string arguments, so no argument costs more than its kind can need.

Every string argument of every tool carries ``max_length`` (tests check the published input
schemas): a path at most ``PATH_CHARS`` (the same bound the input gate puts on any path), an
operator key or pass name ``KEY_CHARS``, a job id ``ID_CHARS``. A longer value is refused by
argument validation before the tool runs, and no error echoes more than a short prefix of it.
"""

from __future__ import annotations

from profiler_core.confinement import MAX_PATH_CHARS

PATH_CHARS = MAX_PATH_CHARS  # file and directory arguments
KEY_CHARS = 2048  # operator keys ('<name>#<call index>'), pass names
ID_CHARS = 64  # job ids ('cap-...')
