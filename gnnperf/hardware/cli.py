"""``gnnperf hardware list | show NAME | probe``: the spec table and the local device.

Examples::

    gnnperf hardware list
    gnnperf hardware show "NVIDIA GeForce RTX 3090" --json
    gnnperf hardware probe --threads 1 --json > my_cpu.json   # reusable as --hardware-file my_cpu.json
    gnnperf hardware show my-gpu --hardware-file my_gpu.yaml
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from gnnperf.console import stdout_console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--hardware-file",
        type=Path,
        metavar="PATH",
        help="extra device specs (CSV with the table's columns, YAML or JSON)",
    )
    common.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub = parser.add_subparsers(dest="hardware_action", required=True, metavar="ACTION")

    p = sub.add_parser("list", parents=[common], help="all devices in the spec table")
    p.set_defaults(_hardware_run=_list)

    p = sub.add_parser("show", parents=[common], help="one device (name or alias) with its source")
    p.add_argument("name", help="table name or alias, e.g. rtx-3090 or 'NVIDIA GeForce RTX 3090'")
    p.add_argument(
        "--checkpoint",
        help="for a device in no table: the predictor whose training devices to look in (default: "
        "$GNNPERF_CHECKPOINT, else the shipped one, whose CPUs are in no table)",
    )
    p.set_defaults(_hardware_run=_show)

    p = sub.add_parser("probe", parents=[common], help="describe (and measure) this machine's CPU or GPU")
    p.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch.get_num_threads())")
    p.add_argument(
        "--no-measure", dest="measure", action="store_false", help="skip the short matmul/copy test"
    )
    p.set_defaults(_hardware_run=_probe)


def run(args: argparse.Namespace) -> int:
    return args._hardware_run(args)


def _fmt(value: Any) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return " | ".join(value) or "-"
    return str(value)


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=2))


def _print_spec(spec: Any, vector: bool = False) -> None:
    from rich.table import Table

    from gnnperf.hardware.table import spec_to_dict

    table = Table(show_header=False, box=None)
    for key, value in spec_to_dict(spec).items():
        table.add_row(f"[bold]{key}[/]", _fmt(value))
    if vector:
        from gnnperf.hardware.vector import HARDWARE_FEATURES, hardware_vector

        values = hardware_vector(spec)
        table.add_row(
            "[bold]vector[/]",
            ", ".join(f"{f}={v:.3g}" for f, v in zip(HARDWARE_FEATURES, values, strict=True)),
        )
    stdout_console().print(table)


def _list(args: argparse.Namespace) -> int:
    from gnnperf.hardware.table import HARDWARE_TABLE_VERSION, load_table, spec_to_dict

    specs = sorted(load_table(args.hardware_file).values(), key=lambda s: (s.vendor, s.name))
    if args.json:
        _print_json([spec_to_dict(s) for s in specs])
        return 0
    from rich.table import Table

    table = Table(title=f"hardware table {HARDWARE_TABLE_VERSION} ({len(specs)} devices)")
    for column in (
        "name",
        "display name",
        "FP32 TFLOP/s",
        "FP16-tensor TFLOP/s",
        "memory GB",
        "bandwidth GB/s",
    ):
        table.add_column(column, justify="left" if "name" in column else "right")
    for s in specs:
        table.add_row(
            s.name,
            s.display_name,
            _fmt(s.peak_fp32_tflops),
            _fmt(s.peak_fp16_tensor_tflops),
            _fmt(s.memory_gb),
            _fmt(s.mem_bandwidth_gbs),
        )
    stdout_console().print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from gnnperf.errors import GnnperfError
    from gnnperf.hardware.table import get_spec, spec_to_dict

    try:
        spec = get_spec(args.name, args.hardware_file)
    except GnnperfError as unknown:
        # perhaps a predictor's training device, as `gnnperf predict --hardware` resolves it
        from gnnperf.predict import Predictor

        try:
            predictor = Predictor.from_checkpoint(args.checkpoint)
        except GnnperfError:
            raise unknown from None
        spec = predictor.spec(args.name, args.hardware_file)
    if args.json:
        _print_json(spec_to_dict(spec))
    else:
        _print_spec(spec)
    return 0


def _probe(args: argparse.Namespace) -> int:
    from gnnperf.hardware.probe import probe
    from gnnperf.hardware.table import spec_to_dict

    spec = probe(args.device, threads=args.threads, measure=args.measure, extra=args.hardware_file)
    if args.json:
        _print_json(spec_to_dict(spec))
    else:
        _print_spec(spec, vector=True)
    return 0
