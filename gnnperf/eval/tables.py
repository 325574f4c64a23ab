"""Comparison tables: one row per predictor (the GNN and the baselines), one column per metric.

``comparison_table`` computes the table from prediction frames; ``print_table`` shows it in the terminal with
rich; ``to_markdown`` renders it for an experiment's README.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from gnnperf.errors import GnnperfError
from gnnperf.eval.metrics import METRICS, frame_metrics

PREDICTOR_COLUMN = "predictor"
# Display format per metric; other float columns use FALLBACK_FORMAT.
FORMATS: dict[str, str] = {
    "mape": ".1f",
    "median_ape": ".1f",
    "rmse_ms": ".2f",
    "spearman": ".3f",
    "kendall": ".3f",
    "within_10": ".2f",
    "within_20": ".2f",
}
FALLBACK_FORMAT = ".4g"


def stack_predictions(results: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """One long prediction frame with a leading ``predictor`` column, from ``name -> prediction frame``."""
    if not results:
        raise GnnperfError("no predictions to compare")
    frames = [df.assign(**{PREDICTOR_COLUMN: name}) for name, df in results.items()]
    stacked = pd.concat(frames, ignore_index=True)
    return stacked[[PREDICTOR_COLUMN, *(c for c in stacked.columns if c != PREDICTOR_COLUMN)]]


def comparison_table(results: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Rows = predictor names (in the given order), columns = :data:`~gnnperf.eval.metrics.METRICS`."""
    if not results:
        raise GnnperfError("no predictions to compare")
    rows = {name: frame_metrics(df) for name, df in results.items()}
    table = pd.DataFrame.from_dict(rows, orient="index", columns=list(METRICS))
    table.index.name = PREDICTOR_COLUMN
    table["n"] = table["n"].astype(int)
    return table


def format_value(column: str, value: Any) -> str:
    """A cell as text: integers plainly, floats with the column's format, NaN/None as ``n/a``."""
    if value is None or (isinstance(value, float | np.floating) and math.isnan(value)):
        return "n/a"
    if isinstance(value, bool | np.bool_):
        return str(bool(value))
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return format(float(value), FORMATS.get(column, FALLBACK_FORMAT))
    return str(value)


def _rows(df: pd.DataFrame) -> tuple[list[str], list[list[str]], list[bool]]:
    """(header, text rows, right-align flag per column); the index is the first column."""
    index_names = [str(n) if n is not None else "" for n in df.index.names]
    header = [*index_names, *map(str, df.columns)]
    keys = [k if isinstance(k, tuple) else (k,) for k in df.index]
    body = [
        [*(str(k) for k in key), *(format_value(str(c), v) for c, v in zip(df.columns, row))]
        for key, row in zip(keys, df.itertuples(index=False, name=None))
    ]
    numeric = [False] * len(index_names) + [pd.api.types.is_numeric_dtype(df[c]) for c in df.columns]
    return header, body, numeric


def print_table(df: pd.DataFrame, title: str | None = None, console: Any = None) -> None:
    """Print ``df`` (index as the first column) as a rich table.

    Args:
        console: a ``rich.console.Console``; a new one on stdout when None.
    """
    from rich.console import Console
    from rich.table import Table

    header, body, numeric = _rows(df)
    table = Table(title=title)
    for i, (name, right) in enumerate(zip(header, numeric)):
        # rich shrinks columns to the console width with an ellipsis; a metric table is only useful whole.
        width = max([len(name), *(len(row[i]) for row in body)])
        table.add_column(name, justify="right" if right else "left", min_width=width, no_wrap=True)
    for row in body:
        table.add_row(*row)
    (console or Console()).print(table, crop=False)  # wrap in the terminal rather than cut a column


def to_markdown(df: pd.DataFrame) -> str:
    """``df`` as a GitHub Markdown table (index as the first column), numbers right-aligned.

    pandas' ``DataFrame.to_markdown`` needs the optional ``tabulate`` package, which is not a dependency;
    a pipe table is a few lines, so it is written here instead.
    """
    header, body, numeric = _rows(df)

    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    rule = "|" + "|".join("---:" if right else ":---" for right in numeric) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in body)]) + "\n"
