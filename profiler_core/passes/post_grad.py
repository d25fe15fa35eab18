"""Level 2: Inductor post-grad passes that keep the FX graph cache correct and say what they did.

Inductor runs ``config.post_grad_custom_post_pass`` on the ATen graph after AOTAutograd and
decomposition. Its cache key includes the pass's ``uuid()``; ours hash the source file that
defines the pass, so editing a pass invalidates exactly the entries it produced (see
``torch._inductor.custom_graph_pass.CustomGraphPass``). Each run is recorded as a
``GraphChange`` so the plan can report it like a Level-1 rewrite.
"""

from __future__ import annotations

import inspect
from abc import abstractmethod
from collections.abc import Sequence
from typing import Any

import torch.fx
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from profiler_core.passes.contract import GraphChange


class RecordedGraphPass(CustomGraphPass):
    """A post-grad pass that records a GraphChange for every graph it runs on."""

    name: str = "post_grad_pass"

    def __init__(self) -> None:
        self.changes: list[GraphChange] = []

    def __call__(self, graph: torch.fx.Graph) -> None:
        change = self.transform(graph)
        if change.applied:
            graph.lint()
        self.changes.append(change)

    @abstractmethod
    def transform(self, graph: torch.fx.Graph) -> GraphChange:
        """Rewrite ``graph`` in place and say what changed."""

    def uuid(self) -> Any:
        """Identify this pass by its class and the text of the file defining it."""
        source = inspect.getfile(type(self))
        return (type(self).__qualname__, get_hash_for_files((source,)).hex())


class PostGradPipeline(CustomGraphPass):
    """Several post-grad passes run in order as the one pass Inductor's config holds."""

    def __init__(self, passes: Sequence[Any]) -> None:
        self.passes = tuple(passes)

    def __call__(self, graph: torch.fx.Graph) -> None:
        for graph_pass in self.passes:
            graph_pass(graph)

    def uuid(self) -> Any:
        """The members' uuids in order; None (no caching) if any member cannot name itself."""
        ids = []
        for graph_pass in self.passes:
            ident = graph_pass.uuid() if isinstance(graph_pass, CustomGraphPass) else None
            if ident is None:
                return None
            ids.append(ident)
        return tuple(ids)
