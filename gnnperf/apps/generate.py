"""``gnnperf-generate``: measure zoo models on this machine into a sample store (Hydra config ``generate``)."""

from __future__ import annotations

import logging
import signal
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
    from gnnperf.measure.harness import check_supported, library_versions, software_tag

    settings = instantiate(cfg.measure.settings)
    number(cfg.zoo.get("seed", 0), "zoo.seed", minimum=0)
    limit = None if cfg.limit is None else number(cfg.limit, "limit", minimum=1)
    # every value is checked before the probe writes into the store, and in a dry run
    timeout_s = number(cfg.measure.timeout_s, "measure.timeout_s", float, minimum=1)
    shard_every = number(cfg.shard_every, "shard_every", minimum=1)
    plan = list(plan_samples(OmegaConf.to_container(cfg.zoo), OmegaConf.to_container(cfg.workload)))
    if not plan:
        raise GnnperfError("the plan is empty: give zoo.families or zoo.models and workload.batch_sizes")
    for workload in {p.workload for p in plan}:  # a precision or layout drawn late fails now, not mid-run
        check_supported(workload, settings)
    extra = cfg.hardware.get("file")
    tag = cfg.hardware.get("tag")
    # the named device is looked up before a dry run, so that a typo fails it too
    named = None if cfg.hardware.name == "probe" else get_spec(cfg.hardware.name, extra)
    if named is not None:
        if tag is not None:
            raise GnnperfError("hardware.tag names a probed CPU; hardware.name names a table entry: give one")
        check_named_device(named, settings)
    if cfg.dry_run:  # before the store: a dry run writes nothing
        for p in plan:
            print(p.model_ref, p.workload.batch_size, p.workload.optimizer, p.workload.precision)
        return {"planned": len(plan)}
    store = SampleStore(cfg.out_dir)  # an unwritable directory fails here, before any measurement
    if named is None:
        spec = probe(device=settings.device, threads=settings.threads, extra=extra, tag=tag)
        save_hardware_record(
            store.root, spec
        )  # probed devices are in no table: keep the record with the data
    else:
        spec = named
    hardware = spec.name
    counts = run_plan(
        plan,
        store,
        settings,
        hardware,
        software_tag(),
        timeout_s=timeout_s,
        shard_every=shard_every,
        limit=limit,
        graph_cache=GraphCache(cfg.graph_cache) if cfg.build_graphs else None,
        progress=sys.stderr.isatty(),
        retry_failed=bool(cfg.get("retry_failed", False)),
        libraries=library_versions(),
    )
    summary = {"hardware": hardware, "planned": len(plan), **counts, "stored": len(store.read())}
    print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return summary


def check_named_device(spec, settings) -> None:
    """Refuse a named hardware entry that is not the device the harness measures on: its rows would carry its name."""
    device = settings.device
    kind = "gpu" if str(device).startswith("cuda") else "cpu"
    if spec.kind != kind:
        raise GnnperfError(
            f"hardware.name={spec.name} is a {spec.kind}, but the measurements run on the {kind} "
            f"(measure.settings.device={device}): name the device measured, or hardware.name=probe"
        )
    if kind == "cpu" and spec.threads is not None and spec.threads != settings.threads:
        raise GnnperfError(
            f"hardware.name={spec.name} is {spec.threads} thread(s), but measure.settings.threads="
            f"{settings.threads}: its rows would be mislabelled"
        )
    if kind == "gpu":
        import torch

        from gnnperf.hardware.table import canonical_name

        found = canonical_name(torch.cuda.get_device_name(device)) if torch.cuda.is_available() else None
        if found is not None and found != spec.name:
            raise GnnperfError(
                f"hardware.name={spec.name}, but {device} is a {found}: its rows would be mislabelled"
            )


def save_hardware_record(root: Path, spec) -> Path:
    """Write ``<store>/hardware/<name>.json`` once; later probes of the same entry keep the first record.

    A stored record of the name that describes another machine (cores, last-level cache, ISA, clock: see
    ``gnnperf.hardware.probe.IDENTITY_FIELDS``) is refused, before any measurement: a cloud VM may report one
    brand string for different host CPUs, and the two machines' rows would share one device. Probed rates more than
    25% apart (``gnnperf.hardware.probe.speed_differences``) are only warned about: a loaded machine probes slower.
    """
    import json

    from gnnperf.hardware.probe import identity_differences, speed_differences
    from gnnperf.hardware.table import load_table, spec_from_dict, spec_to_dict

    path = Path(root) / "hardware" / f"{spec.name}.json"
    if path.exists() and spec.name not in load_table():  # a table entry is the product whatever the host
        try:
            stored = spec_from_dict(json.loads(path.read_text()))
        except (OSError, ValueError, GnnperfError) as e:
            raise GnnperfError(f"unreadable hardware record {path}: {e}") from None
        differ = identity_differences(stored, spec)
        if differ:
            raise GnnperfError(
                f"{path} describes another machine than this one ({'; '.join(differ)}, stored vs here): "
                "write into another store, or name this one apart (gnnperf-generate: hardware.tag=NAME)"
            )
        # a loaded machine probes slower, so a rate apart is a warning here; combining stores refuses it
        if slower := speed_differences(stored, spec):
            log.warning(
                "%s was probed at other rates than here (%s, stored vs here): if this is another host of the same "
                "brand string, its rows become one device with the stored ones; name it apart (hardware.tag=NAME)",
                path, "; ".join(slower),
            )  # fmt: skip
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
    except KeyboardInterrupt:  # Ctrl-C, `timeout -s INT`, SIGTERM: run_plan has flushed what it measured
        print(f"gnnperf-generate: interrupted; samples measured so far are in {cfg.out_dir}", file=sys.stderr)
        sys.exit(130)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    """The ``gnnperf-generate`` command: the command line is checked (one line, exit 2, on a mistake), then Hydra runs it."""
    check_command_line("gnnperf-generate", "generate")
    signal.signal(signal.SIGTERM, _interrupt)  # `timeout`, `kill`, a batch system: flush as on Ctrl-C
    run()


if __name__ == "__main__":
    main()
