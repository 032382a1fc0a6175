"""The result row: its declared, versioned schema, shared by the writer (one row per prompt) and every reader.

A row is built by goose.running.rows (`make_row`) and holds, in this order: the columns declared in `COLUMNS`
(measurements, identity, conditions), the run settings that are row columns (`goose.running.spec`, in declaration
order), the drafter's counters (`Drafter.stats()`: numbers, or short text such as `accept_by_depth`), the model,
method and benchmark sections flattened (`method.drafter.k`, ...), the schema version and a digest of the row's
values (`row_check`, see goose.storage.result_files). Reading is text first, then types from this schema: an id
such as `NA`, `null` or `007` stays the text it was written as.

Rows written before this schema (versions 1-3: no `row_schema` column; 4: a config hash that held the
drafter's import path) are read through `upgrade`, the one place that knows what those rows lacked.
"""

from __future__ import annotations

from dataclasses import dataclass

ROW_SCHEMA = 5  # raised whenever a column's meaning changes; it enters every config hash


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # text | int | float | bool
    doc: str


def _c(name: str, kind: str, doc: str) -> Column:
    return Column(name, kind, doc)


COLUMNS: tuple[Column, ...] = (
    _c("model", "text", "what the model is: its config name, or a local folder's name / GGUF file's stem"),
    _c("benchmark", "text", "the benchmark config's name"),
    _c("method", "text", "the method config's name"),
    _c("memory_default", "text", "the memory mode the method's Config defaults to: its paper's setting"),
    _c("prompt_id", "text", "the question's id (a later turn: '<id>#2')"),
    _c("category", "text", "Spec-Bench's category, MT-Bench's own; blank elsewhere"),
    _c("prompt_fingerprint", "text", "the question as asked: its text and the user turns before it"),
    _c("prompt_tokens", "int", "tokens of the input (earlier turns and answers included)"),
    _c("new_tokens", "int", "tokens generated"),
    _c("steps", "int", "target forwards, the prefill included"),
    _c("tau", "float", "new_tokens / steps"),
    _c("wall_s", "float", "seconds of the generation (mean over repeats)"),
    _c("wall_s_std", "float", "their standard deviation (0 with one repeat)"),
    _c("tokens_per_s", "float", "new_tokens / wall_s"),
    _c("ttft_s", "float", "time to first token: seconds from the request's start (its admission at concurrency > 1) "
       "to its first new token, the prefill included"),
    _c("tpot_s", "float", "time per output token after the first: (done - first token) / (new_tokens - 1), the "
       "prefill excluded, at every concurrency; blank with one token"),
    _c("lossless", "bool", "the tokens equal AR's (greedy, or AR sampling with the same seed)"),
    _c("first_divergence", "int", "index of the first token that differs from AR's, -1 when lossless"),
    _c("equality", "text", "exact | numerics (a near-tie read two ways, within the dtype's tolerance) | diverged "
       "(goose.storage.equality)"),
    _c("margin_at_divergence", "float", "this run's top-1 minus top-2 logit at the first differing token"),
    _c("ar_margin_at_divergence", "float", "AR's margin there"),
    _c("gap_at_divergence", "float", "this run's logit of its token minus its logit of AR's token there (blank: AR's "
       "token not among its best 4)"),
    _c("ar_gap_at_divergence", "float", "AR's logit of its token minus its logit of this run's token there"),
    _c("equality_tolerance", "float", "the dtype's tolerance both gaps were held to"),
    _c("capped_at", "int", "the new-token limit where the model's context ends before max_new_tokens; blank else"),
    _c("ended", "text", "why the answer ended: stop (a stop token), cap (its new-token limit) or loop (its first loop, "
       "under stop_at_loop); blank: written before rows recorded it (2026-12-06)"),
    _c("loop_free_tokens", "int", "tokens before the answer's first loop: the first position whose next 32 tokens "
       "occurred earlier in the answer (new_tokens where none repeats); the same for every lossless method"),
    _c("speedup", "float", "ar_wall_s / wall_s; blank without an AR timing"),
    _c("speedup_source", "text", "interleaved | cached | self (the row is AR) | none"),
    _c("speedup_stale", "bool", "the AR timing was taken under other conditions: left out of every speedup"),
    _c("ar_wall_s", "float", "the AR timing the speedup divides by"),
    _c("ar_tokens_per_s", "float", "AR's tokens per second in that timing"),
    _c("admitted_s", "float", "concurrency > 1: when the request was admitted, seconds from its batch's start"),
    _c("first_token_s", "float", "... when its first token was there (concurrency 1: seconds from the start)"),
    _c("done_s", "float", "... when it was done"),
    _c("pass_wall_s", "float", "concurrency > 1: the wall time of the batch (pass) the request ran in; wall_s is the "
       "request's share of it by tokens, so pooled speedups are the passes' throughput ratios"),
    _c("pass_tokens", "int", "the tokens that batch generated"),
    _c("ar_pass_wall_s", "float", "batched AR's wall time over the same requests at the same concurrency"),
    _c("copied_answer", "int", "drafted tokens accepted that end a 4-gram the answer already held before them (the "
       "model repeating its own output: what flatters copying methods on long answers)"),
    _c("copied_prompt", "int", "... that end a 4-gram of the prompt the answer did not hold (copied from the prompt)"),
    _c("cost_fingerprint", "text", "budget=auto: the cost curve (at concurrency > 1 the cost surface) its trees were "
       "pruned against, by content; a run refuses to add rows beside ones pruned against another; blank otherwise"),
    _c("mean_width", "float", "nodes per verification, the root included"),
    _c("max_width", "int", "the widest verification"),
    _c("config_hash", "text", "the configuration's key: every setting that changes a row, and what it points at"),
    _c("model_config", "text", "the model config the row was run with"),
    _c("model_fingerprint", "text", "the model's content (every byte of its files; a hub model: repo@commit)"),
    _c("model_source", "text", "where the weights came from"),
    _c("prompts_fingerprint", "text", "the benchmark's prompts as read (ids, texts, later turns)"),
    _c("data_fingerprint", "text", "the content of the files the method reads (REST's datastore); blank if none"),
    _c("code_fingerprint", "text", "the code that drafted and verified the row: its drafter's module and what it "
       "imports of the drafting, engine and decode-loop code (goose.storage.code_identity); a run refuses to resume "
       "rows of other code; blank: written before rows recorded it (2026-12-05), or code of unknown source"),
    _c("reference_key", "text", "the key of AR's tokens for this input in <results_dir>/references"),
    _c("timed_at", "text", "when the row was written"),
    _c("host", "text", "where the row was measured"),
    _c("threads", "text", "torch threads"),
    _c("backend", "text", "how the forward ran (engine.backend resolved)"),
    _c("device_name", "text", "the GPU's name, or the CPU's model and kernel instruction set"),
    _c("sweep_id", "text", "the Hydra multirun this row belongs to (blank for a single run)"),
    _c("ar_at", "text", "when the AR timing was taken"),
    _c("ar_host", "text", "where"),
    _c("ar_threads", "text", "with how many threads"),
    _c("ar_torch", "text", "with which torch"),
    _c("ar_backend", "text", "on which backend"),
    _c("ar_device_name", "text", "on which device"),
    _c("ar_sweep_id", "text", "in which sweep"),
    _c("device", "text", "the torch device"),
    _c("dtype", "text", "the weights' dtype"),
    _c("torch", "text", "torch version"),
    _c("transformers", "text", "transformers version"),
    _c("python", "text", "Python version"),
)
SECTIONS = ("model", "method", "benchmark")  # flattened after the drafter's counters
TAIL = (_c("row_schema", "int", "this schema's version"),
        _c("row_check", "text", "a digest of the row's non-blank values: a damaged line is never read as a row"))
KINDS = {c.name: c.kind for c in (*COLUMNS, *TAIL)}


def flat(prefix: str, node) -> dict:
    out = {}
    for k, v in node.items():
        if k.startswith("_"):
            continue
        key = f"{prefix}.{k}" if prefix else k
        out.update(flat(key, v) if isinstance(v, dict) else {key: v})
    return out


# --- reading -----------------------------------------------------------------------------------------------
LEGACY_DEFAULTS = {"trial": "1", "memory": "", "memory_default": "", "temperature": "0",
                   "top_k": "0", "top_p": "1", "seed": "0"}


def schema_of(row: dict) -> int:
    """The schema version a row was written under (rows without the column: 3)."""
    v = str(row.get("row_schema", "") or "")
    return int(v) if v.isdigit() else 3


def upgrade(row: dict) -> dict:
    """A row as this schema reads it.

    Versions 1-3 lack columns added since: the trial (1), the memory mode and its default (unknown: blank),
    the sampling settings (greedy), MT-Bench's and Spec-Bench's benchmark.turns (1 and 2 then), the prompt
    fingerprint and the data fingerprint (blank).
    The code fingerprint came later, within version 5 (no column's meaning changed, so no config hash did): rows
    of any version written before it lack the column, which every reader takes as blank (`row.get`), "other code"
    to a resume (goose.storage.code_identity); it is not added here, so a re-keyed folder keeps its columns.
    Version 4 has every other column; its `config_hash` is the key schema 4 computed, which held the drafter class's
    import path. It stays the row's key (the rows of one folder stay together, apart from schema-5 keys); the
    migrator (`python -m goose.migration.migrate`) re-keys a folder's rows with `rekeyed`, which makes them schema 5."""
    version = schema_of(row)
    if version == ROW_SCHEMA:
        return row
    out = dict(row)
    if version < 4:
        for k, v in LEGACY_DEFAULTS.items():
            if out.get(k, "") == "":
                out[k] = v
        if out.get("benchmark.turns", "") == "" and out.get("benchmark") in ("mt_bench", "spec_bench"):
            out["benchmark.turns"] = "1" if out["benchmark"] == "mt_bench" else "2"
        out.setdefault("prompt_fingerprint", "")
        out.setdefault("data_fingerprint", "")
    out["row_schema"] = str(version)
    return out


def rekeyed(row: dict, config_hash: str) -> dict:
    """A schema-4 row under this schema's key: upgraded, `config_hash` the configuration's schema-5 key (the
    migrator verified the old one), `row_schema` this schema. Its row_check is left for the writer to compute
    (goose.storage.result_files)."""
    if schema_of(row) != 4:
        raise ValueError(f"only schema-4 rows are re-keyed (this one is schema {schema_of(row)})")
    out = {k: v for k, v in upgrade(row).items() if k != "row_check"}
    out["config_hash"] = config_hash
    out["row_schema"] = str(ROW_SCHEMA)
    return out


def kind_of(column: str, settings: dict[str, str]) -> str | None:
    """The declared kind of a column, None for one the schema leaves to its writer (a drafter's counter,
    a config section's value). `settings`: the kind of each setting that is a row column, as the run spec declares
    them (`goose.running.spec.setting_kinds()`; the schema is below the spec, so its reader passes them)."""
    return KINDS.get(column) or settings.get(column)


def typed(value: str, kind: str):
    """A cell's text as its declared kind; blank stays None (not a number: never NA-parsed)."""
    if value == "" or value is None:
        return None
    if kind == "text":
        return value
    if kind == "bool":
        return value == "True"
    try:
        return int(float(value)) if kind == "int" else float(value)
    except ValueError:
        return None
