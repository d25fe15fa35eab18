"""Attribution tools: ``attribute`` (write profile.json) and ``get_operator`` (drill into one)."""

from __future__ import annotations

from typing import Annotated

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from mcp_server.config import ToolContext
from mcp_server.errors import backend, tool_errors
from mcp_server.models import AttributeResult, GetOperatorResult
from mcp_server.tools import hints, load_profile
from mcp_server.views import (
    capped_warnings,
    coverage_summary,
    find_operator,
    kernel_detail,
    operator_detail,
    showing,
    top_operators,
    total_kernel_ns,
)
from profiler_core.schema import write_profile


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws = ctx.workspace

    @mcp.tool(title="Attribute kernels to operators",
              annotations=hints("Attribute kernels to operators", read_only=False))
    def attribute(
        run_dir: Annotated[str | None, Field(
            description="A run directory written by capture (holds manifest.json). Give this, or the files.")
        ] = None,
        kineto: Annotated[str | None, Field(description="torch.profiler (Kineto) trace, .json or .json.gz.")
                          ] = None,
        nsys: Annotated[str | None, Field(description="Nsight Systems SQLite export (.sqlite).")] = None,
        ncu: Annotated[str | None, Field(
            description="Nsight Compute counters: raw CSV (--page raw --csv) or .ncu-rep.")] = None,
        inductor: Annotated[str | None, Field(
            description="Inductor artifacts: a TORCH_TRACE directory or .tgz, or an output-code log.")
        ] = None,
        output: Annotated[str | None, Field(
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
            if run_dir and given:
                raise ToolError("give either run_dir or the artifact files (kineto, nsys, ncu, inductor), "
                                "not both")
            if run_dir:
                root = ws.existing_dir(run_dir, what="run directory")
                attribute_run = backend("profiler_core.attribution", "attribute_run")
                profile = attribute_run(root, allow_partial=allow_partial)
                default_out = root / "profile.json"
            elif given:
                if "kineto" not in given and "nsys" not in given:
                    raise ToolError("no timeline given: pass kineto (a trace .json) and/or nsys "
                                    "(a .sqlite export)")
                profile = backend("profiler_core.attribution", "attribute_files")(
                    **given, allow_partial=allow_partial)
                default_out = (given.get("nsys") or given["kineto"]).parent / "profile.json"
            else:
                raise ToolError("nothing to attribute: pass run_dir (see list_runs), or kineto/nsys with ncu")
            out = ws.output_file(output or default_out, kind="profile")
            write_profile(out, profile)
            rows, shown = top_operators(profile, top_k)
            warnings, warnings_showing = capped_warnings(profile.warnings,
                                                         f"all of them are in {out} under 'warnings'")
            return AttributeResult(
                profile=str(out), kernel_count=len(profile.kernels), operator_count=len(profile.operators),
                coverage=coverage_summary(profile), top_operators=rows, showing=shown,
                warnings=warnings, warnings_showing=warnings_showing,
            )

    @mcp.tool(title="Inspect one operator", annotations=hints("Inspect one operator", read_only=True))
    def get_operator(
        profile: Annotated[str, Field(description="A profile.json written by attribute.")],
        operator: Annotated[str, Field(
            description="Operator key such as 'aten::addmm#0' (from attribute or report), "
                        "or a bare name when only one call has it.")],
        max_kernels: Annotated[int, Field(ge=1, le=25, description="Kernels to list, longest first.")] = 10,
    ) -> GetOperatorResult:
        """One operator's identity, aggregated counters, and its kernels with their evidence and counters."""
        with tool_errors(ws):
            path, prof = load_profile(ws, profile)
            op = find_operator(prof, operator)
            by_id = {k.id: k for k in prof.kernels}
            kernels = sorted((by_id[i] for i in op.kernel_ids if i in by_id), key=lambda k: -k.duration_ns)
            listed = [kernel_detail(k) for k in kernels[:max_kernels]]
            return GetOperatorResult(
                profile=str(path), operator=operator_detail(op, total_kernel_ns(prof)), kernels=listed,
                showing=showing(len(listed), len(kernels), "kernels, longest first",
                                "raise max_kernels to see more"),
            )

