"""Attribution tools: ``attribute`` (write profile.json) and ``get_operator`` (drill into one)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from mcp_server.arguments import KEY_CHARS, PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.models import AttributeResult, GetOperatorResult, RankRow
from mcp_server.tools import hints, load_profile
from mcp_server.views import (
    capped_warnings,
    coverage_summary,
    find_operator,
    kernel_detail,
    operator_detail,
    operator_kernels,
    showing,
    top_operators,
    total_kernel_ns,
)
from profiler_core import api
from profiler_core.profile_io import read_profile, write_profile
from profiler_core.rundir import PROFILE_NAME, RANKS_JSON
from profiler_core.schema import Profile

if TYPE_CHECKING:
    from profiler_core.distributed.attribute import MultiRankProfile


def _attribute_result(profile: Profile, out: Path, top_k: int, **extra: Any) -> AttributeResult:
    rows, shown = top_operators(profile, top_k)
    warnings, warnings_showing = capped_warnings(profile.warnings, f"all of them are in {out} under 'warnings'")
    return AttributeResult(
        profile=str(out), kernel_count=len(profile.kernels), operator_count=len(profile.operators),
        coverage=coverage_summary(profile), top_operators=rows, showing=shown,
        warnings=warnings, warnings_showing=warnings_showing, **extra,
    )


def _ranks_result(root: Path, merged: MultiRankProfile, top_k: int) -> AttributeResult:
    """A multi-rank run: rank 0's profile in full, every rank's totals, and the merged ranks.json."""
    ranks = [RankRow(rank=r.rank, profile=str(root / r.profile), kernel_count=r.kernels,
                     kernel_time_us=round(r.duration_ns / 1e3, 3), communication_us=round(r.communication_ns / 1e3, 3),
                     attributed_time_pct=round(r.attributed_time_pct, 2)) for r in merged.ranks]
    first = root / merged.ranks[0].profile
    return _attribute_result(read_profile(first), first, top_k, ranks=ranks, merged=str(root / RANKS_JSON))


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws = ctx.workspace

    @mcp.tool(title="Attribute kernels to operators",
              annotations=hints("Attribute kernels to operators", read_only=False))
    def attribute(
        run_dir: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="A run directory written by capture (holds manifest.json). Give this, or the files.")
        ] = None,
        kineto: Annotated[str | None, Field(max_length=PATH_CHARS,
                                            description="torch.profiler (Kineto) trace, .json or .json.gz.")
                          ] = None,
        nsys: Annotated[str | None, Field(max_length=PATH_CHARS,
                                          description="Nsight Systems SQLite export (.sqlite).")] = None,
        ncu: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Nsight Compute counters: raw CSV (--page raw --csv) or .ncu-rep.")] = None,
        inductor: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Inductor artifacts: a TORCH_TRACE directory or .tgz, or an output-code log.")
        ] = None,
        output: Annotated[str | None, Field(max_length=PATH_CHARS,
            description="Where to write profile.json; default <run_dir>/profile.json, "
                        "or profile.json beside the timeline file.")] = None,
        allow_partial: Annotated[bool, Field(
            description="Keep launches that do not join as explicit holes instead of failing.")] = False,
        top_k: Annotated[int, Field(ge=1, le=50, description="Operators to list, by kernel time.")] = 10,
    ) -> AttributeResult:
        """Join the timeline, hardware counters and PyTorch records of one capture into profile.json.

        Every kernel gets its operator, the evidence tier and confidence behind that, and its
        counters (measured, inherited from its launch configuration, or missing). Returns the
        coverage by tier, the top operators and the path of the profile written.
        """
        with tool_errors(ws):
            files = {"kineto": kineto, "nsys": nsys, "ncu": ncu, "inductor": inductor}
            given = {k: ws.existing(v, what=f"{k} artifact") for k, v in files.items() if v}
            root = ws.existing_dir(run_dir, what="run directory") if run_dir else None
            done = api.attribute(root, kineto=given.get("kineto"), nsys=given.get("nsys"), ncu=given.get("ncu"),
                                 inductor=given.get("inductor"), allow_partial=allow_partial)
            if done.ranks is not None and root is not None:
                return _ranks_result(root, done.ranks, top_k)
            profile = done.single()
            default_out = (root or (given.get("nsys") or given["kineto"]).parent) / PROFILE_NAME
            out = ws.output_file(output or default_out, kind="profile")
            write_profile(out, profile)
            return _attribute_result(profile, out, top_k)

    @mcp.tool(title="Inspect one operator", annotations=hints("Inspect one operator", read_only=True))
    def get_operator(
        profile: Annotated[str, Field(max_length=PATH_CHARS,
                                      description="A profile.json written by attribute, or its run directory.")],
        operator: Annotated[str, Field(max_length=KEY_CHARS,
            description="Operator key such as 'aten::addmm#0' (from attribute or report), "
                        "or a bare name when only one call has it.")],
        max_kernels: Annotated[int, Field(ge=1, le=25, description="Kernels to list, longest first.")] = 10,
    ) -> GetOperatorResult:
        """One operator's identity, aggregated counters, and its kernels with their evidence and counters."""
        with tool_errors(ws):
            path, prof = load_profile(ws, profile)
            op = find_operator(prof, operator)
            kernels = sorted(operator_kernels(prof, op), key=lambda k: -k.duration_ns)
            listed = [kernel_detail(k) for k in kernels[:max_kernels]]
            return GetOperatorResult(
                profile=str(path), operator=operator_detail(op, total_kernel_ns(prof)), kernels=listed,
                showing=showing(len(listed), len(kernels), "kernels, longest first",
                                "raise max_kernels to see more"),
            )

