"""A split saved as JSON lists of ``sample_id`` per part, so that later runs test the same rows as the data grows.

With ``data.split_file`` set, the datamodule writes its split there the first time and reads it back after: row
positions move when samples are added or reordered, sample ids do not.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from gnnperf.data.splits import PARTS, check_split
from gnnperf.errors import GnnperfError

log = logging.getLogger(__name__)


def save_split(
    split: dict[str, np.ndarray], path: str | Path, samples: pd.DataFrame, meta: dict[str, Any] | None = None
) -> Path:
    """Write the split as JSON of ``sample_id`` lists per part, with ``meta`` (e.g. split name and seed)."""
    ids = samples["sample_id"].to_numpy()
    doc = {"meta": dict(meta or {}), "parts": {p: sorted(str(s) for s in ids[split[p]]) for p in PARTS}}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def load_split(
    path: str | Path, samples: pd.DataFrame, expect_meta: dict[str, Any] | None = None
) -> dict[str, np.ndarray]:
    """Row positions in ``samples`` of a split saved by :func:`save_split`.

    Every saved sample must be in ``samples``; samples the file does not name (added later) are left out,
    with a log line. With ``expect_meta``, a file saved for another split (name, seed, fold...) is refused: it
    would silently test other rows than the run says.
    """
    try:
        doc = json.loads(Path(path).read_text())
        parts = {p: list(doc["parts"][p]) for p in PARTS}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise GnnperfError(f"cannot read split file {path}: {e}") from None
    saved = doc.get("meta") or {}
    differ = [
        f"{k} {saved[k]!r} (this run: {v!r})"
        for k, v in (expect_meta or {}).items()
        if k in saved
        and json.dumps(saved[k], sort_keys=True, default=str) != json.dumps(v, sort_keys=True, default=str)
    ]
    if differ:
        raise GnnperfError(
            f"split file {path} was saved for another split: {', '.join(differ)}; remove it or give another path"
        )
    position = {sid: i for i, sid in enumerate(samples["sample_id"])}
    missing = [s for p in PARTS for s in parts[p] if s not in position]
    if missing:
        raise GnnperfError(
            f"split file {path} names {len(missing)} sample(s) not in the dataset (e.g. {missing[0]})"
        )
    split = {p: np.sort(np.asarray([position[s] for s in parts[p]], dtype=np.int64)) for p in PARTS}
    check_split(split, len(samples), what=f"split file {path}", cover=False)
    unused = len(samples) - sum(len(v) for v in split.values())
    if unused:
        log.info("split file %s leaves %d newer sample(s) out", path, unused)
    return split
