"""Tables as Markdown, LaTeX and CSV, figures as PNG and PDF, into one folder."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

TAU_NOTE = "tau = generated tokens / target forwards incl. prefill, pooled over prompts (AR = 1.0)"
ALERT = "VIOLATED"  # a cell starting with this is set in bold in the .md and .tex tables


def _bold_alerts(t: pd.DataFrame, bold) -> pd.DataFrame:
    return t.map(lambda v: bold(v) if isinstance(v, str) and v.startswith(ALERT) else v)


TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
               "<": r"\textless{}", ">": r"\textgreater{}"}


def _tex(v: str) -> str:
    return "".join(TEX_SPECIAL.get(ch, ch) for ch in v)


def to_latex(t: pd.DataFrame, index: bool) -> str:
    """LaTeX with every name and text cell escaped (a bare % in "gain %" would comment out the rest of
    its row) and alerts in bold."""
    tex = _bold_alerts(t.map(lambda v: _tex(v) if isinstance(v, str) else v), lambda v: r"\textbf{" + v + "}")
    tex.columns = [_tex(str(c)) for c in t.columns]
    if index:
        tex.index = tex.index.map(lambda v: _tex(str(v)))
    return tex.to_latex(index=index, float_format="%.3f", na_rep="--", escape=False)


def _counts(name, col: pd.Series) -> bool:
    """A column of prompt counts (n, n <benchmark>, n_<benchmark>, prompts) held as floats by a pivot's blanks."""
    named = str(name) in ("n", "prompts") or str(name).startswith(("n ", "n_"))
    values = pd.to_numeric(col, errors="coerce").dropna()
    return named and col.dtype.kind == "f" and bool((values == values.round()).all())


def write_table(t: pd.DataFrame, out: Path, name: str, title: str, as_written: bool = False) -> list[Path]:
    """md, tex and csv. `as_written`: every cell is text shown as it is ("1.00 ± 0.00" and "1.00" alike),
    not reformatted as a number."""
    out.mkdir(parents=True, exist_ok=True)
    t = t.astype({c: "Int64" for c in t.columns if _counts(c, t[c])})  # prompt counts print as 3, not 3.000
    index = not isinstance(t.index, pd.RangeIndex)  # row numbers are not worth a column
    md = out / f"{name}.md"
    bold = _bold_alerts(t, lambda v: f"**{v}**")
    blanks = bold.astype(object).where(bold.notna(), None)  # tabulate leaves None cells empty, prints NaN as "nan"
    text = blanks.to_markdown(index=index, floatfmt=".3f", missingval="", disable_numparse=as_written)
    md.write_text(f"# {title}\n\n{TAU_NOTE}.\n\n{text}\n")
    tex = out / f"{name}.tex"
    tex.write_text(to_latex(t, index))
    csv = out / f"{name}.csv"
    t.to_csv(csv, index=index)
    return [md, tex, csv]


def save_figure(fig, out: Path, name: str) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    for p in paths:
        fig.savefig(p, dpi=150)
    plt.close(fig)
    return paths


def ran_on(rows: pd.DataFrame) -> str:
    """What rows were measured on, from the rows alone: "Measured: <days> on: <devices, threads>; <dtypes>; torch
    <versions>; models <name (fingerprint)>; drafting code: <versions a method>"."""
    days = sorted({str(t)[:10] for t in rows.timed_at if pd.notna(t) and str(t)})
    when = days[0] if len(days) == 1 else f"{days[0]} to {days[-1]}" if days else "unknown date"
    devices = ", ".join(sorted({f"{d} with {t} thread{'' if str(t) == '1' else 's'}" if str(t) else str(d)
                                for d, t in zip(rows.device_name, rows.threads)}))
    models = ", ".join(f"{m} ({fp[:8]})" for m, fp in sorted(set(zip(rows.model, rows.model_fingerprint))))
    dtypes = ", ".join(sorted(set(rows.dtype.astype(str))))
    torch = sorted({str(v) for v in rows.get("torch", pd.Series(dtype=str)).dropna() if str(v)})
    said = f"Measured: {when} on: {devices}; {dtypes}" + (f"; torch {', '.join(torch)}" if torch else "")
    return said + f"; models {models}" + _code(rows)


def _code(rows: pd.DataFrame) -> str:
    """How many versions of its drafting code each method's rows come from (column code_fingerprint): the methods
    with more than one named."""
    code = rows.get("code_fingerprint", pd.Series("", index=rows.index)).fillna("").astype(str)
    known = code.ne("")
    if not known.any():
        return ""
    per = code[known].groupby(rows.method[known]).nunique()
    more = ", ".join(f"{m} ({k})" for m, k in per[per > 1].items())
    blank = int((~known).sum())
    return (f"; drafting code: one version a method{', except ' + more if more else ''} (column code_fingerprint"
            + (f"; {blank} rows predate it)" if blank else ")"))
