"""The report's "Prediction" section (docs/prediction.md): held-out error table, predicted against
measured, and each family's heat map completed by predictions with the measured cells marked.

Standalone for now, beside :mod:`paradnn.report`, whose ``Section``/``Item``/``Unsupported``
it builds; it belongs in the ``paradnn.report`` package once that package exists, with
:func:`prediction_sections` called from its plan (after the single-platform analyses). It
renders nothing unless the store holds predicted rows (``status = "predicted"``): a report of
measurements stays a report of measurements.

>>> from paradnn import prediction_report, report, store
>>> df = store.load("fc.db")                                                    # doctest: +SKIP
>>> sections, missing = prediction_report.prediction_sections(df, "fc.db")    # doctest: +SKIP
>>> html = report.render_html(df, sections, missing)                        # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from paradnn import families
from paradnn import plots_prediction as PP
from paradnn.analysis import prediction as PR
from paradnn.errors import ParadnnError
from paradnn.report import Item, Section, Unsupported

SECTION_ID = "prediction"
SECTION_TITLE = "Prediction (paradnn predict): held-out errors and completed heat maps"


def error_table(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`paradnn.analysis.prediction.score`'s table as the report shows it: errors and
    coverage in percent, each column named with its unit."""
    out = scores.rename(columns={"held_out": "held out", "configs": "held-out configs"}).copy()
    for col, name in (("median_ape", "median |error| (%)"), ("p90_ape", "p90 |error| (%)"),
                      ("coverage", "interval coverage (%)")):
        out[name] = (100 * out.pop(col)).round(1)
    out["median interval width (x prediction)"] = out.pop("median_relative_width").round(2)
    return out


def prediction_sections(df: pd.DataFrame, store: str = "results.db",
                        correction: str = PR.DEFAULT_CORRECTION
                        ) -> tuple[list[Section], list[Unsupported]]:
    """The Prediction section of a report of ``df`` (``paradnn.load`` rows), or nothing when
    ``df`` has no predicted rows; an ``Unsupported`` entry when it has predicted rows but too
    few measurements to score the model on."""
    from paradnn.predictor import sized

    predicted = PR.predicted_rows(df)
    if not len(predicted):
        return [], []
    rows = sized(df[df["status"] != "predicted"])
    try:
        scores = PR.score(rows, correction, keep_predictions=True)
    except ParadnnError as exc:
        scores = pd.DataFrame(columns=list(PR.SCORE_COLUMNS))
        scores.attrs["predictions"] = pd.DataFrame()
        why = str(exc)
    else:
        why = ""
    if not len(scores):
        need = (f"at least {2 * PR.MIN_CONFIGS} measured (ok and stable) configs of one "
                "platform, framework, dtype and family, to score the model on held-out "
                "configs" + (f" ({why})" if why else ""))
        return [], [Unsupported(SECTION_ID, SECTION_TITLE, need,
                                command=f"paradnn sweep SWEEP_FILE --budget N --store {store}")]
    items = [Item(
        "Held-out errors of throughput (examples/s): each config predicted by a fit that did not "
        "see it (k-fold: configs held out at random; leave out AXIS: each value of the axis held "
        "out in turn, so its smallest and largest values are extrapolations). Median and 90th "
        "percentile absolute percentage error, and the share of held-out measurements inside "
        f"their {PR.DEFAULT_LEVEL:.0%} interval; the pure roofline (no learned correction) "
        "beside the corrected model.", table=error_table(scores))]
    preds = scores.attrs["predictions"]
    if len(preds):
        items.append(Item(
            "Predicted against measured throughput of the held-out configs (log-log): blue "
            "points and bars, the corrected model and its interval; grey rings, the pure "
            "roofline; the grey band is within 10 percent.",
            figure=lambda preds=preds: PP.predicted_vs_measured(preds)))
    for family in sorted(predicted["family"].dropna().unique()):
        fam = df[df["family"] == family]
        width = families.get(family).width if family in families.names() else None
        if not width or width not in fam.columns:
            continue
        try:
            hm = PR.completed_heatmap(fam, "batch", width)
        except ParadnnError:
            continue
        n_pred = int((hm["source"] == "predicted").sum())
        if not n_pred:
            continue
        items.append(Item(
            f"{family.upper()} throughput over batch and {width}, completed by predictions: "
            f"the framed cells were measured, the other {n_pred} are predictions (status "
            "predicted rows of this store, from `paradnn predict` or `paradnn sweep --budget`); "
            f"fixed: {', '.join(f'{k}={v}' for k, v in hm.attrs['fixed'].items()) or 'none'}.",
            figure=lambda hm=hm: PP.completed_heatmap(hm), table=hm))
    return [Section(SECTION_ID, SECTION_TITLE, items)], []
