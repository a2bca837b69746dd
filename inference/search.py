"""Greedy and beam search over any next-token scorer, deciding exactly as ``generate()`` does, for engines whose
model runs outside torch (ONNX Runtime).

A ``Step`` takes the last token of each running hypothesis (N, 1) and which hypothesis of the previous step each
one continues (N,; None: each its own, as in greedy search), reorders its own cache by that, and returns the
log-probabilities of the next token (N, vocab).
"""

from collections.abc import Callable
from dataclasses import dataclass

import torch

from vanilla_tools.decoding import Decoding

Step = Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor]
NEVER = -1.0e9  # transformers' "impossible" score


@dataclass
class Hypotheses:
    sequences: torch.Tensor  # (B * n, 1 + T): decoder start token, tokens, </s>, padding; the n best of each input
    scores: torch.Tensor  # (B * n,) log-probability / length^alpha (greedy: alpha 1)


def greedy(step: Step, batch: int, max_new_tokens: int, start: int, eos: int, pad: int) -> Hypotheses:
    """The most probable token at each step until every row has generated </s> (padding after it) or
    ``max_new_tokens``."""
    sequences = torch.full((batch, 1), start)
    finished = torch.zeros(batch, dtype=torch.bool)
    log_probability, lengths = torch.zeros(batch), torch.zeros(batch)
    for _ in range(max_new_tokens):
        scores = step(sequences[:, -1:], None)  # (B, vocab): each row continues itself
        best, token = scores.max(dim=-1)
        token = torch.where(finished, pad, token)
        log_probability += torch.where(finished, 0.0, best)
        lengths += (~finished).float()
        sequences = torch.cat([sequences, token[:, None]], dim=1)
        finished |= token == eos
        if finished.all():
            break
    return Hypotheses(sequences, log_probability / lengths)


def beam_search(
    step: Step, batch: int, decoding: Decoding, max_new_tokens: int, start: int, eos: int, pad: int
) -> Hypotheses:
    """Beam search as transformers 5 runs it (one end token, no logits processors).

    Adapted from transformers.generation.utils.GenerationMixin._beam_search and its helpers (_get_top_k_continuations,
    _get_running_beams_for_next_iteration, _update_finished_beams, _check_early_stop_heuristic,
    _beam_search_has_unfinished_sequences): the same candidates (the 2 K best continuations of the K running beams),
    the same finished-hypothesis scores (log-probability / generated length^alpha), the same stopping rules, so the
    same tokens come out."""
    k, alpha, early = decoding.num_beams, decoding.length_penalty, decoding.early_stopping
    keep, max_length = 2 * k, 1 + max_new_tokens
    running = torch.full((batch, k, max_length), pad)
    running[:, :, 0] = start
    finals = running.clone()
    running_scores = torch.zeros(batch, k)
    running_scores[:, 1:] = NEVER  # the beams start identical: only the first may expand
    final_scores = torch.full((batch, k), NEVER)
    finished = torch.zeros(batch, k, dtype=torch.bool)
    improvable = torch.ones(batch, 1, dtype=torch.bool)
    in_top_k = torch.arange(keep) < k
    origin = torch.arange(batch * k)
    offsets = torch.arange(batch)[:, None] * k
    length = 1
    while True:
        log_probs = step(running[:, :, length - 1].reshape(-1, 1), origin)  # (B * K, vocab)
        vocab = log_probs.shape[-1]
        totals = (log_probs.view(batch, k, vocab) + running_scores[:, :, None]).view(batch, k * vocab)
        top_scores, top = totals.topk(keep, dim=-1)  # (B, 2K)
        from_beam, token = top // vocab, top % vocab
        candidates = running.gather(1, from_beam[:, :, None].expand(-1, -1, max_length)).clone()
        candidates[:, :, length] = token
        stops = (token == eos) | (length + 1 >= max_length)  # (B, 2K): ended, or the length limit

        # the K best candidates that go on
        going_on = top_scores + stops.float() * NEVER
        chosen = going_on.topk(k, dim=-1).indices  # (B, K)
        running = candidates.gather(1, chosen[:, :, None].expand(-1, -1, max_length))
        running_scores = going_on.gather(1, chosen)
        origin = (from_beam.gather(1, chosen) + offsets).reshape(-1)

        # candidates among the first K that ended join the finished ones if they score better
        just_finished = stops & in_top_k
        scores = top_scores / (length**alpha)  # generated tokens: `length` (the end token counted)
        full = finished.all(dim=-1, keepdim=True) & (early is True)
        scores = scores + full.float() * NEVER + (~improvable).float() * NEVER + (~just_finished).float() * NEVER
        merged_scores = torch.cat([final_scores, scores], dim=1)
        best = merged_scores.topk(k, dim=-1).indices
        finals = torch.cat([finals, candidates], dim=1).gather(1, best[:, :, None].expand(-1, -1, max_length))
        final_scores = merged_scores.gather(1, best)
        finished = torch.cat([finished, just_finished], dim=1).gather(1, best)

        length += 1
        hoped = (max_length - 1) if early == "never" and alpha > 0.0 else (length - 1)
        best_running = running_scores[:, :1] / (hoped**alpha)
        worst_final = torch.where(finished, final_scores.min(dim=1, keepdim=True).values, NEVER)
        improvable = improvable & (best_running > worst_final).any(dim=-1, keepdim=True)
        if not (improvable.any() and not (finished.all() and early is True) and not stops.all()):
            break
    n = decoding.nbest or 1
    return Hypotheses(finals[:, :n, :length].reshape(batch * n, length), final_scores[:, :n].reshape(-1))


def search(
    step: Step, batch: int, decoding: Decoding, max_new_tokens: int, start: int, eos: int, pad: int
) -> Hypotheses:
    """``decoding``'s search: greedy for one beam (its n-best is itself), else beam search."""
    if decoding.num_beams == 1:
        return greedy(step, batch, max_new_tokens, start, eos, pad)
    return beam_search(step, batch, decoding, max_new_tokens, start, eos, pad)
