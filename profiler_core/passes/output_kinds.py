"""What kind each output is, and the measures its users judge it by.

A leaf's path and value say what it is (``logits`` of shape (batch, positions, vocab): a
language model's logits; ``router_logits[3]``: an MoE router's; ``cache.layers[0].keys``: an
intermediate), and each kind has its measure::

    lm_logits      next-token (top-1) agreement, top-k overlap and KL divergence over positions;
                   where the top-1 differs, each side's token must be in the other's top-k
    token_ids      greedy agreement; where a sequence diverges, each side's token in the other's
                   top-k of that step's scores (vLLM's check_logprobs_close), when scores are there
    generation_scores  generate()'s per-step scores: the calibrated rule, reported; the tokens decide
                   (after a divergence the two sides score different prefixes)
    router_logits  how many tokens chose another set of experts (then judged as an intermediate)
    intermediate   KV caches, hidden states, attention maps, auxiliary losses: the calibrated
                   rule, reported, rejecting only when grossly off
    output         everything else that is floating point: the calibrated rule (policy.py)
"""

from __future__ import annotations

import re
from typing import Literal

import torch

Kind = Literal["lm_logits", "token_ids", "generation_scores", "router_logits", "intermediate", "output"]

_INTERMEDIATE = re.compile(r"(^|[.\[])(past_key_values|cache|hidden_states|attentions|aux_loss|"
                           r"cross_attentions|encoder_hidden_states|decoder_hidden_states)\b")
_ROUTER = re.compile(r"router_logits|^router:")
_SCORES = re.compile(r"^(?:scores|logits|\['(?:scores|logits)'\])\[(\d+)\]$")  # scores[3], ['scores'][3]


def leaf_kind(path: str, value: object) -> Kind:
    """The kind of one output leaf, from its path and value."""
    if not isinstance(value, torch.Tensor):
        return "output"
    if _ROUTER.search(path):
        return "router_logits"
    if _SCORES.match(path) and "scores" in path and value.is_floating_point():
        return "generation_scores"
    if _INTERMEDIATE.search(path):
        return "intermediate"
    last = re.split(r"[.\[]", path)[-1].strip("]'\"")
    if value.is_floating_point() and last == "logits" and value.dim() == 3 and value.shape[-1] > 1:
        return "lm_logits"
    if not value.is_floating_point() and not value.is_complex() and value.dtype != torch.bool and (
            last == "sequences" or (path == "" and value.dim() == 2)):
        return "token_ids"
    return "output"


def generation_scores(leaves: dict[str, object]) -> list[torch.Tensor]:
    """The per-step scores (or logits) ``generate(output_scores=True)`` returns, in step order."""
    steps = sorted(((int(m.group(1)), v) for p, v in leaves.items()
                    if (m := _SCORES.match(p)) and isinstance(v, torch.Tensor)), key=lambda s: s[0])
    return [v for _, v in steps]


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.double(), dim=-1)


def kl_divergence(p_logits: torch.Tensor, q_logits: torch.Tensor) -> float:
    """Mean over positions of KL(p || q), in nats, from logits."""
    lp, lq = _log_softmax(p_logits), _log_softmax(q_logits)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    return float(kl.mean()) if kl.numel() else 0.0


def logits_metrics(base: torch.Tensor, cand: torch.Tensor, top_k: int) -> dict[str, float]:
    """Agreement of two logits tensors (..., vocab): top-1, top-k overlap, near and far flips, KL."""
    b, c = base.double().flatten(0, -2), cand.double().flatten(0, -2)
    k = min(top_k, b.shape[-1])
    b_top, c_top = b.topk(k, dim=-1).indices, c.topk(k, dim=-1).indices
    b1, c1 = b_top[:, 0], c_top[:, 0]
    agree = b1 == c1
    overlap = (b_top.unsqueeze(-1) == c_top.unsqueeze(-2)).any(-1).sum(-1).double() / k
    b_in_c = (c_top == b1.unsqueeze(-1)).any(-1)
    c_in_b = (b_top == c1.unsqueeze(-1)).any(-1)
    far = ~agree & ~(b_in_c & c_in_b)
    positions = b.shape[0]
    return {"positions": float(positions), "top1_agreement": float(agree.double().mean()) if positions else 1.0,
            "topk_overlap": float(overlap.mean()) if positions else 1.0,
            "flips": float((~agree).sum()), "far_flips": float(far.sum()), "kl": kl_divergence(base, cand)}


def token_metrics(base: torch.Tensor, cand: torch.Tensor, base_scores: list[torch.Tensor],
                  cand_scores: list[torch.Tensor], top_k: int) -> dict[str, float]:
    """Greedy agreement of generated ids (batch, length); where a row diverges, its first divergent
    step checked against the other side's top-k scores (when there are scores for that step)."""
    b, c = base.reshape(base.shape[0], -1), cand.reshape(cand.shape[0], -1)
    agree = (b == c).double()
    rows_diverged = far = unchecked = 0
    generated = len(base_scores)
    offset = b.shape[1] - generated  # the prompt precedes the generated tokens
    for row in range(b.shape[0]):
        diff = (b[row] != c[row]).nonzero()
        if not len(diff):
            continue
        rows_diverged += 1
        pos = int(diff[0])
        step = pos - offset
        if step < 0 or step >= generated or step >= len(cand_scores):
            unchecked += 1
            continue
        k = min(top_k, base_scores[step].shape[-1])
        b_top = base_scores[step][row].topk(k).indices
        c_top = cand_scores[step][row].topk(k).indices
        if not (bool((c_top == b[row, pos]).any()) and bool((b_top == c[row, pos]).any())):
            far += 1
    return {"token_agreement": float(agree.mean()) if agree.numel() else 1.0, "rows": float(b.shape[0]),
            "rows_diverged": float(rows_diverged), "far_divergences": float(far),
            "unchecked_divergences": float(unchecked)}


def expert_choices(router_logits: torch.Tensor, top_k: int) -> torch.Tensor:
    """Each token's chosen experts (tokens, k), sorted so two choices compare as sets."""
    flat = router_logits.reshape(-1, router_logits.shape[-1])
    k = min(top_k, flat.shape[-1])
    return flat.topk(k, dim=-1).indices.sort(dim=-1).values


def expert_flips(base: torch.Tensor, cand: torch.Tensor, top_k: int) -> tuple[int, int]:
    """(tokens whose set of experts differs, tokens) between two routers' logits."""
    b, c = expert_choices(base, top_k), expert_choices(cand, top_k)
    if b.shape != c.shape:
        return b.shape[0], b.shape[0]
    return int((b != c).any(-1).sum()), b.shape[0]
