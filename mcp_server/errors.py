"""The tool boundary: library errors become ``ToolError`` so the model reads the message.

On MCP SDK 2.1+ only a ``ToolError`` carries its text to the client; any other exception
reaches the model as a bare "Error executing tool <name>". Every tool body therefore runs
inside :func:`tool_errors`, which also cuts any value echoed in a message to a prefix
(profiler_core/echo.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mcp.server.mcpserver.exceptions import ToolError

from mcp_server.workspace import Workspace
from profiler_core.echo import clip_message
from profiler_core.errors import ProfilerError


@contextmanager
def tool_errors(workspace: Workspace | None = None) -> Iterator[None]:
    """Turn ``ProfilerError`` and file-system errors raised inside the block into ``ToolError``.

    With ``workspace``, the block also runs confined to its roots: every input file opened
    in it must resolve inside them (see :meth:`Workspace.confined`).
    """
    try:
        if workspace is None:
            yield
        else:
            with workspace.confined():
                yield
    except ToolError as err:
        text = str(err)
        if clip_message(text) == text:
            raise
        raise ToolError(clip_message(text)) from err
    except ProfilerError as err:
        raise ToolError(clip_message(str(err))) from err
    except OSError as err:
        where = f"{err.filename}: " if err.filename else ""
        raise ToolError(clip_message(f"{where}{err.strerror or err}; check the path and its permissions")) from err
    except RecursionError as err:
        raise ToolError("an input is nested too deeply to be a capture artifact; pass the real file") from err
    except MemoryError as err:
        raise ToolError("ran out of memory reading the inputs; pass smaller artifacts") from err

