"""The cost a budget=auto run pruned its trees against, kept in its run folder.

budget=auto prunes every draft against this machine's verification cost (goose.drafting.budget: a curve, or a
surface at concurrency > 1), measured once per kind of machine and cached. Rows record its fingerprint
(`cost_fingerprint`), and a configuration's rows are only ever added beside rows pruned against the same cost. A
fresh machine of the same kind (an empty cache: another SLURM node, a new session) would measure a cost of its
own that differs by the clock's noise, so the folder keeps the one its rows were pruned against
(`cost-<fingerprint>.json`, with the kind of machine it was measured on) and a resume prunes against that.

Where the rows' cost can be had neither from the folder nor from this machine's cache, a cost measured here
cannot be it: the resume is refused before measuring (minutes on a CPU), in one line saying why. docs/budget-auto.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from goose.core.fingerprints import digest
from goose.errors import GooseError
from goose.paths import cache_root
from goose.storage.durable import replace_text

COST_FILE = "cost-{}.json"  # its fingerprint (the rows' cost_fingerprint) in the name


def fingerprint(cost) -> str:
    """A cost's fingerprint, as rows record it."""
    return digest(cost.to_json(), 12)


def keep_cost(run_dir: Path, cost, measured_on: str) -> None:
    """Keep `cost` (a CostCurve or CostSurface) in the run folder with the machine it was measured on
    (goose.drafting.budget.profile_key). Called once the run may add rows (Decoding.check_cost): a copy that was
    edited or damaged is written again, and a cost no row is pruned against (a run stopped before its first row)
    goes."""
    path = run_dir / COST_FILE.format(fingerprint(cost))
    text = json.dumps({"measured_on": measured_on, **json.loads(cost.to_json())})
    try:
        same = path.read_text() == text
    except (OSError, UnicodeDecodeError):
        same = False
    if not same:
        replace_text(path, text)
    for other in run_dir.glob(COST_FILE.format("*")):
        if other != path:
            other.unlink(missing_ok=True)


def pruned_against(rows: list[dict], config_hash: str) -> set[str]:
    """The cost fingerprints this configuration's rows were pruned against (none without budget=auto)."""
    return {r.get("cost_fingerprint") for r in rows if r.get("config_hash") == config_hash} - {"", None}


def cost_refusal(run_dir: Path, kept: set[str], here: str, why: str) -> GooseError:
    """The one line refusing to add budget=auto rows beside rows pruned against another cost."""
    return GooseError(f"{run_dir} holds budget=auto rows pruned against another cost (fingerprint "
                      f"{', '.join(sorted(kept))}; here {here}): {why}. Resume where they were measured, or give "
                      "another results_dir (or run_dir) to run afresh here.")


def _load(path: Path, kind, fp: str):
    """The cost of class `kind` in `path` where its fingerprint is `fp`, else None (another cost, another kind,
    an edited or damaged file)."""
    try:
        cost = kind.load(path)
        return cost if fingerprint(cost) == fp else None
    except Exception:  # noqa: BLE001 - whatever an edited or damaged file's content breaks
        return None


def _cached(fp: str, measured_on: str, kind):
    """This machine's cached cost of fingerprint `fp` (measured on `measured_on`, the cache's profile key), or None."""
    folder = cache_root() / "profiles"
    mine = [p for p in sorted(folder.glob("*.json")) if folder.is_dir()
            and (p.name.startswith(f"{measured_on}-") or f"-{measured_on}-" in p.name)]  # (older names: label first)
    found = (_load(p, kind, fp) for p in mine)
    return next((c for c in found if c is not None), None)


def kept_cost(run_dir: Path, rows: list[dict], config_hash: str, measured_on: str, kind) -> Any:
    """The cost (of class `kind`) this configuration's rows in `run_dir` were pruned against, where it can be had on
    this kind of machine (`measured_on`): the folder's copy measured on it, else this machine's cache; None where no
    row was pruned against a cost (this machine's own is then used). Where it cannot be had, a cost this machine
    measures cannot be it, so the resume is refused now, before measuring one."""
    kept = pruned_against(rows, config_hash)
    if len(kept) != 1:
        return None  # none yet; several: refused by Decoding.check_cost
    fp = next(iter(kept))
    path = run_dir / COST_FILE.format(fp)
    if path.is_file():
        try:
            where = json.loads(path.read_text()).get("measured_on")
        except (OSError, ValueError, AttributeError):
            where = None
        cost = _load(path, kind, fp)
        if cost is not None and where != measured_on:  # this machine's cost is keyed by its own kind: not this one
            raise cost_refusal(run_dir, kept, "not measured", f"{path.name} was measured on another kind of machine "
                               f"({where}; this one is {measured_on})")
        if cost is not None:
            print(f"[goose] budget=auto resumes with the cost its rows were pruned against ({fp}, kept in "
                  f"{path.name}, measured on this kind of machine)", flush=True)
            return cost
        why = f"{path.name} does not hold the cost its name says (edited or damaged)"
    else:
        why = (f"the folder does not keep it ({path.name}: written before 2026-12-07, or removed; a copy of the "
               "folder made where it ran has it)")
    cost = _cached(fp, measured_on, kind)
    if cost is None:
        raise cost_refusal(run_dir, kept, "not measured", f"{why}, and this machine's cache holds no cost of that "
                           "fingerprint (one measured here now would be another)")
    print(f"[goose] budget=auto resumes with the cost its rows were pruned against ({fp}, from this machine's cache; "
          f"{why}: written again)", flush=True)
    return cost
