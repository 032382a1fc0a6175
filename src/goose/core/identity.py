"""What a model is, as a run names it: `ModelIdentity`, found by goose.models.loading without loading weights and
read by storage (run folders), drafting (cost curves) and running alike."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelIdentity:
    """What a model config points at, found without loading weights.

    label: a readable name for tables and folders (the config's name; for model=hf/gguf the
    folder name or GGUF file stem); fingerprint: its content (hub repo + commit, or the
    files' fingerprints); where: what to load (a folder, a GGUF file, or a hub repo id)."""

    label: str
    fingerprint: str
    description: str
    kind: str  # gguf | hf | hub
    where: str
    revision: str | None = None
