"""The report's "Prediction" section (docs/prediction.md): held-out error table, predicted against
measured, and each family's heat map completed by predictions with the measured cells marked.

Built only when the store holds predicted rows (``status = "predicted"``, from ``paradnn
predict`` or ``paradnn sweep --budget``): a report of measurements stays a report of
measurements, and lists this section as unsupported with the command that adds predictions.

>>> import paradnn
>>> from paradnn.report.prediction import prediction_section
>>> sections = prediction_section(paradnn.load("fc.db"))     # doctest: +SKIP
"""

from __future__ import annotations

import pandas as pd

from paradnn import families
from paradnn.analysis import prediction as PR
from paradnn.errors import ParadnnError
from paradnn.plots.prediction import completed_heatmap, predicted_vs_measured
from paradnn.record import PREDICTED
from paradnn.report.parts import Item, Missing, Section

__all__ = ["SECTION_ID", "SECTION_TITLE", "NEEDS", "prediction_section", "error_table"]

SECTION_ID = "prediction"
SECTION_TITLE = "Prediction (paradnn predict): held-out errors and completed heat maps"
#: What a store needs for the section (the report's "unsupported" entry); the recipe
#: (:func:`paradnn.report.recipes.recipe`, hint ``prediction``) says how to get it.
NEEDS = ("predicted rows (status predicted) beside at least "
         f"{2 * PR.MIN_CONFIGS} measured ok and stable configs of one platform, framework, "
         "dtype and family")


def error_table(scores: pd.DataFrame) -> pd.DataFrame:
    """:func:`paradnn.analysis.prediction.score`'s table as the report shows it: errors and
    coverage in percent, each column named with its unit."""
    out = scores.rename(columns={"held_out": "held out", "configs": "held-out configs"}).copy()
    for col, name in (("median_ape", "median |error| (%)"), ("p90_ape", "p90 |error| (%)"),
                      ("coverage", "interval coverage (%)")):
        out[name] = (100 * out.pop(col)).round(1)
    out["median interval width (x prediction)"] = out.pop("median_relative_width").round(2)
    return out


def prediction_section(df: pd.DataFrame, correction: str = PR.DEFAULT_CORRECTION) -> list[Section]:
    """The Prediction section of a report of ``df`` (``paradnn.load`` rows): the held-out error
    table (the corrected model beside the pure roofline), predicted against measured, and each
    predicted family's heat map completed by predictions with the measured cells framed.
    Raises :class:`~paradnn.report.parts.Missing` (with :data:`NEEDS`) when ``df`` holds no
    predicted rows, or too few measurements to score the model on held-out configs."""
    predicted = PR.predicted_rows(df)
    if not len(predicted):
        raise Missing(NEEDS, {"prediction": True})
    rows = PR.sized(df[df["status"] != PREDICTED])
    try:
        scores = PR.score(rows, correction, keep_predictions=True)
    except ParadnnError as exc:
        raise Missing(f"{NEEDS} ({exc})", {"prediction": True}) from exc
    if not len(scores):
        raise Missing(NEEDS, {"prediction": True})
    items = [Item(
        "Held-out errors of throughput (examples/s): each config predicted by a fit that did not "
        "see it (k-fold: configs held out at random; leave out AXIS: each value of the axis held "
        "out in turn, so its smallest and largest values are extrapolations). Median and 90th "
        "percentile absolute percentage error, and the share of held-out measurements inside "
        f"their {PR.DEFAULT_LEVEL:.0%} interval; the pure roofline (no learned correction) "
        "beside the corrected model. Method: docs/prediction.md.", table=error_table(scores))]
    preds = scores.attrs["predictions"]
    if len(preds):
        items.append(Item(
            "Predicted against measured throughput of the held-out configs (log-log): blue "
            "points and bars, the corrected model and its interval; grey rings, the pure "
            "roofline; the grey band is within 10 percent.",
            figure=lambda preds=preds: predicted_vs_measured(preds)))
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
            f"{families.display_name(family)} throughput over batch and {width}, completed by "
            f"predictions: the framed cells were measured, the other {n_pred} are predictions "
            "(status predicted rows of this store, from `paradnn predict` or `paradnn sweep "
            "--budget`); fixed: "
            f"{', '.join(f'{k}={v}' for k, v in hm.attrs['fixed'].items()) or 'none'}.",
            figure=lambda hm=hm: completed_heatmap(hm), table=hm))
    return [Section(SECTION_ID, SECTION_TITLE, items)]
