"""The claims scorecard written out: claims.md (dated, saying what it ran on), claims.csv and claims.png, from
the rows alone, so a rerun over the same rows writes the same bytes."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from goose.analysis import power
from goose.analysis.bootstrap import CONFIDENCE, MIN_PROMPTS
from goose.analysis.claims import CHAT, CLAIMS, LOOP_FREE, NO_WINDOW, PROTOCOL, READINGS, WINDOWED, Claim, scorecard
from goose.analysis.loops import loop_free
from goose.analysis.paper import ABLATION_DELTA_PCT, BYPASS_ABLATION, CLAIMS_BUDGET, GOOSE, PAPER_BENCHMARKS
from goose.analysis.verdicts import ABOVE, BELOW, CONTRADICTED, CPU_READING, HOLDS, INCONCLUSIVE, NOT_LOSSLESS, WITHIN

COLOURS = {HOLDS: "#b7e1b1", INCONCLUSIVE: "#e6e6e6", CONTRADICTED: "#f4b6b2", CPU_READING: "#cfe0f3",
           NOT_LOSSLESS: "#8c8c8c"}
SUMMARY_START, SUMMARY_END = "<!-- summary -->", "<!-- /summary -->"


# --- the card in words: per claim, reading and model -------------------------------------------------------
def _tally(part: pd.DataFrame, column: str, kinds: tuple[str, ...]) -> str:
    return " / ".join(str(int((part[column] == k).sum())) for k in kinds)


def summary(card: pd.DataFrame) -> pd.DataFrame:
    """Per claim (every one, read or not), reading and model, over the paper's five benchmarks: of its counted
    comparisons, how many hold / are inconclusive / are contradicted (direction), and how many lie within / above /
    below the paper's range or are inconclusive (size, where the paper gives one). A cell read on fewer than the
    five says on how many; comparisons whose rows were not all lossless are counted apart; the clock, a GPU claim
    read on a CPU, is reported as a reading, never as a verdict."""
    stale = card.attrs.get("stale timing", {})
    card = card if "reading" in card else card.assign(reading=PROTOCOL)
    models = sorted(card.model.unique())
    rows = []
    for claim in CLAIMS:
        for reading in READINGS:
            row = {"claim": f"{claim.number}. {claim.name}", "reading": reading, "paper": claim.paper}
            for m in models:
                part = card[(card.claim == claim.number) & (card.model == m) & (card.reading == reading)]
                row[m], row[f"{m} size"] = _cell(claim, part, reading, stale.get((reading, m), 0))
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


def _cell(claim: Claim, part: pd.DataFrame, reading: str, stale: int = 0) -> tuple[str, str]:
    """One model's summary of one claim in one reading: (direction, size); the clock's timed rows all stale (`stale`
    of them) are said as such, not as a claim that did not run."""
    if reading in WINDOWED and claim.number in NO_WINDOW:
        return "no window reading", ""
    if "counted" in part:
        part = part[part.counted.astype(bool)]
    if part.empty:
        if claim.gpu and stale:
            return f"timing stale ({stale} rows), left out", ""
        return ("no chat-template rows (a base model has no template)" if reading == CHAT else "not run"), ""
    k = part.benchmark.nunique()
    lossy = part[part.verdict == NOT_LOSSLESS]
    part = part[part.verdict != NOT_LOSSLESS]
    if claim.gpu and not part.verdict.isin([HOLDS, INCONCLUSIVE, CONTRADICTED]).any():  # timed on a CPU
        faster = int(part["vs no effect"].isin(["above", "at or above"]).sum())
        verdict = f"{CPU_READING}, B=60: faster than AR in {faster} of {len(part)}"
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


def _amount(v: float, unit: str) -> str:
    if not np.isfinite(v):
        return "-"
    return f"{v:.2f}x" if unit == "x" else f"{v:+.1f}%"


def _effect(r) -> str:
    if np.isfinite(r.low):
        return f"{_amount(r.effect, r.unit)} [{_amount(r.low, r.unit)}, {_amount(r.high, r.unit)}]"
    why = (f"n < {MIN_PROMPTS}" if r.n < MIN_PROMPTS
           else "resamples without a value (a side drafted nothing on some prompts)")
    return f"{_amount(r.effect, r.unit)} (no interval: {why})"


def _copied(r) -> str:
    a, p = r["copied answer %"], r["copied prompt %"]
    return "" if not np.isfinite(a) else f"{a:.0f} / {p:.0f}"


def _ran_on(rows: pd.DataFrame) -> str:
    days = sorted({str(t)[:10] for t in rows.timed_at if str(t)})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "unknown date"
    devices = ", ".join(sorted({f"{d} with {t} thread{'' if str(t) == '1' else 's'}" if str(t) else str(d)
                                for d, t in zip(rows.device_name, rows.threads)}))
    models = ", ".join(f"{m} ({fp[:8]})" for m, fp in sorted(set(zip(rows.model, rows.model_fingerprint))))
    dtypes = ", ".join(sorted(set(rows.dtype.astype(str))))
    return f"Measured: {when} on: {devices}; {dtypes}; models {models}"


def markdown(card: pd.DataFrame, everything: pd.DataFrame) -> str:
    rows = everything[everything.config_hash.isin(set(card.attrs["read"].config))]  # what the comparisons read
    lossless = f"{int(rows.lossless.sum())}/{len(rows)}"
    lines = [
        "# Which of the paper's claims replicate", "",
        f"{_ran_on(rows)}. Rows read: {len(rows)}, lossless {lossless} (every method's tokens equal AR's); "
        f"{_prompts(card)} (the section Power: n and interval widths per claim, and what the rest costs).", "",
        *headline(card), "",
        f"**How it is read.** The stand-ins loop on raw prompts: past its first loop an answer repeats itself, which "
        "every copying drafter predicts perfectly. So the reading that answers the paper's question here is the "
        f"**{LOOP_FREE}**: each answer up to the first position whose next 32 tokens already occurred earlier in it, "
        "tau over the forwards that produced those tokens. Its prompts come from the protocol's runs and from runs "
        f"stopped at that loop (stop_at_loop=true: every lossless method stops at the same token); {_twins(card)}. "
        f"Beside it, the **{PROTOCOL}** on these looping models (raw prompts at the paper's answer lengths, loops "
        f"included) and the **{CHAT}** through the same window ({_chat_answers(everything)}). Claims 1 and 4 have no "
        "window reading: drafted tokens per forward are not recorded, and the clock is not per token.", "",
        f"**Verdicts.** Per model x benchmark, our effect with its {CONFIDENCE:.0%} bootstrap interval over prompts "
        "(BCa, paired; n = prompts; a prompt on which no side drafted anything is left out of n and counted under "
        "'nothing drafted'). Direction: **holds** (the interval on the claim's side of the paper's threshold), "
        f"**contradicted** (on the other side), **inconclusive** (it straddles it, or n < {MIN_PROMPTS}). Size, where "
        "the paper gives a range: **within**, **above**, **below**, or **inconclusive** (it overlaps the range and "
        "reaches past it). Not counted, with a note: a comparison the paper gives no number for, or one that repeats "
        f"another's configurations; the clock is a GPU claim, a CPU gives a **{CPU_READING}**; **{NOT_LOSSLESS}**: "
        "some rows are not AR's tokens. Claim 6 is claim 2's comparison against the stronger source read for size, "
        "not a separate confirmation. Each benchmark is read once per reading, each method in its default "
        "configuration (the last section lists what was read and left out). 'vs no effect': where the interval lies "
        "against no difference. Copied (answer / prompt): % of the flattered method's tokens that were drafted "
        "copies of its own earlier answer / of the prompt. tau = tokens per target forward, the prefill included.",
        "",
        "## At a glance", "",
        "Per model, the counted comparisons over the five benchmarks that hold in each reading (loop-free window "
        "· paper's protocol · chat template; for the clock, that are faster than AR on this CPU), and those whose "
        "interval lies within the paper's range (loop-free window · paper's protocol); '-': nothing read.", "",
        SUMMARY_START, glance(card).to_markdown(index=False), "", survivors(card), "", power.progress(everything),
        SUMMARY_END, "",
        "## Summary by reading", "",
        "Per model, the counted comparisons over the five benchmarks: direction (hold / inconclusive / "
        "contradicted) and, beside it, size against the paper's range (within / above / below / inconclusive).", "",
        summary(card).to_markdown(index=False), "",
        *power.section(card, everything),
    ]
    for claim in CLAIMS:
        part = card[card.claim == claim.number].sort_values("reading", key=lambda r: r.map(READINGS.index),
                                                             kind="stable")
        lines += [f"## {claim.number}. {claim.name.capitalize()}: {claim.says}", "",
                  f"Paper: {claim.paper} ({claim.source}); direction threshold {_amount(claim.threshold, claim.unit)} "
                  f"({'above' if claim.above else 'below'}{', strictly' if claim.strict else ''})"
                  + (f"; size range {_amount(claim.size[0], claim.unit)} to {_amount(claim.size[1], claim.unit)}"
                     if claim.size else "; no size") + ".", ""]
        if part.empty:
            lines += ["No rows for this claim yet.", ""]
            continue
        t = pd.DataFrame({"reading": part.reading, "model": part.model, "benchmark": part.benchmark,
                          "comparison": part.comparison,
                          "n": part.n, f"ours [{CONFIDENCE:.0%} CI]": [_effect(r) for r in part.itertuples()],
                          "verdict": part.verdict, "size": part["size"], "vs no effect": part["vs no effect"],
                          "lossless": part.lossless})
        if part.paper.ne(claim.paper).any():
            t.insert(4, "paper", part.paper)
        if part.note.ne("").any():
            t["not counted: what it is"] = part.note
        if part["nothing drafted"].any():
            t["nothing drafted"] = part["nothing drafted"]
        if claim.flattered:
            t[f"copied {claim.flattered} (answer / prompt %)"] = [_copied(r) for _, r in part.iterrows()]
        if claim.number == 7:
            lines += [_bypass(part), ""]
        if claim.number == 4:
            for c, f in (("tau", "{:.2f}"), ("nodes/forward", "{:.1f}"), ("AR ms/token", "{:.1f}"),
                         ("GOOSE ms/forward", "{:.1f}")):
                t[c] = [f.format(v) for v in part[c]]
            lines += ["On a CPU a forward over many draft nodes costs several times one token's (GOOSE ms/forward "
                      "against AR ms/token at the nodes it verified): speedup ~ tau x AR ms/token / GOOSE "
                      "ms/forward. On the paper's GPU the two are close, so its speedups track tau. The interval "
                      "resamples prompts; a prompt's speedup is AR's mean time over GOOSE's over the timed repeats "
                      f"its rows record ({_repeats(part, everything)}).", ""]
        if part["read as"].ne("").any():
            t["read as"] = part["read as"]
        if part["not counted because"].ne("").any():
            t["not counted because"] = part["not counted because"]
        lines += [t.to_markdown(index=False), ""]
    return "\n".join(lines + _configurations(card))


def _bypass(part: pd.DataFrame) -> str:
    """Claim 7's note on the bypass: its ablation's range per reading, from the card, and where the why is."""
    own = part[part.comparison.str.startswith(f"{BYPASS_ABLATION} vs")]
    ranges = [f"{own[own.reading == r].effect.min():+.1f}% to {own[own.reading == r].effect.max():+.1f}% {r}"
              for r in (LOOP_FREE, PROTOCOL) if (own.reading == r).any()]
    if not ranges:
        return "No bypass ablation read yet."
    paper = ABLATION_DELTA_PCT.get(BYPASS_ABLATION)
    said = f" (the paper: {paper:+.1f}% on Qwen3-8B)" if paper is not None else ""
    return (f"Switching the bypass off against GOOSE: {'; '.join(ranges)}{said}. Why it "
            "raises tau on these stand-ins, and the one difference from the official code at full confidence: "
            "[bypass.md](bypass.md).")


def _prompts(card: pd.DataFrame) -> str:
    counted = card[card.counted.astype(bool)]
    if counted.empty:
        return "no counted comparison yet"
    return f"n = {counted.n.min()} to {counted.n.max()} prompts per counted comparison (median {counted.n.median():g})"


def _repeats(part: pd.DataFrame, rows: pd.DataFrame) -> str:
    """How many timed repeats the rows behind a claim's comparisons record: "1 each", "2 each", "1 or 2"."""
    hashes = {c.rsplit(" ", 1)[-1] for cs in part.configurations for c in str(cs).split("; ")}
    col = rows.loc[rows.config_hash.isin(hashes), "repeats"] if "repeats" in rows else pd.Series(dtype=object)
    seen = sorted({int(v) for v in pd.to_numeric(col, errors="coerce").fillna(1)})
    return "no rows" if not seen else f"{seen[0]} each" if len(seen) == 1 else f"{', '.join(map(str, seen))} by row"


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
    per_claim = []
    for claim in (c for c in CLAIMS if not c.gpu):
        parts = []
        for r in read:
            part = counted[(counted.claim == claim.number) & (counted.reading == r)]
            if not part.empty:
                parts.append(f"{int((part.verdict == HOLDS).sum())} of {len(part)} {_SHORT[r]}")
        if parts:
            again = f", claim {claim.restates} read for size" if claim.restates else ""
            per_claim.append(f"claim {claim.number} ({claim.name}{again}) {', '.join(parts)}")
    against = int((counted.verdict == CONTRADICTED).sum())
    sized = counted[(counted.reading == LOOP_FREE) & counted["size"].isin(["within", "above", "below", "inconclusive"])]
    count = sized["size"].value_counts()
    missing = [r for r in READINGS if r not in read]
    return [
        "**On these stand-ins** (two small model families on a CPU), the counted comparisons that hold in direction: "
        f"{'; '.join(per_claim)} ({against} contradicted in all; the rest inconclusive). "
        f"**In size**, {int(count.get('within', 0))} of {len(sized)} comparisons with a cited range lie within "
        f"the paper's in the loop-free window ({int(count.get('above', 0))} above it, "
        f"{int(count.get('below', 0))} below, {int(count.get('inconclusive', 0))} inconclusive). "
        "**Only a GPU run of the paper's models** can settle the clock (claim 4: 1.9-4.3x on a GPU; a CPU gives a "
        "reading) and whether the sizes hold at 7B-33B"
        + (f"; not read yet here: the {' and '.join(missing)} reading." if missing else ".")]


_SHORT = {PROTOCOL: "on the protocol", LOOP_FREE: "loop-free", CHAT: "with the chat template"}


def _twins(card: pd.DataFrame) -> str:
    """What the card's windows say of stopped runs against full ones (analysis.loops.windows)."""
    both, equal = card.attrs.get("twins", (0, 0))
    if not both:
        return "no prompt was run both stopped and whole yet, so no window of the one is checked against the other"
    return (f"on the {both} prompt runs made both ways, {equal} windows are equal (tokens and forwards)"
            + ("" if equal == both else f": {both - equal} differ, which a stop should never do"))


def _chat_answers(rows: pd.DataFrame) -> str:
    """How the GOOSE answers with the chat template end, from their rows and outputs records: at the length cap,
    and with a loop (a 32-token run repeated)."""
    chat = rows[rows.chat_template.astype(bool) & rows.method.eq(GOOSE) & rows.budget.eq(CLAIMS_BUDGET)]
    if "stop_at_loop" in chat:
        chat = chat[~chat.stop_at_loop.astype(bool)]
    if chat.empty:
        return "no chat-template rows yet"
    win = loop_free(chat)
    capped = int((chat.new_tokens >= chat.max_new_tokens).sum())
    looped = int((win.loop_free_share < 1).sum())
    return (f"they loop too: of {len(chat)} GOOSE answers with the template, {capped} ran to the length cap and "
            f"{looped} of the {len(win)} with outputs records repeat a 32-token run")


def _configurations(card: pd.DataFrame) -> list[str]:
    """The page's last section: every configuration a comparison read (hash, and what it sets otherwise than its
    method's default), then those left out and why."""
    read = card.attrs["read"].assign(config=lambda t: [c if s == "default" else f"{c} ({s})"
                                                       for c, s in zip(t.config, t.settings)])
    read = read.pivot_table(index=["model", "method", "budget"], columns="benchmark", values="config",
                            aggfunc=", ".join, fill_value="").reset_index()
    lines = ["## Configurations", "",
             "Each side of a comparison is its method's default configuration (conf/method/<name>.yaml over its "
             "Config), at the claims' budget; where several ran with the default settings (timed or not: the same "
             "drafts) the one with the most prompts. The config hash read, per benchmark (with any setting "
             "that differs from the default):", "", read.to_markdown(index=False), ""]
    skipped = card.attrs.get("not read", pd.DataFrame())
    if not skipped.empty:
        lines += ["Not read:", "", skipped.to_markdown(index=False), ""]
    return lines


def figure(card: pd.DataFrame):
    """Every comparison (rows) in every model x benchmark (columns), coloured by verdict, with its effect."""
    card = card.assign(row=[f"{c}. {n}: {x}" for c, n, x in zip(card.claim, card.name, card.comparison)],
                       col=[f"{m}\n{b}" for m, b in zip(card.model, card.benchmark)])
    rows = list(dict.fromkeys(card.sort_values(["claim"], kind="stable").row))
    cols = sorted(set(card.col))
    fig, ax = plt.subplots(figsize=(max(7.0, 3.2 + 1.25 * len(cols)), 1.4 + 0.34 * len(rows)))
    for r in card.itertuples():
        y, x = rows.index(r.row), cols.index(r.col)
        ax.add_patch(plt.Rectangle((x - 0.5, y - 0.5), 1, 1, color=COLOURS[r.verdict]))
        ax.text(x, y, _amount(r.effect, r.unit), ha="center", va="center", fontsize=7)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(cols)), cols, fontsize=7)
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    ax.xaxis.tick_top()
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLOURS.values()]
    ax.legend(handles, list(COLOURS), loc="upper center", bbox_to_anchor=(0.5, -0.01), ncol=3, fontsize=7)
    ax.set_title("Which of the paper's claims replicate\n(our effect; colour: verdict against the paper's threshold)",
                 fontsize=9, pad=30)
    return fig


def write(df: pd.DataFrame, out: Path, name: str = "claims") -> list[Path]:
    card = scorecard(df)
    out.mkdir(parents=True, exist_ok=True)
    md, csv, png = out / f"{name}.md", out / f"{name}.csv", out / f"{name}.png"
    md.write_text(markdown(card, df))
    card.round(6).to_csv(csv, index=False)
    fig = figure(card)
    fig.tight_layout()
    fig.savefig(png, dpi=130, metadata={"Software": None})
    plt.close(fig)
    return [md, csv, png]


def summary_block(text: str) -> str:
    """The summary table of a written claims.md (what the README's table must agree with)."""
    return text.split(SUMMARY_START, 1)[1].split(SUMMARY_END, 1)[0].strip()


def check_readme(readme: Path) -> str:
    """The text of a file the claims summary can go into, or one line saying why not (before anything is
    written): it exists and holds the two markers once each, the start before the end."""
    if not readme.is_file():
        raise SystemExit(f"--readme {readme}: no such file; give the README that holds the {SUMMARY_START} ... "
                         f"{SUMMARY_END} block (make reproduce-claims PROFILE=local: README.md)")
    text = readme.read_text()
    starts, ends = text.count(SUMMARY_START), text.count(SUMMARY_END)
    if starts != 1 or ends != 1 or text.index(SUMMARY_START) > text.index(SUMMARY_END):
        found = f"{starts} {SUMMARY_START} and {ends} {SUMMARY_END}"
        order = ", in the wrong order" if starts == ends == 1 else ""
        raise SystemExit(f"--readme {readme}: the claims summary goes between one {SUMMARY_START} line and one "
                         f"{SUMMARY_END} line after it (found {found}{order}); fix the markers, nothing was written")
    return text


def sync_readme(readme: Path, claims_md: Path) -> bool:
    """Put a written scorecard's summary into `readme` between the same markers; whether it changed."""
    text, block = check_readme(readme), summary_block(claims_md.read_text())
    head, rest = text.split(SUMMARY_START, 1)
    new = f"{head}{SUMMARY_START}\n{block}\n{SUMMARY_END}{rest.split(SUMMARY_END, 1)[1]}"
    if new != text:
        readme.write_text(new)
    return new != text
