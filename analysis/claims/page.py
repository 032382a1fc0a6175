"""The claims scorecard written out: claims.md (dated, saying what it ran on), claims.csv and claims.png, from
the rows alone, so a rerun over the same rows writes the same bytes."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from goose.analysis.bootstrap import CONFIDENCE, MIN_PROMPTS
from goose.analysis.claims import power
from goose.analysis.claims.card import CHAT, CLAIMS, LOOP_FREE, PROTOCOL, READINGS, scorecard
from goose.analysis.claims.summaries import chat_answers, glance, headline, summary, survivors, twins
from goose.analysis.claims.verdicts import CONTRADICTED, CPU_READING, HOLDS, INCONCLUSIVE, NOT_LOSSLESS
from goose.analysis.paper import ABLATION_DELTA_PCT, BYPASS_ABLATION
from goose.analysis.writers import ran_on
from goose.running.loop import LOOP_SPAN

COLOURS = {HOLDS: "#b7e1b1", INCONCLUSIVE: "#e6e6e6", CONTRADICTED: "#f4b6b2", CPU_READING: "#cfe0f3",
           NOT_LOSSLESS: "#8c8c8c"}
SUMMARY_START, SUMMARY_END = "<!-- summary -->", "<!-- /summary -->"


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


def markdown(card: pd.DataFrame, everything: pd.DataFrame) -> str:
    read, stopped = set(card.attrs["read"].config), card.attrs["stopped"]
    if not stopped.empty:  # runs stopped at their loop, read in the window as the configurations they are twins of
        read |= set(stopped["stopped run"][stopped["read as"].isin(read)])
    rows = everything[everything.config_hash.isin(read)]  # what the comparisons read
    plan, _ = power.find_plan(everything)
    if plan is not None:
        card.attrs["chat planned"] = set(plan.model[plan.chat_template])
    lossless = f"{int(rows.lossless.sum())}/{len(rows)}"
    lines = [
        "# Which of the paper's claims replicate", "",
        f"{ran_on(rows)}. Rows read: {len(rows)}, lossless {lossless} (every method's tokens equal AR's); "
        f"{_prompts(card)} (the section Power: n and interval widths per claim, and what the rest costs).", "",
        *headline(card), "",
        f"**How it is read.** The stand-ins loop on raw prompts: past its first loop an answer repeats itself, which "
        "every copying drafter predicts perfectly. So the reading that answers the paper's question here is the "
        f"**{LOOP_FREE}**: each answer up to the first position whose next {LOOP_SPAN} tokens already occurred "
        "earlier in it, tau over the forwards that produced those tokens. Its prompts come from the protocol's runs "
        "and from runs stopped at that loop (stop_at_loop=true: every lossless method stops at the same token); "
        f"{twins(card)}. "
        f"Beside it, the **{PROTOCOL}** on these looping models (raw prompts at the paper's answer lengths, loops "
        f"included) and the **{CHAT}** through the same window ({chat_answers(everything)}). Claim 1 is read in the "
        "window on the rows that carry the window's drafted and accepted counts per source (runs since they are "
        "recorded); claim 4 has no window reading: the clock is not per token.", "",
        "## At a glance", "",
        "Per model, the counted comparisons over the five benchmarks that hold in each reading (loop-free window "
        "· paper's protocol · chat template; for the clock, that are faster than AR on this CPU), and those whose "
        "interval lies within the paper's range (loop-free window · paper's protocol); '-': nothing read.", "",
        SUMMARY_START, power.progress(everything), "", glance(card).to_markdown(index=False), "", survivors(card),
        SUMMARY_END, "",
        "## Summary by reading", "",
        "Per model, the counted comparisons over the five benchmarks: direction (hold / inconclusive / "
        "contradicted) and, beside it, size against the paper's range (within / above / below / inconclusive).", "",
        summary(card).to_markdown(index=False), "",
        "## How a verdict is read", "",
        f"Per model x benchmark, our effect with its {CONFIDENCE:.0%} bootstrap interval over prompts "
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
        if claim.number == 1:
            lines += _depths(card.attrs.get("depths", pd.DataFrame()))
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
        for model, per_model in t.groupby("model", sort=True):  # one table a model: a screen narrower
            lines += [f"**{model}**", "", per_model.drop(columns="model").to_markdown(index=False), ""]
    return "\n".join(lines + _configurations(card))


def _depths(t: pd.DataFrame) -> list[str]:
    """Claim 1 at each depth (analysis.claims.depths), loop-free window first, above the pooled comparisons' table."""
    head = ("**At each depth**, the paper's way (its Figure 1 reads acceptance per depth): spine and branch nodes' "
            "acceptance inside GOOSE's trees at depth d and their ratio, paired over the prompts that drafted both "
            "there; size against the paper's range. From the rows that carry acceptance by depth per source "
            "(`spine_by_depth`, `branch_by_depth`; runs since they are recorded).")
    if t.empty:
        return [head + " No rows read here carry them yet.", ""]
    t = t.sort_values("reading", key=lambda r: r.map(READINGS.index), kind="stable")
    return [head, "", t[["reading", *[c for c in t.columns if c != "reading"]]].to_markdown(index=False), ""]


def _bypass(part: pd.DataFrame) -> str:
    """Claim 7's note on the bypass: its ablation's range per reading, from the card, and where the why is."""
    own = part[part.comparison.str.startswith(f"{BYPASS_ABLATION} vs")]
    ranges = [f"{own[own.reading == r].effect.min():+.1f}% to {own[own.reading == r].effect.max():+.1f}% {r}"
              for r in (LOOP_FREE, PROTOCOL) if (own.reading == r).any()]
    if not ranges:
        return "No bypass ablation read yet."
    paper = ABLATION_DELTA_PCT.get(BYPASS_ABLATION)
    said = f" (the paper: {paper:+.1f}% on Qwen3-8B)" if paper is not None else ""
    return (f"Switching the bypass off against GOOSE: {'; '.join(ranges)}{said}. Why it can raise tau on "
            "these stand-ins (in the loop-free window above all: their long copied chains are rejected early), and "
            "the one difference from the official code at full confidence: [bypass.md](bypass.md).")


def _prompts(card: pd.DataFrame) -> str:
    """n over the counted comparisons of tau, and apart from them the clock's (a CPU reads it, never settles it)."""
    counted = card[card.counted.astype(bool)]
    if counted.empty:
        return "no counted comparison yet"
    clock = counted.claim.isin([c.number for c in CLAIMS if c.gpu])
    said = [f"n = {g.n.min()} to {g.n.max()} prompts per counted comparison{what} (median {g.n.median():g})"
            for g, what in ((counted[~clock], ""), (counted[clock], " of the clock")) if not g.empty]
    return "; ".join(said)


def _repeats(part: pd.DataFrame, rows: pd.DataFrame) -> str:
    """How many timed repeats the rows behind a claim's comparisons record: "1 each", "2 each", "1 or 2"."""
    hashes = {c.rsplit(" ", 1)[-1] for cs in part.configurations for c in str(cs).split("; ")}
    col = rows.loc[rows.config_hash.isin(hashes), "repeats"] if "repeats" in rows else pd.Series(dtype=object)
    seen = sorted({int(v) for v in pd.to_numeric(col, errors="coerce").fillna(1)})
    return "no rows" if not seen else f"{seen[0]} each" if len(seen) == 1 else f"{', '.join(map(str, seen))} by row"


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
    stopped = card.attrs.get("stopped", pd.DataFrame())
    if not stopped.empty:
        t = stopped.assign(same=stopped["stopped run"].eq(stopped["read as"]))
        t["read as"] = [("its own configuration (memory=run, or no whole run)" if same else f"whole twin {h}")
                        for same, h in zip(t.same, t["read as"])]
        lines += ["Runs stopped at their first loop (stop_at_loop=true), in the window readings: each read as its "
                  "whole twin's configuration (the same settings but the stop) where it has one, so the hash read "
                  "above is the twin's:", "", t.drop(columns="same").to_markdown(index=False), ""]
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
