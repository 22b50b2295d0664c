"""Shared by the study scripts of docs/prediction.md."""
import pandas as pd


def cpu_time_target(df: pd.DataFrame) -> pd.DataFrame:
    """A diagnostic, not paradnn's metric: the rows with ``step_time_s`` replaced by the
    process's CPU time per training step over the timed window (``process_cpu_s`` / (timed
    calls x steps per call)), and every ok row counted as stable (the wall-time precision
    target says nothing about CPU time). On the one-CPU platform (every thread on one core) this is the
    step time the process would have had alone on its core: what other processes take of the
    core drops out. On this shared host, repeats of one config differ by a median 35% in wall
    step time and 6% in CPU time per step."""
    out = df.copy()
    ok = out["status"] == "ok"
    steps = pd.to_numeric(out["timed_calls"]) * pd.to_numeric(out["steps_per_call_used"])
    out.loc[ok, "step_time_s"] = pd.to_numeric(out.loc[ok, "process_cpu_s"]) / steps[ok]
    out.loc[ok, "stable"] = True
    return out
