"""The loop-free window: the part of each answer before it starts repeating itself, and tau over it.

Small models given raw prompts run to the length cap and loop: most of a long answer then repeats its own earlier
text, which every copying drafter predicts perfectly. The claims are read a second way on the tokens before the
loop: an answer's loop starts at the first position whose next SPAN tokens already occurred, contiguously, earlier
in the answer; the window is every token before it (the whole answer where none repeats). tau over the window
counts the forwards that produced its tokens: every forward ends with the target's own (bonus) token, so a window
of L tokens took the bonus tokens among them, plus one more where it ends inside a forward's accepted drafts.
The drafted-token counts per forward are not recorded, so acceptance rates (claim 1) and the clock (claim 4) have
no window reading. Read from the outputs records the runs wrote; nothing is decoded again.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from goose.running.loop import BONUS, LOOP_SPAN, loop_start
from goose.storage.result_files import OutputsFile


def window_forwards(origins: list[str], length: int) -> int:
    """The forwards that produced the first `length` tokens (prefill included): the bonus tokens among them, and
    one more where the window ends inside a forward (its last token a drafted one)."""
    if length == 0:
        return 0
    inside = origins[:length]
    return inside.count(BONUS) + (0 if inside[-1] == BONUS else 1)


def loop_free(rows: pd.DataFrame, span: int = LOOP_SPAN) -> pd.DataFrame:
    """The rows with new_tokens and steps over each answer's loop-free window (from the outputs record of its run
    folder), `loop_free_share` the window's share of the answer; the columns a window cannot be read on (drafted
    and accepted counts, wall times) blank. A row whose outputs record is missing is left out, with one line."""
    out, missing = [], 0
    for run_dir, g in rows.groupby("run_dir", sort=False):
        records = OutputsFile(Path(run_dir) / "outputs.jsonl").read()
        for i, r in g.iterrows():
            rec = records.get(str(r.prompt_id))
            if rec is None or rec.get("config_hash") != r.config_hash or "origins" not in rec:
                missing += 1
                continue
            length = loop_start(rec["tokens"], span)
            out.append((i, length, window_forwards(rec["origins"], length), length / max(1, len(rec["tokens"]))))
    if missing:
        print(f"[analysis] loop-free window: {missing} row(s) without their outputs record left out")
    idx = [i for i, *_ in out]
    windowed = rows.loc[idx].copy()
    windowed["new_tokens"] = [n for _, n, _, _ in out]
    windowed["steps"] = [s for _, _, s, _ in out]
    windowed["loop_free_share"] = [f for *_, f in out]
    for c in ("accepted", "drafted", "spine_accepted", "spine_drafted", "branch_accepted", "branch_drafted",
              "wall_s", "ar_wall_s", "speedup", "copied_answer", "copied_prompt"):
        if c in windowed:
            windowed[c] = float("nan")
    return windowed
