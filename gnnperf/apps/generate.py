"""``gnnperf-generate``: measure zoo models on this machine into a sample store (Hydra config ``generate``)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import hydra
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from gnnperf.apps import CONF_DIR, check_command_line, user_errors
from gnnperf.errors import GnnperfError, number

log = logging.getLogger("gnnperf.generate")


def generate(cfg: DictConfig) -> dict[str, Any]:
    """Plan, skip what the store has, measure the rest; returns the summary it prints."""
    from gnnperf.data.generate import plan_samples, run_plan
    from gnnperf.data.store import SampleStore
    from gnnperf.graph.build import GraphCache
    from gnnperf.hardware.probe import probe
    from gnnperf.hardware.table import get_spec
    from gnnperf.measure.harness import check_supported, software_tag

    settings = instantiate(cfg.measure.settings)
    plan = list(plan_samples(OmegaConf.to_container(cfg.zoo), OmegaConf.to_container(cfg.workload)))
    if not plan:
        raise GnnperfError("the plan is empty: give zoo.families or zoo.models and workload.batch_sizes")
    check_supported(plan[0].workload, settings)
    store = SampleStore(cfg.out_dir)  # an unwritable directory fails here, before any measurement
    extra = cfg.hardware.get("file")
    if cfg.hardware.name == "probe":
        spec = probe(device=settings.device, threads=settings.threads, extra=extra)
        save_hardware_record(
            store.root, spec
        )  # probed devices are in no table: keep the record with the data
    else:
        spec = get_spec(cfg.hardware.name, extra)
    hardware = spec.name
    if cfg.dry_run:
        for p in plan:
            print(p.model_ref, p.workload.batch_size, p.workload.optimizer, p.workload.precision)
        return {"planned": len(plan)}
    counts = run_plan(
        plan,
        store,
        settings,
        hardware,
        software_tag(),
        timeout_s=number(cfg.measure.timeout_s, "measure.timeout_s", float),
        shard_every=number(cfg.shard_every, "shard_every"),
        limit=cfg.limit,
        graph_cache=GraphCache(cfg.graph_cache) if cfg.build_graphs else None,
        progress=sys.stderr.isatty(),
    )
    summary = {"hardware": hardware, "planned": len(plan), **counts, "stored": len(store.read())}
    print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return summary


def save_hardware_record(root: Path, spec) -> Path:
    """Write ``<store>/hardware/<name>.json`` once; later probes of the same entry keep the first record."""
    import json

    from gnnperf.hardware.table import spec_to_dict

    path = Path(root) / "hardware" / f"{spec.name}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(spec_to_dict(spec), indent=1) + "\n")
        tmp.replace(path)
    return path


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="generate")
def run(cfg: DictConfig) -> None:
    try:
        with user_errors("gnnperf-generate"):
            generate(cfg)
    except KeyboardInterrupt:  # Ctrl-C or `timeout -s INT`: run_plan has flushed what it measured
        print(f"gnnperf-generate: interrupted; samples measured so far are in {cfg.out_dir}", file=sys.stderr)
        sys.exit(130)


def main() -> None:
    """The ``gnnperf-generate`` command: the command line is checked (one line, exit 2, on a mistake), then Hydra runs it."""
    check_command_line("gnnperf-generate", "generate")
    run()


if __name__ == "__main__":
    main()
