"""Timed generations and honest speedups.

`speedup_reference` says where a row's AR timing comes from:
- `interleaved` (default): AR and the method run in this process, on the same prompt, back
  to back (which goes first alternates), `repeats` times each. Doubles a sweep's cost.
- `cached`: an AR timing from the store, only if it was taken by this sweep (one Hydra
  multirun) on this host with the same threads, torch, backend and device; else AR is timed
  afresh and stored.
- `none`: no timing of AR; tau only (AR still runs once, untimed, if no reference tokens exist).
Every timing records when, where and how it was taken.
"""

from __future__ import annotations

import os
import platform
import socket
import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from goose.drafting.contract import Drafter, autoregressive
from goose.engine.sampling import Sampler, Sampling
from goose.running.loop import Generation, generate
from goose.storage.fingerprints import digest
from goose.storage.metrics import SAME_CONDITIONS
from goose.storage.result_files import ReferenceStore, TimingStore

if TYPE_CHECKING:
    from goose.storage.run_folder import RunIdentity

MODES = ("interleaved", "cached", "none")


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"


def conditions(device: torch.device, backend: str, sweep_id: str) -> dict:
    """Where and how a timing is taken; rows and stored AR timings carry these."""
    return {"host": socket.gethostname(), "threads": torch.get_num_threads(), "torch": torch.__version__,
            "backend": backend, "device_name": device_name(device), "sweep_id": sweep_id}


def combine(gens: list[Generation]) -> Generation:
    """Repeats of one generation (identical tokens): wall time and time to first token = means, its std kept."""
    walls = [g.wall_s for g in gens]
    gen = gens[-1]
    gen.wall_s = sum(walls) / len(walls)
    gen.first_token_s = sum(g.first_token_s for g in gens) / len(gens)
    gen.wall_s_std = round(statistics.pstdev(walls), 6) if len(walls) > 1 else 0.0
    return gen


def stamp(gen: Generation, repeats: int, cond: dict) -> dict:
    return {"wall_s": gen.wall_s, "wall_s_std": gen.wall_s_std, "tokens": len(gen.tokens),
            "tokens_per_s": gen.tokens_per_s, "repeats": repeats, "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "pid": os.getpid(), **cond}


def reference_entry(gen: Generation) -> dict:
    """What the reference store keeps of AR's generation: its tokens and, per token, the margin of the row that
    chose it, the best other tokens there and the gaps to them (what tells a numerics difference from a bug,
    goose.storage.equality)."""
    return {"tokens": gen.tokens, "margins": [round(m, 7) for m in gen.margins], "runners_up": gen.runners_up,
            "gaps": [[round(g, 7) for g in row] for row in gen.gaps]}


@dataclass
class Measured:
    gen: Generation  # the method's generation (the last repeat's tokens and stats, mean wall time)
    reference: dict | None  # AR's tokens, margins and runners-up (from this run or the reference store)
    ar_timing: dict | None  # the AR timing the speedup divides by
    source: str  # interleaved | cached | self | none
    key: str  # the reference key both were stored under
    batch: dict | None = None  # concurrency > 1: pass_wall_s, pass_tokens, ar_pass_wall_s


class Timer:
    """Times one method against AR per prompt, under the spec's `speedup_reference` mode."""

    def __init__(self, engine, spec, stops: frozenset[int], cond: dict, refs: ReferenceStore, timings: TimingStore):
        self.engine, self.stops, self.repeats, self.mode = engine, stops, spec.repeats, spec.speedup_reference
        self.cond, self.refs, self.timings, self.trace = cond, refs, timings, spec.trace
        self.sampling = spec.sampling  # AR, the reference, samples with the method's settings and seed
        self.ar = Drafter()

    def _gen(self, ids: list[int], drafter: Drafter, n: int) -> Generation:
        if self.trace and drafter.capabilities.trace:
            drafter.enable_trace()  # keep the last repeat's steps only
        return generate(self.engine, ids, drafter, n, self.stops, self.sampling)

    def _repeated(self, ids: list[int], drafter: Drafter, n: int) -> Generation:
        return combine([self._gen(ids, drafter, n) for _ in range(self.repeats)])

    def _method(self, ids: list[int], drafter: Drafter, n: int):
        """The method's generations of one prompt. Under memory=run every repeat starts from the state
        the prompt found (never from its own earlier answer), and the last one leaves the state a
        single run would: repeats measure the same work."""
        saved = drafter.save_memory() if drafter.capabilities.memory else None
        runs = 0

        def one() -> Generation:
            nonlocal runs
            if runs and saved is not None:
                drafter.restore_memory(saved)
            runs += 1
            return self._gen(ids, drafter, n)

        return one

    def _store(self, key: str, ar: Generation) -> dict:
        timing = stamp(ar, self.repeats, self.cond)
        self.timings.add(key, timing)
        if self.refs.get(key) != reference_entry(ar):
            self.refs.put(key, reference_entry(ar))
        return timing

    def _cached_timing(self, key: str) -> dict | None:
        keys = (*SAME_CONDITIONS, "sweep_id")
        found = [t for t in self.timings.all(key)
                 if t.get("repeats") == self.repeats and all(str(t.get(k)) == str(self.cond[k]) for k in keys)]
        return found[-1] if found else None

    def measure(self, ids: list[int], drafter: Drafter, key: str, turn: int, n: int) -> Measured:
        """`turn` alternates who goes first under `interleaved`; `n`: new tokens for this prompt (max_new_tokens,
        or fewer where the model's context ends first: the same for AR, and in `key`)."""
        if autoregressive(drafter):
            gen = self._repeated(ids, drafter, n)
            return Measured(gen, reference_entry(gen), self._store(key, gen), "self", key)
        method = self._method(ids, drafter, n)
        if self.mode == "interleaved":
            ars, gens = [], []
            for r in range(self.repeats):
                if (turn + r) % 2 == 0:
                    ars.append(self._gen(ids, self.ar, n))
                    gens.append(method())
                else:
                    gens.append(method())
                    ars.append(self._gen(ids, self.ar, n))
            ar = combine(ars)
            return Measured(combine(gens), reference_entry(ar), self._store(key, ar), "interleaved", key)
        if self.mode == "cached":
            timing = self._cached_timing(key)
            ref = self.refs.get(key)
            if timing is None or ref is None:
                ar = self._repeated(ids, self.ar, n)
                timing, ref = self._store(key, ar), reference_entry(ar)
            gen = combine([method() for _ in range(self.repeats)])
            return Measured(gen, ref, timing, "cached", key)
        ref = self.refs.get(key)
        if ref is None:  # tau needs no timing, but losslessness needs AR's tokens
            ref = reference_entry(self._gen(ids, self.ar, n))
            self.refs.put(key, ref)
        gen = combine([method() for _ in range(self.repeats)])
        return Measured(gen, ref, None, "none", key)


class GumbelNoise:
    """A Hugging Face logits processor that turns greedy `generate` into our sampler: each step's scores
    become the filtered logits plus the noise of the position being emitted (the sequence length)."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        position = input_ids.shape[1]
        return torch.stack([self.sampler.perturbed(row, position) for row in scores])


def hf_greedy(model, ids: list[int], max_new_tokens: int, stops: frozenset[int], sampling: Sampling | None = None,
              **extra) -> list[int]:
    """Hugging Face generate, greedy: the outside reference for our own AR (`extra`: e.g. prompt lookup).
    With `sampling`, greedy on our perturbed logits: Hugging Face's loop and cache, our noise."""
    from transformers import LogitsProcessorList

    sampler = sampling.for_prompt(ids) if sampling is not None else None
    if sampler is not None:
        extra["logits_processor"] = LogitsProcessorList([GumbelNoise(sampler)])
    prompt = torch.tensor([ids], device=model.device)
    out = model.generate(
        prompt,
        attention_mask=torch.ones_like(prompt),  # else a prompt token equal to the pad id would be masked out
        max_new_tokens=max_new_tokens,
        do_sample=False,
        eos_token_id=sorted(stops) or None,
        pad_token_id=sorted(stops)[0] if stops else 0,
        **extra,
    )
    return out if extra.get("return_dict_in_generate") else out[0, len(ids) :].tolist()


def hf_reference(model, ids: list[int], max_new_tokens: int, stops: frozenset[int],
                 sampling: Sampling | None = None) -> dict:
    """Hugging Face greedy `generate` (on our perturbed logits when sampling) as a reference entry: its tokens
    and, from the scores it chose them by, each token's margin, runners-up and gaps."""
    from goose.engine.sampling import ranked

    out = hf_greedy(model, ids, max_new_tokens, stops, sampling, output_scores=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(ids):].tolist()
    choices = [ranked(s[0].float(), t) for s, t in zip(out.scores, tokens)]
    return {"tokens": tokens, "margins": [round(c.margin, 7) for c in choices],
            "runners_up": [c.runners_up for c in choices], "gaps": [[round(g, 7) for g in c.gaps] for c in choices]}


def reference_key(spec, ident: RunIdentity, ids: list[int], stops: frozenset[int], env: dict, n: int) -> str:
    """Everything that decides AR's tokens for this input (goose.running.spec marks the settings: reference=True) and
    the conditions its timing is compared under; `n` is this prompt's new-token limit."""
    return digest({**spec.settings("reference"), "max_new_tokens": n, "model": ident.model.fingerprint,
                   "prompt": list(ids), "device_name": env["device_name"], "threads": ident.conditions["threads"],
                   "stops": sorted(stops), "torch": env["torch"], "transformers": env["transformers"],
                   **spec.sampling.noise_key()}, 24)
