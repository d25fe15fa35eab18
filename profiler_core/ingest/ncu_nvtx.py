"""The NVTX push/pop stack Nsight Compute records for each launch (``ncu --nvtx``).

ncu writes the launching thread's stack as one cell: the thread id, then one quoted entry per
open range, outermost first, each ``<domain>:<range text>:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg``::

    797  "<default domain>:aten::linear, seq = 18, op_id = 1:none:none:none:none:none:none"  "..."
    -> ("aten::linear, seq = 18, op_id = 1", ...)

Only the range text is kept: it is what PyTorch's ``emit_nvtx`` and ``record_function`` write.
"""

from __future__ import annotations

import re

from profiler_core.errors import ArtifactFormatError

# Fallback for range texts that themselves contain quotes: the entry ends at the quote that
# follows exactly six more ':'-separated fields.
_ENTRY = re.compile(r'"[^":]*:(.*?)(?::[^:"]*){6}"(?=\s|$)')
_TRAILING_FIELDS = 6


def nvtx_stack(cell: str) -> tuple[str, ...]:
    """The push/pop range texts of one ncu NVTX cell, outermost first."""
    if not cell or cell.isspace():
        return ()
    pieces = cell.split('"')
    # Fast path: quotes only delimit entries ("tid  "e1"  "e2" "), so odd pieces are whole entries.
    if len(pieces) % 2 == 1 and "".join(pieces[0::2]).replace(" ", "").isdigit():
        texts = []
        for entry in pieces[1::2]:
            fields = entry.rsplit(":", _TRAILING_FIELDS)
            domain, colon, text = fields[0].partition(":")
            if len(fields) != _TRAILING_FIELDS + 1 or not colon:
                break
            texts.append(text)
        else:
            return tuple(texts)
    texts = _ENTRY.findall(cell)
    if not texts:
        raise ArtifactFormatError(
            f"cannot read the NVTX stack {cell[:120]!r}: expected a thread id and quoted ranges"
        )
    return tuple(texts)


def strip_nvtx_rename(name: str, stack: tuple[str, ...]) -> str:
    """The kernel's own name when ncu renamed it ``<range>/<kernel>`` (``--print-nvtx-rename kernel``)."""
    for text in reversed(stack):
        if name.startswith(text) and name[len(text):len(text) + 1] == "/":
            return name[len(text) + 1:]
    return name
