"""Hydra callback: after a sweep, one comparison table of every job's metrics (``sweep_summary.md``/``.csv``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig


class SweepSummary(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        import pandas as pd

        from gnnperf.eval.tables import to_markdown

        root = Path(config.hydra.sweep.dir)
        rows = []
        for metrics_file in sorted(root.glob("*/metrics.json")):
            job = metrics_file.parent
            overrides_file = job / ".hydra" / "overrides.yaml"
            overrides = (
                overrides_file.read_text().strip().replace("\n", " ") if overrides_file.exists() else ""
            )
            row = {"job": job.name, "overrides": overrides}
            metrics = json.loads(metrics_file.read_text())
            row.update(
                {k: metrics[k] for k in sorted(metrics) if k.startswith(("val/", "test/", "baseline/"))}
            )
            rows.append(row)
        if not rows:
            return
        table = pd.DataFrame(rows).set_index("job")
        table.to_csv(root / "sweep_summary.csv")
        (root / "sweep_summary.md").write_text(to_markdown(table) + "\n")
        print(f"sweep summary: {root / 'sweep_summary.md'}")
