"""The report as one self-contained HTML page: the figures embedded as base64 PNG, their
captions and the tables behind them, the warnings by kind, and the analyses the store cannot
support with their recipes, so the page can be mailed or archived without its folder.

>>> import paradnn
>>> from paradnn.report import write_report
>>> write_report(paradnn.load("results.db"), "report/")   # doctest: +SKIP
PosixPath('report/index.html')
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
from pathlib import Path
from typing import Sequence

import pandas as pd

from paradnn import hostmem
from paradnn import plots as P
from paradnn.analysis.columns import (
    PLATFORM_KEY, label, ok_rows, platform_label, present, software_label, unstable_mask,
    warning_meaning,
)
from paradnn.analysis.framework import frameworks
from paradnn.errors import ParadnnError
from paradnn.record import WARNING_KINDS, peak_and_ceiling
from paradnn.report.cells import is_seconds, table_column
from paradnn.report.parts import Section, Unsupported
from paradnn.report.rows import marks, plural
from paradnn.report.sections import plan
from paradnn.report.summary import summary_table
from paradnn.report.warnings import warnings_table

MAX_TABLE_ROWS = 60
#: Rows of the summary shown whole; a longer one scrolls in a box about this tall.
SUMMARY_ROWS = 20
MAX_WARNING_ROWS = 40


def png(fig) -> tuple[str, int]:
    """The figure as base64 PNG at 2x resolution (``plots.DPI_2X``), and its width in CSS
    pixels (1x)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=P.DPI_2X)
    return base64.b64encode(buf.getvalue()).decode("ascii"), round(fig.get_figwidth() * P.DPI_1X)


def html_table(df: pd.DataFrame) -> str:
    """A table (its first ``MAX_TABLE_ROWS`` rows) with every header naming its unit
    (``examples_per_sec [examples/s]``), each column in one number format
    (:func:`table_column`), scrolling sideways inside its own box when wider than the page."""
    shown = df.head(MAX_TABLE_ROWS)
    cells = pd.DataFrame({i: table_column(list(shown.iloc[:, i]), is_seconds(str(c)))
                          for i, c in enumerate(shown.columns)}, index=shown.index)
    cells.columns = [label(str(c), table=True) for c in shown.columns]
    text = cells.to_html(index=False, border=0, classes="data")
    if len(df) > len(shown):
        text += f"<p class=note>first {len(shown)} of {len(df)} rows</p>"
    return f'<div class="scroll">{text}</div>'


# Page width: the figures' 1x width (plots.PAGE_WIDTH_IN at DPI_1X = 1100 px) plus padding.
_CSS = """
body{font-family:system-ui,sans-serif;max-width:1140px;margin:2em auto;padding:0 20px;color:#222;
line-height:1.45}
h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
figure{margin:1em 0} img{max-width:100%;height:auto;outline:1px solid #e4e4e4;display:block}
figcaption{font-size:.95em;color:#333;margin:.4em 0}
.scroll{max-width:100%;overflow-x:auto;background:linear-gradient(to right,#fff 30%,#fff0)
left/2em 100% no-repeat local,linear-gradient(to left,#fff 30%,#fff0) right/2em 100% no-repeat local,
radial-gradient(farthest-side at 0 50%,#0003,#0000) left/.8em 100% no-repeat scroll,
radial-gradient(farthest-side at 100% 50%,#0003,#0000) right/.8em 100% no-repeat scroll}
.tall{max-height:36em;overflow-y:auto} .tall thead th{position:sticky;top:0;background:#fff}
table.summary td:first-child,table.summary th:first-child{text-align:left}
table.data{border-collapse:collapse;font-size:.85em} table.data td,table.data th{padding:2px 6px;
border-bottom:1px solid #ddd;text-align:right} .note{font-size:.9em;color:#555}
table.data td{white-space:nowrap} table.summary td:first-child{white-space:normal;min-width:16em}
details{margin:.4em 0 1.4em} summary{cursor:pointer;color:#036}
ul.missing li{margin:.8em 0} pre{background:#f5f5f5;padding:.5em .8em;white-space:pre-wrap;
overflow-wrap:anywhere;font-size:.9em;margin:.3em 0}
.warn{color:#a00}
"""


def summary_html(df: pd.DataFrame) -> str:
    """The first section: every run's throughput, step time with its 95% CI, utilization and
    status (:func:`paradnn.report.summary.summary_table`). Every row shows; beyond
    ``SUMMARY_ROWS`` rows the box scrolls (its header stays in view, a note says so), so that
    the warnings and contents stay near the top of a long store. Wider than the page, the
    table scrolls sideways inside its box."""
    table = summary_table(df)
    if table.empty:
        return ""
    util = table.attrs.get("utilization")
    text = table.to_html(index=False, na_rep="", border=0, classes="data summary")
    tall = len(table) > SUMMARY_ROWS
    return ('<section id="summary"><h2>How fast: every run</h2>'
            f"<p class=note>{len(table)} records, grouped by family. Throughput: global batch / "
            "median step time; step time: median of the timed calls with its distribution-free "
            "95% confidence interval; "
            + (f"utilization: {html.escape(util)} (achieved FLOP/s over the peak of the run's device and "
               "dtype, see peak_id in the data); " if util else "utilization: no run has one; ")
            + "unstable: the timing missed its precision target."
            + (f" The box scrolls: {len(table)} rows." if tall else "") + "</p>"
            f'<div class="scroll{" tall" if tall else ""}">{text}</div></section>')


def peaks_and_ceilings(rows: pd.DataFrame) -> str:
    """What the utilizations of ``rows`` divide by, once per platform and dtype (and per peak
    and ceiling where several were used): ``platform dtype: peak ... (source), ceiling ...``
    (:func:`paradnn.record.peak_and_ceiling`); "" without peaks."""
    if not len(rows) or "peak_source" not in rows.columns:
        return ""
    keys = [c for c in ("dtype", "peak_id", "ceiling_id", "peak_source") if c in rows.columns]
    seen: dict[str, None] = {}
    for _, r in rows.assign(_platform=rows.apply(platform_label, axis=1)).drop_duplicates(
            ["_platform", *keys]).iterrows():
        seen[f"{r['_platform']} {r.get('dtype')}: {peak_and_ceiling(r)}"] = None
    return "; ".join(seen)


def warnings_html(df: pd.DataFrame) -> str:
    """The Warnings section, by kind (``paradnn.record.WARNING_KINDS``): the physics warnings
    (impossible values, marked red in the figures, not to be published) with each code's
    meaning and the flagged runs; then the provenance and precision notes (a nominal
    denominator, a contended host, unstable timing), each code once with its count and meaning,
    which mark nothing red. "" for stores from before the checks."""
    esc = html.escape
    wt = warnings_table(df, "physics")
    notes = warnings_table(df, None)
    notes = notes[notes["kind"] != "physics"] if len(notes) else notes
    if wt.empty and notes.empty:
        if "warnings" in df.columns:
            return ('<section id="warnings"><h2>Warnings</h2><p>No run carries a physics '
                    "warning (utilization above 1, point above its roof, analytic/XLA FLOP "
                    "mismatch) or a note.</p></section>")
        return ""
    out = ['<section id="warnings">']
    if wt.empty:
        out.append("<h2>Warnings</h2><p>No run carries a physics warning (utilization above 1, "
                   "point above its roof, analytic/XLA FLOP mismatch): every number below is "
                   "physically possible.</p>")
    else:
        out += ["<h2 class=warn>Warnings</h2>",
                f"<p>{len(wt)} physics warnings on {marks(df)[1]} runs: impossible values. These "
                "runs are marked in the figures (red ring on rooflines, red frame and ! on heat "
                "maps), not hidden; their numbers should not be published before the cause is "
                "fixed.</p><ul>"]
        for code, g in wt.groupby("code", sort=True):
            out.append(f"<li><b>{esc(code)}</b> ({plural(len(g), 'run')}): {esc(warning_meaning(code))}</li>")
        out.append("</ul>")
        shown = wt.head(MAX_WARNING_ROWS).drop(columns=["likely cause", "kind"])  # said once per code above
        out.append(html_table(shown))
        if len(wt) > len(shown):
            out.append(f"<p class=note>first {len(shown)} of {len(wt)} warnings</p>")
    for kind in ("provenance", "precision"):
        mine = notes[notes["kind"] == kind] if len(notes) else notes
        if mine.empty:
            continue
        out.append(f"<h3>{esc(kind.capitalize())} notes</h3><p class=note>{esc(WARNING_KINDS[kind])}; "
                   "they mark nothing red.</p><ul>")
        for code, g in mine.groupby("code", sort=True):
            out.append(f"<li><b>{esc(code)}</b> ({plural(len(g), 'run')}): {esc(warning_meaning(code))}</li>")
        out.append("</ul>")
    out.append("</section>")
    return "\n".join(out)


def huge_pages_line(rows: pd.DataFrame) -> str:
    """How the CPU runs' host memory was backed (``host_huge_pages``, paradnn.hostmem), as counts
    ("4 malloc, 2 not recorded"); "" without CPU runs. It moves a large CPU model's step time,
    so a store mixing backings says so."""
    if not len(rows) or "device_platform" not in rows.columns:
        return ""
    cpu = rows[rows["device_platform"] == "cpu"]
    if not len(cpu):
        return ""
    values = cpu["host_huge_pages"] if "host_huge_pages" in cpu.columns else pd.Series("", index=cpu.index)
    counts = values.map(hostmem.recorded).value_counts()
    return ", ".join(f"{n} {name}" for name, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def render_html(df: pd.DataFrame, sections: list[Section], missing: list[Unsupported],
                title: str = "paradnn report", generated_utc: str | None = None,
                written: bool = False) -> str:
    """The report page as a string (see :func:`write_report`); ``written``: the recipes' sweep
    files were written where their commands name them (else the page asks the reader to)."""
    esc = html.escape
    counts = df["status"].value_counts().to_dict() if "status" in df.columns else {"rows": len(df)}
    rows = ok_rows(df)
    plats = sorted(rows.apply(platform_label, axis=1).unique()) if len(rows) and present(rows, PLATFORM_KEY) else []
    soft = sorted(set(rows.apply(software_label, axis=1)) - {"unknown software"}) if len(rows) else []
    fws = frameworks(rows) if len(rows) else []
    peaks = sorted(set(rows.get("peak_source", pd.Series(dtype=object)).dropna()))
    methods = sorted(set(rows.get("peak_method", pd.Series(dtype=object)).dropna()))
    ceilings = peaks_and_ceilings(rows)
    pages = huge_pages_line(rows)
    n_unstable = int(unstable_mask(rows).sum())
    known = int(rows["stable"].notna().sum()) if "stable" in rows.columns else 0
    out = [f"<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
           f'<meta name=viewport content="width=device-width, initial-scale=1"><title>{esc(title)}</title>',
           f"<style>{_CSS}</style></head><body><h1>{esc(title)}</h1>",
           f"<p>{len(df)} records: " + ", ".join(f"{v} {esc(str(k))}" for k, v in counts.items())
           + f". Platforms: {esc(', '.join(plats) or 'none')}. Frameworks: {esc(', '.join(fws) or 'none')}. "
           f"Software: {esc(', '.join(soft) or 'unknown')}. "
           f"Peaks used for utilization and rooflines: {esc(', '.join(peaks) or 'none')} "
           "(spec = vendor spec sheet, measured = paradnn probe)"
           + (f"; method: {esc('; '.join(methods))}" if methods else "") + ". "
           + (f"Peak and measured ceiling: {esc(ceilings)}. " if ceilings else "")
           + ("Host memory of the CPU runs (host_huge_pages: malloc = huge pages asked for, "
              f"none = 4 KiB pages): {esc(pages)}. " if pages else "")
           + (f"Timing precision: {n_unstable} of {known} ok runs are unstable (their timing missed "
              "its precision target): hollow markers and cross-hatched cells in the figures, left "
              "out of regressions and speedup summaries. " if known else
              "Timing precision: unknown (these records predate the stability flag). ")
           + "Every number comes from the store's records; units are in the axis labels and table "
           "headers.</p>"]
    if generated_utc:
        out.append(f"<p class=note>generated {esc(generated_utc)} UTC by paradnn</p>")
    warn = warnings_html(df)
    out.append(summary_html(df))
    out.append("<h2>Contents</h2><ul>"
               + '<li><a href="#summary">How fast: every run</a></li>'
               + ('<li><a href="#warnings">Warnings</a></li>' if warn else "")
               + "".join(f'<li><a href="#{esc(s.id)}">{esc(s.title)}</a></li>' for s in sections)
               + '<li><a href="#unsupported">Analyses this store cannot support</a></li></ul>')
    if warn:
        out.append(warn)
    for s in sections:
        out.append(f'<section id="{esc(s.id)}" data-analysis="{esc(s.id)}"><h2>{esc(s.title)}</h2>')
        for item in s.items:
            out.append("<figure>")
            fig = item.make_figure()
            if fig is not None:
                data, width = png(fig)
                out.append(f'<img width="{width}" alt="{esc(item.caption[:120])}" '
                           f'src="data:image/png;base64,{data}">')
            out.append(f"<figcaption>{esc(item.caption)}</figcaption></figure>")
            if item.table is not None:
                out.append(f"<details><summary>table behind this figure ({len(item.table)} rows)</summary>"
                           f"{html_table(item.table)}</details>")
        out.append("</section>")
    out.append('<section id="unsupported"><h2>Analyses this store cannot support</h2>')
    if missing:
        # A sweep file's text -> (the name it was shown under, the id of its <pre>): a later
        # item needing the same text links to it, under the name the page shows.
        items, shown = [], {}
        for m in missing:
            anchor = f"sweep-file-{m.id}"  # the id of this item's sweep file, if it shows one
            text = [f'<li data-analysis="{esc(m.id)}"><b>{esc(m.title)}</b>: needs {esc(m.needs)}.']
            name = m.command.split()[2] if m.sweep_file else ""
            if m.sweep_file and m.sweep_file in shown:
                first, where = shown[m.sweep_file]
                link = f'<a href="#{esc(where)}">sweep file <code>{esc(first)}</code> above</a>'
                text.append(f"<br>The {link} supplies this too:" if first == name else
                            (f"<br>The {link}, written again as <code>{esc(name)}</code>:" if written else
                             f"<br>Write the {link} again as <code>{esc(name)}</code> (the same content):"))
            elif m.sweep_file:
                shown[m.sweep_file] = (name, anchor)
                text.append((f"<br>This report wrote the sweep file <code>{esc(name)}</code>:" if written else
                             f"<br>Write this sweep file (<code>{esc(name)}</code>):")
                            + f'<pre id="{esc(anchor)}">{esc(m.sweep_file)}</pre>')
            if m.change:
                text.append(f"<br>{esc(m.change[0].upper() + m.change[1:])}:")
            if m.command:
                text.append(f'<pre class="command">{esc(m.command)}</pre>')
            if m.estimate:
                text.append(f'<span class="estimate">Estimated time on this platform: '
                            f"{esc(m.estimate)}.</span>")
            items.append("".join(text) + "</li>")
        out.append('<ul class="missing">' + "".join(items) + "</ul>")
    else:
        out.append("<p>None: every analysis is above.</p>")
    out.append("</section></body></html>")
    return "\n".join(out)


#: The report folder's subfolder of the recipes' sweep files (their commands name them there).
RECIPES_DIR = "recipes"


def write_recipes(missing: Sequence[Unsupported], folder: Path) -> list[Path]:
    """Write the sweep file of every recipe in ``missing`` that has one as ``folder/<its
    file_name>`` (the path its command names), replacing an older report's; returns the
    paths. Nothing is written, and no folder made, where no recipe has a file."""
    files = {m.file_name: m.sweep_file for m in missing if m.sweep_file and m.file_name}
    if not files:
        return []
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        out.append(path)
    return out


def write_report(df: pd.DataFrame, out_dir: str | Path, ops: pd.DataFrame | None = None,
                 title: str = "paradnn report", store: str | Sequence[str] = "results.db",
                 named_dir: str | Path | None = None) -> Path:
    """Write ``out_dir/index.html``: every analysis ``df`` supports (figures as embedded PNG,
    captions, the tables behind them), the physics warnings, and the analyses it cannot
    support with the data they need, the command that supplies it (naming ``store``, the
    first one if several) and its estimated time. ``ops`` (from
    :func:`paradnn.experiments.profile.capture`) adds the operation-level roofline. The recipes' sweep
    files are written to ``out_dir/recipes/``; their commands name them under ``named_dir``
    (default ``out_dir``: the folder the page ends up in, where a caller builds it elsewhere
    first). Returns the path of the page."""
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ParadnnError(f"report: output {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    first = store if isinstance(store, str) else (list(store) or ["results.db"])[0]
    named = Path(named_dir) if named_dir is not None else out_dir
    sections, missing = plan(df, ops, store=str(first), folder=str(named / RECIPES_DIR))
    write_recipes(missing, out_dir / RECIPES_DIR)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    page = render_html(df, sections, missing, title=title, generated_utc=stamp, written=True)
    path = out_dir / "index.html"
    path.write_text(page, encoding="utf-8")
    return path
