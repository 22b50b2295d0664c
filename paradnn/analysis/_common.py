"""The old name of :mod:`paradnn.analysis.columns`, kept so that notebooks and users' code that
import it keep working; paradnn's own modules import :mod:`paradnn.analysis.columns`."""

from paradnn.analysis.columns import (  # noqa: F401
    CONFIG_FIELDS, FAMILY_FIELDS, HYPER_UNITS, METRIC_NAMES, PLATFORM_KEY, SPEC_FIELDS,
    WORKLOAD_FIELDS, drop_unstable, flagged_mask, fmt, group_columns, headline_utilization,
    hyperparameters, label, measurements, ok_rows, platform_label, present, require_columns,
    software_label, unit, unstable_mask, varying, warning_lists, warning_meaning, workload_label,
)
