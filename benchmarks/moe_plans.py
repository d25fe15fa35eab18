"""The Mixtral example under the plans the loop can build, beside the recipe a user writes (needs a GPU).

Times, in one process with CUDA events, ``examples/hf_mixtral_moe.py`` (full size unless
OPROF_EXAMPLE_SMALL=1) as written, under autocast(bf16) + torch.compile (the recipe), under
autocast(bf16) + torch.compile(mode="reduce-overhead"), and under the plans built from the
loop's passes (moe_grouped_experts alone, with bf16_promotion, with cuda_graphs, with both).
Each row prints the median and p10-p90 over the timed iterations, the largest logit difference
from the FP32 model and the next-token agreement with it; a plan or recipe that raises prints
its error's last line. One process and one compile after another: a lead for the loop's own
end-to-end judging (fresh processes), not a replacement for it.

    python benchmarks/moe_plans.py [--iters 30] [--warmup 5] [--json-out moe_plans.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from profiler_core.optimize.walltime import time_steps  # noqa: E402

PLANS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("moe_grouped_experts", ("moe_grouped_experts",)),
    ("moe_grouped_experts + bf16_promotion", ("moe_grouped_experts", "bf16_promotion")),
    ("moe_grouped_experts + cuda_graphs", ("moe_grouped_experts", "cuda_graphs")),
    ("moe_grouped_experts + bf16_promotion + cuda_graphs", ("moe_grouped_experts", "bf16_promotion", "cuda_graphs")),
)


def _row(name: str, build: Callable[[], Callable[[], Any]], reference: Any, iters: int, warmup: int) -> dict[str, Any]:
    import torch

    torch._dynamo.reset()
    row: dict[str, Any] = {"plan": name}
    try:
        run = build()
        out = run().float()
        row["max_abs_diff"] = (out - reference).abs().max().item()
        row["next_token_agreement"] = (out.argmax(-1) == reference.argmax(-1)).float().mean().item()
        timed = time_steps(run, iters=iters, warmup=warmup, device="cuda").as_dict()
        row.update({k: timed[k] for k in ("median_ms", "p10_ms", "p90_ms")})
    except Exception as err:  # a recipe that crashes is a result (reduce-overhead on the fallback's host read)
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("moe_plans.py times on a CUDA GPU; none is visible here")
    from examples.hf_mixtral_moe import get_model_and_inputs
    from profiler_core.passes import build_optimized_model

    torch.backends.cuda.matmul.allow_tf32 = False
    base, (ids,) = get_model_and_inputs("cuda")
    with torch.no_grad():
        reference = base(ids).logits.float()

    def as_written() -> Callable[[], Any]:
        return lambda: base(ids).logits

    def recipe(mode: str | None) -> Callable[[], Callable[[], Any]]:
        def build() -> Callable[[], Any]:
            compiled = torch.compile(copy.deepcopy(base), **({"mode": mode} if mode else {}))

            def run() -> Any:
                with torch.no_grad(), torch.autocast("cuda", torch.bfloat16):
                    return compiled(ids).logits
            return run
        return build

    def plan(passes: tuple[str, ...]) -> Callable[[], Callable[[], Any]]:
        def build() -> Callable[[], Any]:
            model = build_optimized_model(copy.deepcopy(base), (ids,), passes, device="cuda")

            def run() -> Any:
                with torch.no_grad():
                    return model(ids).logits
            return run
        return build

    rows = []
    with torch.no_grad():
        rows.append(_row("as written (FP32, eager)", as_written, reference, args.iters, args.warmup))
    rows.append(_row("recipe: autocast(bf16) + torch.compile", recipe(None), reference, args.iters, args.warmup))
    rows.append(_row('recipe: autocast(bf16) + torch.compile(mode="reduce-overhead")', recipe("reduce-overhead"),
                     reference, args.iters, args.warmup))
    for name, passes in PLANS:
        rows.append(_row(f"plan: {name}", plan(passes), reference, args.iters, args.warmup))
    print("| run | median ms [p10-p90] | max abs diff | next-token agreement |")
    print("|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['plan']} | failed: {r['error']} | | |")
        else:
            print(f"| {r['plan']} | {r['median_ms']:.2f} [{r['p10_ms']:.2f}-{r['p90_ms']:.2f}] | "
                  f"{r['max_abs_diff']:.3g} | {100 * r['next_token_agreement']:.1f}% |")
    if args.json_out:
        from profiler_core.atomic_write import write_text_atomic

        write_text_atomic(args.json_out, json.dumps({"device": torch.cuda.get_device_name(), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
