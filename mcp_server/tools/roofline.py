"""Roofline and module tools: ``get_roofline`` (operators against the chip's roofs), ``get_modules`` (the module tree).

Both read a profile and return bounded rows; neither writes anything.
"""

from __future__ import annotations

from typing import Annotated, Literal

from mcp.server import MCPServer
from pydantic import BaseModel, ConfigDict, Field

from mcp_server.arguments import PATH_CHARS
from mcp_server.config import ToolContext
from mcp_server.errors import tool_errors
from mcp_server.tools import hints, load_profile
from mcp_server.views import showing

ProfileArg = Annotated[str, Field(max_length=PATH_CHARS,
                                  description="A profile.json written by attribute, or its run directory.")]


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RooflineRow(_Out):
    key: str
    op_class: str
    module: str | None = Field(description="nn.Module path the operator ran under ('' is the model), when known.")
    us: float
    flops: float | None
    flops_from: Literal["measured", "modelled"] | None = Field(
        description="measured: ncu's FLOP counters; modelled: from the input shapes (2MNK and friends).")
    flop_disagreement_pct: float | None = Field(description="measured vs modelled, when they differ by >25%.")
    dram_bytes: float | None
    intensity: float | None = Field(description="FLOP per DRAM byte.")
    achieved_tflops: float | None
    achieved_gbs: float | None
    roof: str | None = Field(description="The roof carrying most of its work: fp32, bf16_tensor, ...")
    bound: Literal["compute", "memory"] | None
    of_roofline_pct: float | None = Field(description="Roofline time floor / actual time, in percent.")
    headroom_us: float | None = Field(description="Time reaching the roofline would save.")


class RooflineClassRow(_Out):
    op_class: str
    us: float
    flops: float | None
    intensity: float | None
    headroom_us: float | None


class RooflineResult(_Out):
    profile: str
    chip: str | None = Field(description="The peak table entry used (metrics/peaks.py), None when unknown.")
    roofs_tflops: dict[str, float] = Field(description="Dense peak TFLOP/s per roof (measured where known).")
    bandwidth_gbs: float | None
    classes: list[RooflineClassRow]
    operators: list[RooflineRow]
    showing: str
    warnings: list[str]


class ModuleRow(_Out):
    path: str = Field(description="Module path; '' is the model itself.")
    depth: int
    us: float = Field(description="Total: its operators and its submodules'.")
    self_us: float
    share_pct: float
    kernels: int
    bottleneck: str
    of_roofline_pct: float | None


class BlockRow(_Out):
    path: str
    us: float
    vs_median: float
    of_roofline_pct: float | None


class BlockGroupRow(_Out):
    parent: str
    blocks: list[BlockRow]
    outliers: list[str] = Field(description="Blocks more than 20% off the group's median time.")


class ModulesResult(_Out):
    profile: str
    coverage_pct: float = Field(description="Share of operator time that carries a module path.")
    modules: list[ModuleRow]
    repeated_blocks: list[BlockGroupRow]
    showing: str


def _r(value: float | None, scale: float = 1.0, digits: int = 2) -> float | None:
    return None if value is None else round(value / scale, digits)


def register(mcp: MCPServer, ctx: ToolContext) -> None:
    ws = ctx.workspace

    @mcp.tool(title="Roofline of a profile", annotations=hints("Roofline of a profile", read_only=True))
    def get_roofline(
        profile: ProfileArg,
        top_k: Annotated[int, Field(ge=1, le=50, description="Operators to list, most headroom first.")] = 10,
        measured_roofs: Annotated[bool, Field(
            description="Use the roofs measured on the chip where the table has them (attainable), "
                        "else the datasheet's.")] = True,
    ) -> RooflineResult:
        """Each operator against the chip's roofs: FLOPs (measured or modelled), intensity, bound, headroom."""
        from profiler_core.analysis.roofline import roofline

        with tool_errors(ws):
            path, prof = load_profile(ws, profile)
            roof = roofline(prof, measured_roofs=measured_roofs)
            rows = [RooflineRow(
                key=r.key, op_class=r.op_class, module=r.module_path, us=round(r.duration_ns / 1e3, 2),
                flops=r.flops, flops_from=r.flop_source,
                flop_disagreement_pct=_r(r.disagreement, 0.01, 1), dram_bytes=r.dram_bytes,
                intensity=_r(r.arithmetic_intensity, 1, 3), achieved_tflops=_r(r.achieved_flops_per_s, 1e12, 3),
                achieved_gbs=_r(r.achieved_bytes_per_s, 1e9, 1), roof=r.roof, bound=r.bound,
                of_roofline_pct=_r(r.fraction_of_roofline, 0.01, 1), headroom_us=_r(r.headroom_ns, 1e3, 2),
            ) for r in roof.most_headroom(top_k)]
            roofs = {} if roof.chip is None else {
                name: round(peak / 1e12, 1) for name in roof.chip.flops
                if (peak := roof.peak(name)) is not None}
            return RooflineResult(
                profile=str(path), chip=roof.chip.key if roof.chip else None, roofs_tflops=roofs,
                bandwidth_gbs=_r(roof.bandwidth, 1e9, 0),
                classes=[RooflineClassRow(op_class=c.op_class, us=round(c.duration_ns / 1e3, 2), flops=c.flops,
                                          intensity=_r(c.arithmetic_intensity, 1, 3),
                                          headroom_us=_r(c.headroom_ns, 1e3, 2)) for c in roof.classes],
                operators=rows,
                showing=showing(len(rows), len(roof.operators), "operators, most headroom first", "raise top_k"),
                warnings=roof.warnings[:3],
            )

    @mcp.tool(title="Module tree of a profile", annotations=hints("Module tree of a profile", read_only=True))
    def get_modules(
        profile: ProfileArg,
        max_depth: Annotated[int, Field(ge=0, le=10, description="Deepest module level to list (0: the model).")
                             ] = 2,
        limit: Annotated[int, Field(ge=1, le=200, description="Modules to list, depth first.")] = 40,
    ) -> ModulesResult:
        """Time, kernels and bottleneck per nn.Module, and repeated blocks (h.0 .. h.11) side by side."""
        from profiler_core.analysis.modules import module_rollup

        with tool_errors(ws):
            path, prof = load_profile(ws, profile)
            rollup = module_rollup(prof)
            nodes = rollup.tree(max_depth=max_depth)
            total = rollup.nodes[""].duration_ns if "" in rollup.nodes else rollup.total_ns
            rows = [ModuleRow(path=n.path, depth=n.depth, us=round(n.duration_ns / 1e3, 2),
                              self_us=round(n.self_ns / 1e3, 2),
                              share_pct=round(100 * n.duration_ns / total, 2) if total else 0.0, kernels=n.kernels,
                              bottleneck=n.bottleneck, of_roofline_pct=_r(n.fraction_of_roofline, 0.01, 1))
                    for n in nodes[:limit]]
            groups = [BlockGroupRow(parent=g.parent, outliers=[b.path for b in g.outliers], blocks=[
                BlockRow(path=b.path, us=round(b.duration_ns / 1e3, 2), vs_median=round(b.vs_median, 3),
                         of_roofline_pct=_r(b.fraction_of_roofline, 0.01, 1)) for b in g.blocks])
                for g in rollup.groups[:3]]
            hint = "raise max_depth or limit" if nodes else "capture again: no kernel carries a module path"
            return ModulesResult(profile=str(path), coverage_pct=round(rollup.coverage_pct, 1), modules=rows,
                                 repeated_blocks=groups, showing=showing(len(rows), len(nodes), "modules", hint))
