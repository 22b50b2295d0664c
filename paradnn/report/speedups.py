"""The report's speedup sections: the platform, dtype and software speedups the store supports
(:func:`speedup_sections`) and the speedup of one framework over another
(:func:`frameworks_section`), each claim over stable runs with its bootstrap interval."""

from __future__ import annotations

from typing import Callable, Iterator

import pandas as pd

from paradnn import analysis as A
from paradnn import families
from paradnn import plots as P
from paradnn.analysis.columns import hyperparameters, ok_rows
from paradnn.analysis.framework import frameworks
from paradnn.analysis.sensitivity import MIN_ROWS
from paradnn.analysis.speedup import Comparison
from paradnn.report.parts import Item, Missing, Section, Unsupported
from paradnn.report.rows import GENERATED

#: Section id -> title of the speedup sections (part of :data:`paradnn.report.sections.TITLES`).
TITLES: dict[str, str] = {
    "speedup:platform": "Speedup between platforms (ParaDnn Fig 8-11)",
    "speedup:dtype": "Speedup from reduced precision (ParaDnn Fig 12)",
    "speedup:software": "Speedup between software versions (ParaDnn Fig 12)",
    "frameworks": "Frameworks: speedup of one framework over another (ParaDnn Fig 12 style; TBD, Zhu et al. 2018)",
}


def _ci_text(summary: dict) -> str:
    if summary["n"] < 2 or summary["ci_low"] != summary["ci_low"]:
        return f"geometric mean {summary['geomean']:.2f}x (no interval: fewer than 2 workloads)"
    return (f"geometric mean {summary['geomean']:.2f}x, {summary['ci']:.0%} CI "
            f"{summary['ci_low']:.2f}x-{summary['ci_high']:.2f}x (bootstrap over workloads)")


def _left_out(summary: dict) -> str:
    left = summary["unstable_excluded"]
    return f"; {left} unstable runs left out of this summary and drawn hollow" if left else ""


def _claims(section: Section, comps: list[Comparison],
            draw: Callable[[pd.DataFrame], object]) -> Iterator[tuple[Comparison, pd.DataFrame, pd.DataFrame, dict]]:
    """For each comparison, ``(c, speedup over stable runs (the claim), speedup over every run
    (the figure, unstable points marked), summary of the claim)``. A comparison whose every
    common workload rests on unstable runs gets one item saying no claim is made, with
    ``draw(every run)`` as its figure, and is not yielded."""
    for c in comps:
        sp = A.speedup_of(c)
        shown = A.speedup_of(c, include_unstable=True)
        if sp.empty:
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b}: every common workload rests on unstable runs "
                f"({sp.attrs['unstable_excluded']} runs left out), so no claim is made.",
                lambda shown=shown: draw(shown), shown))
            continue
        yield c, sp, shown, A.speedup_summary(sp)


def _claim_table(sp: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """The table behind a speedup figure: ``columns`` that ``sp`` has, slowest first."""
    return sp[[col for col in columns if col in sp.columns]].sort_values("speedup")


_SPEEDUP_NEEDS = {
    "platform": "ok runs of the same workloads on two platforms (e.g. two stores merged)",
    "dtype": "ok runs of the same workloads in float32 and in a reduced precision on one platform",
    "software": "ok runs of the same workloads under two software versions (jax/tf) on one platform",
}


def speedup_sections(df: pd.DataFrame) -> tuple[list[Section], list[Unsupported]]:
    """The platform, dtype and software speedups the store supports, and those it does not."""
    comps = A.comparisons(df, kinds=tuple(_SPEEDUP_NEEDS))
    sections, missing = [], []
    for kind, needs in _SPEEDUP_NEEDS.items():
        sid = f"speedup:{kind}"
        mine = [c for c in comps if c.kind == kind]
        if not mine:
            missing.append(Unsupported(sid, TITLES[sid], needs))
            continue
        section = Section(sid, TITLES[sid])
        for c, sp, shown, summ in _claims(section, mine, P.speedup):
            left = summ["unstable_excluded"]
            has_real = bool((sp.get("kind", pd.Series(dtype=object)) == "real").any())
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b}: ratio of examples/s on the same workload "
                f"({summ['n']} workloads, {_ci_text(summ)}, {summ['faster']:.0%} faster on {c.a})"
                + _left_out(summ) + ". Marker shape: family; colour: batch"
                + ("; stars: real models" if has_real else "") + ".",
                lambda shown=shown: P.speedup(shown),
                _claim_table(sp, ("label", "params", "batch", "examples_per_sec_a",
                                  "examples_per_sec_b", "speedup"))))
            fr = A.family_ranges(sp, "speedup")
            section.items.append(Item(
                f"Speedup of {c.a} over {c.b} per family (range and median)"
                + (" and per real model" if has_real else "") + " (ParaDnn Fig 11 top)"
                + (f"; {left} unstable runs left out" if left else "") + ".",
                lambda fr=fr: P.family_ranges(fr, log=True), fr))
            gen = sp[sp.get("kind", pd.Series("generated", index=sp.index)) != "real"]
            for fam in GENERATED:
                frows = gen[gen["family"] == fam] if "family" in gen.columns else gen.iloc[0:0]
                feats = hyperparameters(frows, fam)
                if feats and len(frows) >= max(MIN_ROWS, len(feats) + 2):
                    s = A.sensitivity(frows, "speedup", feats, log2=True)
                    section.items.append(Item(
                        f"Sensitivity of the {families.display_name(fam)} speedup of {c.a} over {c.b} to its "
                        f"hyperparameters (standardized weights on log2 values, {s.attrs['n']} "
                        f"workloads of stable runs, R^2 = {s.attrs['r2']:.2f}, error bars: 95% "
                        "bootstrap interval; ParaDnn Fig 8a, 9a, 10a, 10d).",
                        lambda s=s: P.sensitivity(s), s))
        sections.append(section)
    return sections, missing


def frameworks_section(df: pd.DataFrame) -> list[Section]:
    ok = ok_rows(df)
    names = frameworks(ok) if len(ok) else []
    if len(names) < 2:
        raise Missing(f"ok runs of the same workloads under two frameworks on one platform "
                      f"(has {', '.join(names) or 'no ok runs'})", {"framework": True})
    comps = A.comparisons(df, kinds=("framework",))
    if not comps:
        raise Missing(f"ok runs of the same workloads under two frameworks on one platform "
                      f"(has {', '.join(names)}, but no workload measured under two of them "
                      "on one platform)", {"framework": True})
    section = Section("frameworks", TITLES["frameworks"])
    for c, sp, shown, summ in _claims(section, comps, P.speedup_by_config):
        section.items.append(Item(
            f"Speedup of {c.a} over {c.b}: examples/s under the first framework over examples/s "
            f"under the second, per configuration (same model, batch, dtype, optimizer and "
            f"devices on the same device; medians of repeats), grouped by family. "
            f"{summ['n']} configurations, {_ci_text(summ)} (grey line and band), "
            f"{summ['faster']:.0%} faster under {c.a.split(' on ')[0]}; dashed line: 1x"
            + _left_out(summ) + ". Source: examples_per_sec of the ok runs; each framework's "
            "time is its own compiled training step under the same timing protocol.",
            lambda shown=shown, summ=summ: P.speedup_by_config(shown, summ),
            _claim_table(sp, ("label", "batch", "params", "examples_per_sec_a",
                              "examples_per_sec_b", "speedup"))))
    return [section]
