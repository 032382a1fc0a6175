"""The scorecard in words, from the card alone: per claim, reading and model the tallies of direction and size
(`summary`), the README's glance (`glance`), the sentences a reviewer could quote (`headline`, `survivors`) and the
ones the page's opening paragraphs compute (`twins`: stopped runs' windows against whole ones'; `chat_answers`: how
the chat template's answers end)."""

from __future__ import annotations

import pandas as pd

from goose.analysis.claims.card import CHAT, CLAIMS, LOOP_FREE, NO_WINDOW, PROTOCOL, READINGS, WINDOWED, Claim
from goose.analysis.claims.verdicts import (
    ABOVE,
    BELOW,
    CONTRADICTED,
    CPU_READING,
    HOLDS,
    INCONCLUSIVE,
    NOT_LOSSLESS,
    WITHIN,
)
from goose.analysis.loops import loop_free
from goose.analysis.paper import CLAIMS_BUDGET, FIGURE4_RANGE, GOOSE, PAPER_BENCHMARKS
from goose.running.loop import LOOP_SPAN


def _tally(part: pd.DataFrame, column: str, kinds: tuple[str, ...]) -> str:
    return " / ".join(str(int((part[column] == k).sum())) for k in kinds)


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Per claim (every one, read or not), reading and model, over the paper's five benchmarks: of its counted
    comparisons, how many hold / are inconclusive / are contradicted (direction), and how many lie within / above /
    below the paper's range or are inconclusive (size, where the paper gives one). A cell read on fewer than the
    five says on how many; comparisons whose rows were not all lossless are counted apart; the clock, a GPU claim
    read on a CPU, is reported as a reading, never as a verdict."""
    stale = card.attrs.get("stale timing", {})
    planned = card.attrs.get("chat planned")  # the models the plan runs with the chat template (None: no plan)
    card = card if "reading" in card else card.assign(reading=PROTOCOL)
    models = sorted(card.model.unique())
    rows = []
    for claim in CLAIMS:
        for reading in READINGS:
            row = {"claim": f"{claim.number}. {claim.name}", "reading": reading, "paper": claim.paper}
            for m in models:
                part = card[(card.claim == claim.number) & (card.model == m) & (card.reading == reading)]
                read = bool(((card.model == m) & (card.reading == reading)).any())
                row[m], row[f"{m} size"] = _cell(claim, part, reading, stale.get((reading, m), 0), read,
                                                 None if planned is None else m in planned)
            rows.append(row)
    return pd.DataFrame(rows)


def glance(card: pd.DataFrame) -> pd.DataFrame:
    """The summary at a glance (the README's): per claim and model, the counted comparisons that hold in each
    reading (loop-free window · paper's protocol · chat template), and those within the paper's range in the
    loop-free window (the protocol's beside it); "-" where a reading has none (not run, or no window reading).
    Claim 6 is claim 2's comparison against the stronger source, read for size: its row says so."""
    models = sorted(card.model.unique())
    counted = card[card.counted.astype(bool) & (card.verdict != NOT_LOSSLESS)]
    rows = []
    for claim in CLAIMS:
        name = f"{claim.number}. {claim.name}" + (f" (= claim {claim.restates}, read for size)" if claim.restates
                                                  else "")
        row = {"claim": name, "paper": claim.paper}
        for m in models:
            own = counted[(counted.claim == claim.number) & (counted.model == m)]
            fractions = []
            for reading in READINGS:
                part = own[own.reading == reading]
                cpu = part.verdict == CPU_READING
                good = (cpu & part["vs no effect"].isin(["above", "at or above"])) | (part.verdict == HOLDS)
                fractions.append(f"{int(good.sum())}/{len(part)}" if len(part) else "-")
            within = []
            for reading in (LOOP_FREE, PROTOCOL):
                part = own[own.reading == reading]
                ok = part["size"].str.endswith(WITHIN) if "size" in part else part.claim.eq(-1)
                within.append(f"{int(ok.sum())}/{len(part)}" if claim.size and len(part) else "-")
            row[f"{m}: holds"] = ("CPU, faster: " if claim.gpu else "") + " · ".join(fractions)
            row[f"{m}: size within"] = " · ".join(within)
        rows.append(row)
    return pd.DataFrame(rows)


def _cell(claim: Claim, part: pd.DataFrame, reading: str, stale: int = 0, read: bool = True,
          chat_planned: bool | None = None) -> tuple[str, str]:
    """One model's summary of one claim in one reading: (direction, size); the clock's timed rows all stale (`stale`
    of them) are said as such, not as a claim that did not run; `read`: the reading read some claim of the model's,
    so a window reading of claim 1 with nothing says that its rows lack the window's counts; `chat_planned`: whether
    the sweeps' plan runs the model with the chat template (None: no plan), so an empty chat cell says why."""
    if reading in WINDOWED and claim.number in NO_WINDOW:
        return "no window reading", ""
    if "counted" in part:
        part = part[part.counted.astype(bool)]
    if part.empty:
        if claim.gpu and stale:
            return f"timing stale ({stale} rows), left out", ""
        if reading in WINDOWED and claim.number == 1 and read:
            return "no rows with the window's counts yet", ""
        if reading != CHAT:
            return "not run", ""
        return ("none planned: the chat sweep runs only models with a chat template" if chat_planned is False
                else "not run yet" if chat_planned else "no chat-template rows (not run, or a model without one)"), ""
    k = part.benchmark.nunique()
    lossy = part[part.verdict == NOT_LOSSLESS]
    part = part[part.verdict != NOT_LOSSLESS]
    if claim.gpu and not part.verdict.isin([HOLDS, INCONCLUSIVE, CONTRADICTED]).any():  # timed on a CPU
        faster = int(part["vs no effect"].isin(["above", "at or above"]).sum())
        verdict = f"{CPU_READING}, B={CLAIMS_BUDGET}: faster than AR in {faster} of {len(part)}"
        sized = f"in the GPU range in {int(part['size'].str.endswith(WITHIN).sum())} of {len(part)}"
    else:
        verdict = _tally(part, "verdict", (HOLDS, INCONCLUSIVE, CONTRADICTED))
        sized = (_tally(part, "size", (WITHIN, ABOVE, BELOW, INCONCLUSIVE)) if claim.size and "size" in part
                 else "no size in the paper")
    if len(lossy):
        verdict += f" (+{len(lossy)} not lossless, not counted)"
    if k < len(PAPER_BENCHMARKS):
        verdict += f" ({k} of {len(PAPER_BENCHMARKS)} benchmarks)"
    return verdict, sized


def survivors(card: pd.DataFrame) -> str:
    """One sentence from the card: the claims that hold in most counted comparisons of every reading read, per
    model, and those that hold so on the paper's protocol but not in another reading (the clock, a CPU reading,
    is not among them)."""
    counted = card[card.counted.astype(bool) & card.verdict.ne(NOT_LOSSLESS) & card.verdict.ne(CPU_READING)]
    models = sorted(card.model.unique())
    every, protocol_only = {}, {}
    for claim in (c for c in CLAIMS if not c.gpu and not c.restates):  # a restated claim confirms nothing new
        for m in models:
            own = counted[(counted.claim == claim.number) & (counted.model == m)]
            most = {r: (g.verdict == HOLDS).mean() > 0.5 for r, g in own.groupby("reading")}
            if most and all(most.values()):
                every.setdefault(claim, []).append(m)
            elif most.get(PROTOCOL):
                protocol_only.setdefault(claim, []).append(m)

    def said(found: dict) -> str:
        by: dict[str, list[str]] = {}  # the models' phrase -> its claims' numbers
        for c, ms in found.items():
            by.setdefault("both models" if len(ms) == len(models) > 1 else ", ".join(ms), []).append(str(c.number))
        return ", ".join(f"{'claims' if len(cs) > 1 else 'claim'} {', '.join(cs)} ({on})" for on, cs in by.items())

    return (f"Holding in most comparisons of every reading read: {said(every) or 'none'}; on the paper's protocol "
            f"but not in every reading: {said(protocol_only) or 'none'} (claim 6 restates claim 2 and is not counted "
            "here).")


def headline(card: pd.DataFrame) -> list[str]:
    """Three sentences a reviewer could quote, from the card alone: how often each claim holds in each reading
    read, how the sizes compare with the paper's, and what only a GPU can settle."""
    read = [r for r in READINGS if (card.reading == r).any()]
    counted = card[card.counted.astype(bool) & (card.verdict != NOT_LOSSLESS)]
    per_claim, restated = [], []
    for claim in (c for c in CLAIMS if not c.gpu):
        parts = []
        for r in read:
            part = counted[(counted.claim == claim.number) & (counted.reading == r)]
            if not part.empty:
                parts.append(f"{int((part.verdict == HOLDS).sum())} of {len(part)} {_SHORT[r]}")
        if parts and claim.restates:  # the same rows as the claim it restates: said apart, not counted twice
            restated.append(f"claim {claim.number} ({claim.name}: claim {claim.restates}'s comparison against the "
                            f"stronger source, read for size; not a separate confirmation) {', '.join(parts)}")
        elif parts:
            per_claim.append(f"claim {claim.number} ({claim.name}) {', '.join(parts)}")
    own = counted[~counted.claim.isin([c.number for c in CLAIMS if c.restates])]
    against = int((own.verdict == CONTRADICTED).sum())
    short = _short_of_threshold(own[own.verdict == CONTRADICTED])
    sized = counted[(counted.reading == LOOP_FREE) & counted["size"].isin(["within", "above", "below", "inconclusive"])]
    count = sized["size"].value_counts()
    missing = [r for r in READINGS if r not in read]
    return [
        "**On these stand-ins** (two small model families on a CPU), the counted comparisons that hold in direction: "
        f"{'; '.join(per_claim)} ({against} contradicted in all{short}; the rest inconclusive)"
        + (f"; beside them {'; '.join(restated)}. " if restated else ". ") +
        f"**In size**, {int(count.get('within', 0))} of {len(sized)} comparisons with a cited range lie within "
        f"the paper's in the loop-free window ({int(count.get('above', 0))} above it, "
        f"{int(count.get('below', 0))} below, {int(count.get('inconclusive', 0))} inconclusive). "
        "**Only a GPU run of the paper's models** can settle the clock (claim 4: "
        f"{FIGURE4_RANGE[0]}-{FIGURE4_RANGE[1]}x on a GPU; a CPU gives a reading) and whether the sizes hold at 7B-33B"
        + (f"; not read yet here: the {' and '.join(missing)} reading." if missing else ".")]


_SHORT = {PROTOCOL: "on the protocol", LOOP_FREE: "loop-free", CHAT: "with the chat template"}


def _short_of_threshold(against: pd.DataFrame) -> str:
    """Of the contradicted comparisons, those whose interval lies on the claim's side of no effect, short of a
    threshold the paper sets beyond it (claim 3's +12%): a contradiction there is not GOOSE behind ("" if none)."""
    claims = {c.number: c for c in CLAIMS}
    side = [claims[r.claim].threshold != claims[r.claim].none and r["vs no effect"] in
            (("above", "at or above") if claims[r.claim].above else ("below", "at or below"))
            for _, r in against.iterrows()]
    k = int(sum(side))
    return (f", {k} of them with GOOSE ahead but short of the paper's lower bound (claim "
            f"{', '.join(str(c) for c in sorted(set(against.claim[side])))})") if k else ""


def twins(card: pd.DataFrame) -> str:
    """What the card's windows say of stopped runs against full ones (analysis.loops.windows)."""
    both, equal = card.attrs.get("twins", (0, 0))
    if not both:
        return "no prompt was run both stopped and whole yet, so no window of the one is checked against the other"
    return (f"on the {both} prompt runs made both ways, {equal} windows are equal (tokens and forwards)"
            + ("" if equal == both else f": {both - equal} differ, which a stop should never do"))


def chat_answers(rows: pd.DataFrame) -> str:
    """How the GOOSE answers with the chat template end, from their rows and outputs records: at the length cap,
    and with a loop (a LOOP_SPAN-token run repeated)."""
    chat = rows[rows.chat_template.astype(bool) & rows.method.eq(GOOSE) & rows.budget.eq(CLAIMS_BUDGET)]
    if "stop_at_loop" in chat:
        chat = chat[~chat.stop_at_loop.astype(bool)]
    if chat.empty:
        return "no chat-template rows yet"
    win = loop_free(chat)
    capped = int((chat.new_tokens >= chat.max_new_tokens).sum())
    looped = int((win.loop_free_share < 1).sum())
    stored = "them" if len(win) == len(chat) else f"the {len(win)} whose tokens are stored"
    return (f"they loop too: of {len(chat)} GOOSE answers with the template, {capped} ran to the length cap and "
            f"{looped} of {stored} repeat a {LOOP_SPAN}-token run")
