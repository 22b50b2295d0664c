"""What the report shows, as a reader sees it: one number format per table column, every table
readable at 800 px (wide ones scroll inside their own box, no row hidden), no reference to a
sweep file the page does not show, the host CPU figure naming the runs it cannot draw and
drawing every other point visibly, and an operation-level figure without a roof titled as what
it is."""

import html
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import paradnn
from paradnn import plots as P
from paradnn import report
from paradnn.analysis import oplevel
from paradnn.report.html import SUMMARY_ROWS
from paradnn.report.sections import OPLEVEL_NO_ROOF_TITLE

from data import golden

SMOKE = Path(__file__).resolve().parent / "data" / "smoke_cpu.db"


def _ops(peaks: bool = True) -> pd.DataFrame:
    """A small per-operation profile (paradnn.experiments.profile.capture's columns), with or without the
    device's peaks in its attrs."""
    ops = pd.DataFrame({
        "name": ["fusion.1", "fusion.2", "dot.3", "copy"], "opcode": ["fusion", "fusion", "dot", "copy"],
        "category": [oplevel.MATMUL, oplevel.ELEMENTWISE, oplevel.MATMUL, oplevel.FORMATTING],
        "time_s": [0.5, 0.4, 0.02, 0.1], "flops": [1e10, 1e6, 32768, 0.0],
        "bytes": [1e8, 4e6, 11264, 1e6], "executions": [1, 1, 1, 1],
    })
    ops["time_fraction"] = ops["time_s"] / ops["time_s"].sum()
    ops["flops_per_sec"] = ops["flops"] / ops["time_s"]
    ops["arithmetic_intensity"] = ops["flops"] / ops["bytes"]
    ops.attrs.update(approximate=True, note="per-operation times are approximate on CPU")
    if peaks:
        ops.attrs.update(peak_flops=1e11, peak_bytes_per_sec=1e9, peak_source="measured")
    else:
        ops.attrs.update(peak_flops=float("nan"), peak_bytes_per_sec=None, peak_source="unknown",
                         peak_method="no quiet probe of this host on record")
    return ops


@pytest.fixture(scope="module")
def smoke_page(tmp_path_factory):
    """The report of the real smoke store (a CPU sweep) with a profile: path and text."""
    path = report.write_report(paradnn.load(str(SMOKE)), tmp_path_factory.mktemp("smoke"),
                               ops=_ops(), store="smoke.db")
    return path, path.read_text()


@pytest.fixture(scope="module")
def golden_page(tmp_path_factory):
    """The report of the synthetic golden store (220 rows, every analysis but a few)."""
    path = report.write_report(golden.make_frame(), tmp_path_factory.mktemp("golden"), ops=_ops())
    return path, path.read_text()


# -- one number format per column --------------------------------------------------------------

class _Tables(HTMLParser):
    """Every <table> of a page: (its class, header cells, rows of body cells), as text."""

    def __init__(self):
        super().__init__()
        self.tables, self._cell, self._row = [], None, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append((dict(attrs).get("class", ""), [], []))
        elif tag == "tr" and self.tables:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(("".join(self._cell).strip(), tag))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            _, head, body = self.tables[-1]
            if all(kind == "th" for _, kind in self._row):
                head.extend(text for text, _ in self._row)
            else:
                body.append([text for text, _ in self._row])
            self._row = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def _significant_digits(number: str) -> int:
    digits = number.lstrip("-").replace(".", "").lstrip("0")
    return len(digits)


_SI = re.compile(r"-?\d+(\.\d+)?[kMGTP]?")
_DURATION = re.compile(r"(\d+(?:\.\d+)?) (?:ns|µs|ms|s)|\d+m\d\ds|\d+h\d\dm|\d+d \d\dh")


def _kind(cell: str) -> str:
    """The number format of a cell: zero (any format's), whole, si3 (3 significant digits,
    SI suffix), duration (3 significant digits and a unit, or minutes and seconds), percent;
    or text."""
    if cell in ("0", "0 s"):
        return "zero"
    if re.fullmatch(r"-?\d+", cell):
        return "whole"
    if _SI.fullmatch(cell) and _significant_digits(cell.rstrip("kMGTP")) == 3:
        return "si3"
    m = _DURATION.fullmatch(cell)
    if m and (m.group(1) is None or _significant_digits(m.group(1)) == 3):
        return "duration"
    if re.fullmatch(r"\d+\.\d%( \(\w+\))?", cell):
        return "percent"
    return "text"


def _column_formats(page: str) -> list[tuple[str, str, set[str], list[str]]]:
    """(table class, header, kinds of its non-empty cells, cells) per column of every table."""
    parser = _Tables()
    parser.feed(page)
    out = []
    for cls, head, body in parser.tables:
        for j, name in enumerate(head):
            cells = [html.unescape(r[j]) for r in body if j < len(r) and r[j]]
            out.append((cls, name, {_kind(c) for c in cells}, cells))
    return out


def _one_format(cells: list[str]) -> bool:
    """Whether the numbers among ``cells`` share one format (text cells may not mix in)."""
    kinds = [(c, _kind(c)) for c in cells if _kind(c) != "zero"]
    if {k for _, k in kinds} <= {"whole"}:
        return True
    # 3 significant digits throughout, where 510 or 100 are 3-digit numbers of that format too.
    if all(k == "si3" or (k == "whole" and re.fullmatch(r"-?\d{3}", c)) for c, k in kinds):
        return True
    return len({k for _, k in kinds}) == 1 and kinds[0][1] in ("duration", "percent")


def _check_one_format_per_column(page: str) -> int:
    numeric = 0
    for cls, name, kinds, cells in _column_formats(page):
        # No exponent anywhere: 1.009e+09 reads 1.01G.
        assert not any(re.fullmatch(r"-?[\d.]+e[+-]?\d+", c) for c in cells), (name, cells)
        if not kinds - {"text", "zero"}:
            continue
        numeric += 1
        assert _one_format(cells), (cls, name, kinds, cells[:12])
    return numeric


def test_every_table_column_of_the_smoke_report_has_one_number_format(smoke_page):
    _, page = smoke_page
    assert _check_one_format_per_column(page) >= 10
    # The op table's FLOP/s column mixed 1.012e+09 and 756700000: one format now, 3 digits.
    cols = {n: (k, c) for _, n, k, c in _column_formats(page)}
    kinds, cells = cols["flops_per_sec [FLOP/s]"]
    assert kinds == {"si3"} and "1.64M" in cells and "20.0G" in cells, cells
    # Durations in the unit that reads best, whatever the column: time_s 0.02 reads 20.0 ms.
    assert "20.0 ms" in cols["time_s"][1]


def test_every_table_column_of_the_golden_report_has_one_number_format(golden_page):
    _, page = golden_page
    assert _check_one_format_per_column(page) >= 30


def test_summary_throughput_and_step_times_have_three_significant_digits(smoke_page):
    _, page = smoke_page
    cols = {name: cells for cls, name, _, cells in _column_formats(page) if "summary" in cls}
    assert cols["throughput [examples/s]"] and all(_kind(c) == "si3" for c in cols["throughput [examples/s]"])
    d = r"(\d+(?:\.\d+)? (?:ns|µs|ms|s))"
    for cell in cols["step time: median (95% CI)"]:
        m = re.fullmatch(fr"{d} \({d} to {d}\)", cell)
        assert m and all(_kind(g) == "duration" for g in m.groups()), cell


# -- at 800 px: every table readable, no row hidden --------------------------------------------

_TABLES_JS = r"""
(async () => {
  for (const d of document.querySelectorAll('details')) d.open = true;
  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const out = [];
  for (const t of document.querySelectorAll('table')) {
    let box = t.parentElement;
    while (box && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    const rows = t.querySelectorAll('tbody tr');
    const last = rows[rows.length - 1];
    const b = (box || document.body).getBoundingClientRect();
    const rec = {cls: t.className, scrolls: !!box, tall: !!box && box.classList.contains('tall'),
                 tableWidth: t.getBoundingClientRect().width, boxLeft: b.left, boxRight: b.right,
                 clientWidth: box ? box.clientWidth : 0, scrollWidth: box ? box.scrollWidth : 0,
                 clientHeight: box ? box.clientHeight : 0, scrollHeight: box ? box.scrollHeight : 0};
    if (box && last) {
      // Scrolled to its end, the box shows the last row whole (no row hidden under anything).
      box.scrollTop = box.scrollHeight;
      const r = last.getBoundingClientRect(), bb = box.getBoundingClientRect();
      rec.lastRowVisible = r.bottom <= bb.top + box.clientTop + box.clientHeight + 1 && r.top >= bb.top - 1;
      box.scrollLeft = box.scrollWidth;  // and its right edge can be reached
      const cells = last.querySelectorAll('td');
      rec.lastCellReachable = cells.length === 0 ||
        cells[cells.length - 1].getBoundingClientRect().right <= bb.left + box.clientLeft + box.clientWidth + 1;
      box.scrollTop = 0; box.scrollLeft = 0;
    }
    out.push(rec);
  }
  return {viewport: window.innerWidth, scrollWidth: document.documentElement.scrollWidth, tables: out,
          note: (document.querySelector('#summary .note') || {}).textContent || ''};
})()"""


def _tables_at(path: Path, width: int) -> dict:
    from test_report import _Browser  # the suite's headless Chromium over DevTools

    browser = _Browser(width, 900)
    try:
        browser.open(path.as_uri())
        return browser.eval(_TABLES_JS)
    finally:
        browser.close()


def _check_tables(state: dict) -> None:
    assert state["scrollWidth"] <= state["viewport"], "the page itself scrolls sideways"
    assert state["tables"]
    for t in state["tables"]:
        # Every table sits in a box that scrolls sideways, inside the page.
        assert t["scrolls"], t
        assert t["boxLeft"] >= 0 and t["boxRight"] <= state["viewport"] + 0.5, t
        assert t["scrollWidth"] >= t["tableWidth"] - 1, t  # nothing of it out of reach
        assert t["lastRowVisible"] and t["lastCellReachable"], t
        if not t["tall"]:  # a box that is not a deliberate scroll box shows every row
            assert t["scrollHeight"] <= t["clientHeight"] + 1, t


def test_at_800px_every_table_scrolls_in_its_box_and_the_summary_shows_every_row(smoke_page):
    path, _ = smoke_page
    state = _tables_at(path, 800)
    _check_tables(state)
    summary = next(t for t in state["tables"] if "summary" in t["cls"])
    # 5 runs: the How fast box shows them all, with no scroll box of its own height.
    assert not summary["tall"] and summary["scrollHeight"] <= summary["clientHeight"] + 1
    # The widest tables are wider than the page at 800 px: they scroll, they are not cut.
    assert any(t["tableWidth"] > t["clientWidth"] + 1 for t in state["tables"])


def test_a_long_summary_scrolls_in_a_box_that_says_so_and_reaches_its_last_row(golden_page):
    path, page = golden_page
    state = _tables_at(path, 800)
    _check_tables(state)
    summary = next(t for t in state["tables"] if "summary" in t["cls"])
    assert summary["tall"] and summary["scrollHeight"] > summary["clientHeight"]
    assert f"The box scrolls: {len(golden.make_frame())} rows." in state["note"]
    assert len(golden.make_frame()) > SUMMARY_ROWS


# -- references to sweep files -----------------------------------------------------------------

def _missing_items(page: str) -> list[str]:
    section = page[page.index('<section id="unsupported">'):]
    return re.findall(r"<li data-analysis=\"[^\"]+\">(.*?)</li>", section, re.S)


def test_every_sweep_file_a_recipe_names_is_on_the_page(smoke_page):
    """'the sweep file speedup-software.yaml above' named a file the page never showed: every
    sweep file a recipe runs is shown in it, or linked to the one showing the same content, and
    the report wrote it where the command names it (its recipes folder)."""
    path, page = smoke_page
    shown: dict[str, str] = {}  # id -> sweep file text
    for m in re.finditer(r'<pre id="([^"]+)">(.*?)</pre>', page, re.S):
        shown[m.group(1)] = html.unescape(m.group(2))
    linked = 0
    names_shown: set[str] = set()
    for item in _missing_items(page):
        run = re.search(r'<pre class="command">paradnn sweep (\S+\.yaml)', item)
        if not run or run.group(1) == "YOUR_SWEEP.yaml" or run.group(1).startswith("sweeps/"):
            continue  # the reader's own file, or one that ships with paradnn (sweeps/smoke.yaml)
        name = run.group(1)
        assert Path(name).parent == path.parent / "recipes" and Path(name).exists(), name
        own = re.search(r'This report wrote the sweep file <code>([^<]+)</code>:<pre id="([^"]+)">', item)
        if own:
            assert own.group(1) == name and own.group(2) in shown
            assert Path(name).read_text() == shown[own.group(2)]
            names_shown.add(name)
            continue
        # Else a link to a file shown above, under its own name or saved again under this one.
        link = re.search(r'<a href="#([^"]+)">sweep file <code>([^<]+)</code> above</a>', item)
        assert link and link.group(1) in shown, item[:300]
        assert link.group(2) in names_shown
        assert link.group(2) == name or f"written again as <code>{name}</code>" in item, item[:300]
        linked += 1
    assert linked >= 2  # the grids' sensitivity entries, and the software speedup's file
    assert not re.search(r"speedup-software.yaml</code> above", page)


# -- the host CPU figure -----------------------------------------------------------------------

def test_host_cpu_section_says_which_runs_have_no_value_and_why():
    df = paradnn.load(str(SMOKE))
    sections, _ = report.plan(df)
    item = next(s for s in sections if s.id == "host_utilization").items[0]
    # The FC and RNN runs of the smoke store timed windows of 1-2 ms: /proc/stat never ticked.
    assert "2 FC and 2 RNN runs" in item.caption and "10 ms clock tick" in item.caption
    assert len(item.table) == int((df["status"] == "ok").sum())  # every ok run in the table
    fig = item.make_figure()
    assert "not drawn: 2 FC and 2 RNN runs" in fig.axes[0].get_title(loc="left").replace("\n", " ")


def test_host_cpu_figure_draws_equal_points_apart():
    """Two models at 100% host CPU at one batch were one dot: each is now its own marker,
    shifted sideways, translucent."""
    df = paradnn.load(str(SMOKE)).assign(host_cpu_utilization=1.0, meter_window_s=0.05)
    fig = P.utilization(df)
    fig.canvas.draw()
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if ln.get_label() and not ln.get_label().startswith("_")]
    assert len(lines) == 5
    points = np.vstack([ln.get_transform().transform(ln.get_xydata()) for ln in lines])
    gaps = [np.hypot(*(points[i] - points[j])) for i in range(len(points)) for j in range(i)]
    px_per_pt = fig.dpi / 72
    assert min(gaps) >= 4 * px_per_pt  # equal values, distinct places
    assert len({ln.get_marker() for ln in lines}) == len(lines)
    assert all(ln.get_alpha() < 1 for ln in lines)
    # Every shifted point stays inside the axes.
    box = ax.get_window_extent()
    assert all(box.x0 <= x <= box.x1 for x, _ in points)
    assert ax.get_title(loc="left") == ""  # every run has a value: nothing left out


# -- the operation-level figure without a roof -------------------------------------------------

def test_oplevel_without_peaks_is_titled_as_what_it_draws():
    df = golden.make_frame()
    df = df[df.device_kind == "synthetic-b"]
    sections, _ = report.plan(df, _ops(peaks=False))
    section = next(s for s in sections if s.id == "oplevel")
    assert section.title == OPLEVEL_NO_ROOF_TITLE and "Roofline" not in section.title
    item = section.items[1]
    assert "no roof" in item.caption and "no quiet probe of this host on record" in item.caption
    fig = item.make_figure()
    title = fig.axes[0].get_title()
    assert "arithmetic intensity and achieved FLOP/s" in title and "no roof" in title
    assert "roofline" not in title
    assert fig.axes[0].get_lines() == []  # no roof drawn, none pretended
    # With the peaks: the roof is drawn and the title says roofline.
    sections, _ = report.plan(df, _ops())
    fig = next(s for s in sections if s.id == "oplevel").items[1].make_figure()
    assert "on the roofline" in fig.axes[0].get_title() and len(fig.axes[0].get_lines()) == 1


def test_ops_roofline_of_op_rows_without_peaks_draws_no_roof_and_says_so():
    points = pd.DataFrame({"point": ["op", "model", "op"], "label": ["matmul 32x32x32", "fc", "conv"],
                           "arithmetic_intensity": [2.0, 5.0, 8.0], "flops_per_sec": [1e9, 2e9, 3e9],
                           "roof_peak_flops": [np.nan] * 3, "roof_peak_bytes_per_sec": [np.nan] * 3})
    ax = P.ops_roofline(points).axes[0]
    assert ax.get_lines() == [] and "no roof" in ax.get_title() and "on the roofline" not in ax.get_title()
    points.loc[[0, 1], ["roof_peak_flops", "roof_peak_bytes_per_sec"]] = [1e11, 1e10]
    ax = P.ops_roofline(points).axes[0]
    assert len(ax.get_lines()) == 1 and "1 of 3 points have no roof" in ax.get_title()
