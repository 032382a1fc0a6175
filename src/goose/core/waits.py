"""What a measurement says before it starts: about how long it will take on this CPU (from the model's size and
the threads), and the progress bar over its timed forwards. Said to the user, never used for a decision: budget=auto
and the cost surface (goose.drafting) announce their one-off measurements with it."""

from __future__ import annotations

import sys

import torch

# For announcing a measurement's wait before it starts, never for a decision. Seconds of one verification of T nodes
# after C tokens of context: (VERIFY_BASE_S + VERIFY_NODE_S * T) * (1 + VERIFY_CONTEXT_SHARE * (C - 256) / 768),
# fitted to SmolLM2-135M's curve cached on this repository's 2-core machine (fp32, prepacked, 2 threads, 2026-12-03;
# docs/budget-auto.md: 1, 32, 64 nodes 39.9, 73.6, 108 ms after 256 tokens, 44.1, 89.9, 130 ms after 1024), scaled by
# the weights one token's forward reads (`token_weights`; SmolLM2's: VERIFY_WEIGHTS) and by 2 / threads. So
# SmolLM2's first curve is announced at about 14 s on an idle machine. Where other processes share the cores it
# takes several times that (#61 saw 2.3 minutes on a shared machine, 25x the estimate beside a full-priority run),
# and a measurement they disturb is taken again (up to 3 times). A GPU's time is not estimated (the bar shows it).
VERIFY_BASE_S, VERIFY_NODE_S, VERIFY_CONTEXT_SHARE = 0.039, 0.00108, 0.18
VERIFY_WEIGHTS, VERIFY_THREADS = 147_750_912, 2


def token_weights(config) -> int | None:
    """The weights one token's forward reads: per layer attention (4 h^2) and the MLP (3 h i), and the output
    layer (h V); None where the config does not say."""
    try:
        c = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
        h, layers, inner, vocab = c.hidden_size, c.num_hidden_layers, c.intermediate_size, c.vocab_size
        return int(layers * (4 * h * h + 3 * h * inner) + h * vocab)
    except (AttributeError, TypeError):
        return None


def verify_seconds(engine, nodes: int, context: int = 256) -> float | None:
    """About how long one verification of `nodes` nodes after `context` tokens takes on this CPU (the constants
    above), or None where it cannot be said (a GPU, a model whose config does not give its size)."""
    device = getattr(engine, "device", None)
    model = getattr(engine, "model", None)
    weights = token_weights(getattr(model, "config", None)) if model is not None else None
    if weights is None or device is None or torch.device(device).type != "cpu":
        return None
    scale = weights / VERIFY_WEIGHTS * VERIFY_THREADS / max(torch.get_num_threads(), 1)
    return (VERIFY_BASE_S + VERIFY_NODE_S * nodes) * (1 + VERIFY_CONTEXT_SHARE * (context - 256) / 768) * scale


def about(seconds: float | None) -> str:
    """`about 14 s (...)`, `about 2.5 min (...)`: an estimate and what it rests on, or that there is none."""
    if seconds is None:
        return "its time not estimated here (the bar below shows it)"
    said = f"{max(seconds, 1):.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"
    return (f"about {said} on an idle machine (estimated from the model's size and {torch.get_num_threads()} "
            "thread(s)); several times that where other processes share the cores, and measured again, up to 3 "
            "times, where they disturb it")


def progress_bar(steps: int, what: str):
    """A progress bar over a measurement's timed forwards, on stderr."""
    from tqdm import tqdm

    return tqdm(total=steps, desc=what, unit="forward", file=sys.stderr, leave=False, mininterval=1.0)
