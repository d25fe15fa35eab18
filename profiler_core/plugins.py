"""Loading plugin modules advertised under an entry-point group (passes, diagnosis rules)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from importlib.metadata import EntryPoint

from profiler_core.errors import ProfilerError

log = logging.getLogger(__name__)


def load_plugin_modules(entries: Iterable[EntryPoint], kind: str, error: type[ProfilerError]) -> None:
    """Import each entry point's module; one that fails is ``error`` naming the plugin, its package and the fix."""
    for ep in entries:
        try:
            ep.load()
        except Exception as err:
            dist = ep.dist.name if ep.dist is not None else "unknown distribution"
            raise error(
                f"{kind} plugin '{ep.name}' ({ep.value}, from {dist}) failed to load: "
                f"{type(err).__name__}: {err}; fix or uninstall that package"
            ) from err
        log.debug("loaded %s plugin %s = %s", kind, ep.name, ep.value)
