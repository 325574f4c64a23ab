"""Which sample rows are one model: the references that export the same network (see :mod:`gnnperf.data.splits`)."""

from __future__ import annotations

import numpy as np
import pandas as pd


def model_groups(samples: pd.DataFrame) -> np.ndarray:
    """Per row, its model group: the first (sorted) ``model_ref`` of the references that share a network.

    Two references are in one group when a ``graph_digest`` of one is a ``graph_digest`` of the other, directly
    or through a third (``timm:convnext_base`` at 384 is ``convnext_base_384_in22ft1k``, at 224
    ``convnext_base_in22ft1k``). Rows without a digest (the column absent or empty) group by ``model_ref``.
    """
    refs = samples["model_ref"].astype(str).to_numpy()
    if "graph_digest" not in samples.columns:
        return refs
    parent = {r: r for r in np.unique(refs)}

    def root(r: str) -> str:
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    first_of: dict[str, str] = {}
    for ref, digest in sorted(set(zip(refs, samples["graph_digest"].astype(str)))):
        if not digest:
            continue
        other = first_of.setdefault(digest, ref)
        a, b = root(ref), root(other)
        if a != b:
            parent[max(a, b)] = min(a, b)
    return np.asarray([root(r) for r in refs])
