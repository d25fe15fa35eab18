"""Client roots (``roots/list``): the directories the client says the server should work in.

When a client declares the roots capability, the first request that touches files asks it
for its roots (file:// URIs) and the workspace follows them: they replace the default root
(the working directory), and narrow roots the operator gave with ``--root`` /
``OPROF_WORKSPACE`` (never widen them). A client without the capability, or one that cannot
answer (no back channel on a 2026 stateless connection), leaves the workspace as it was.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio

from mcp_server.workspace import Workspace

logger = logging.getLogger(__name__)

ASK_TIMEOUT_S = 5.0


def paths_of(uris: list[str]) -> list[Path]:
    """The local directories of ``file://`` root URIs (others are skipped)."""
    out = []
    for uri in uris:
        parsed = urlparse(uri)
        if parsed.scheme == "file" and parsed.netloc in ("", "localhost"):
            out.append(Path(unquote(parsed.path)))
    return out


class ClientRoots:
    """Asks the client for its roots once per connection and applies them to the workspace."""

    def __init__(self, workspace: Workspace, *, operator_roots: bool) -> None:
        self.workspace = workspace
        self.narrow_only = operator_roots  # roots given on the command line: a client only narrows them
        self._asked: set[int] = set()

    async def apply(self, context: Any) -> None:
        """Adopt the client's roots, if it offers them and this connection has not been asked yet."""
        try:
            session = context.session
            caps = context.client_capabilities
        except (AttributeError, ValueError, LookupError):  # no request context (a direct call)
            return
        if caps is None or getattr(caps, "roots", None) is None or id(session) in self._asked:
            return
        self._asked.add(id(session))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # roots/list is deprecated in the 2026 protocol, still used
                with anyio.fail_after(ASK_TIMEOUT_S):
                    result = await session.list_roots()
        except Exception as err:  # a client that declared roots but cannot answer: keep the workspace
            logger.info("the client declared roots but roots/list failed (%s); keeping %s", err,
                        ", ".join(map(str, self.workspace.roots)))
            return
        offered = paths_of([str(r.uri) for r in result.roots])
        roots = self.workspace.adopt(offered, narrow_only=self.narrow_only)
        logger.info("workspace roots from the client: %s", ", ".join(map(str, roots)))
