"""``gnnperf predict MODEL --hardware NAME --batch-size N``: a trained GNN's prediction for a model."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

# The GNN's MAPE on a GPU no training row had (experiments/h200_unseen/results.json, predictors.gnn.all.mape,
# rounded; a test keeps the two equal), quoted for devices predicted from their specs.
UNSEEN_DEVICE_MAPE = 46
UNSEEN_DEVICE_STUDY = "experiments/h200_unseen"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="+",
        help="model reference (timm:NAME, torchvision:NAME, hf:config.json, zoo:..., .onnx, pkg.mod:fn); several "
        "for a comparison table",
    )
    parser.add_argument(
        "--hardware",
        required=True,
        help="hardware table name or alias (see `gnnperf hardware list`), or a device the checkpoint was trained on; "
        "several, comma-separated, or 'all' (every GPU of the table and --hardware-file) for a comparison table",
    )
    parser.add_argument("--hardware-file", help="extra hardware spec file (CSV/YAML/JSON)")
    parser.add_argument(
        "--batch-size",
        required=True,
        help="samples per iteration on each device; several, comma-separated (32,64,128), for a comparison table",
    )
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--input-shape", help="per-sample input shape, e.g. 3,224,224")
    shape.add_argument("--seq-len", type=int, help="sequence length for token models")
    parser.add_argument(
        "--precision",
        default="fp32",
        choices=["fp32", "tf32", "amp_fp16", "amp_bf16", "fp16", "bf16", "fp64"],
    )
    parser.add_argument("--mode", default="train", choices=["train", "infer"])
    parser.add_argument(
        "--timed", choices=["fwd+bwd+opt", "fwd+bwd", "fwd"], help="what the time covers (default by mode)"
    )
    parser.add_argument("--optimizer", choices=["sgd", "adam", "adamw", "none"])
    parser.add_argument("--memory-format", default="contiguous", choices=["contiguous", "channels_last"])
    parser.add_argument(
        "--num-devices",
        type=int,
        default=1,
        help="data-parallel devices, each with --batch-size samples (default 1; the shipped predictor learned 1-4 "
        "GPUs from DataParallel rows)",
    )
    parser.add_argument(
        "--h2d", action="store_true", help="include the host-to-device copy of the inputs in the time"
    )
    parser.add_argument(
        "--epoch-samples",
        type=int,
        metavar="N",
        help="also estimate one epoch over N training samples (iterations x the predicted iteration time)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        metavar="E",
        help="with --epoch-samples: also the whole run of E epochs (E x the epoch estimate)",
    )
    parser.add_argument(
        "--max-batch",
        action="store_true",
        help="also the largest batch per device whose training step fits in the GPU's memory (the memory estimate)",
    )
    parser.add_argument(
        "--checkpoint",
        help="predictor checkpoint (default: $GNNPERF_CHECKPOINT, else the shipped one; see its MODEL_CARD.md)",
    )
    parser.add_argument(
        "--breakdown",
        type=int,
        nargs="?",
        const=10,
        default=0,
        help="list the N ops with the most predicted time",
    )
    parser.add_argument(
        "--calibrate",
        nargs=3,
        action="append",
        metavar=("REF_MODEL", "REF_BATCH", "REF_MS"),
        help="a reference model measured on this hardware with this workload (batch size, iteration ms); "
        "the prediction is scaled by measured / predicted for it (repeatable: geometric mean)",
    )
    parser.add_argument(
        "--measured-on",
        nargs=2,
        metavar=("HARDWARE", "MS"),
        help="this model and workload took MS ms per iteration on HARDWARE (a device you have): the prediction is "
        "MS times the predicted ratio between the two devices",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object per line, one per prediction"
    )


def run(args: argparse.Namespace) -> int:
    from gnnperf.errors import GnnperfError
    from gnnperf.predict import Predictor, Query, epoch_estimate
    from gnnperf.zoo.resolve import parse_input_shape

    batches = _batch_sizes(args.batch_size)
    if args.epoch_samples is not None and args.epoch_samples < 1:
        raise GnnperfError(f"--epoch-samples must be at least 1, got {args.epoch_samples}")
    if args.epochs is not None and (args.epochs < 1 or args.epoch_samples is None):
        raise GnnperfError(f"--epochs needs --epoch-samples and must be at least 1, got {args.epochs}")
    if args.calibrate and args.measured_on:
        raise GnnperfError("--calibrate and --measured-on are two ways to anchor a prediction: give one")
    hardware = _hardware_names(args.hardware, args.hardware_file)
    if len(hardware) > 1 and args.calibrate:
        raise GnnperfError(
            "--calibrate scales the predictions for the device it was measured on: give one --hardware"
        )
    models = list(dict.fromkeys(args.model))
    if (len(batches) > 1 or len(models) > 1) and args.measured_on:
        raise GnnperfError("--measured-on is the time of one model at one batch size: give one of each")
    if len(models) * len(hardware) * len(batches) > 1 and args.breakdown:
        raise GnnperfError(
            "--breakdown lists the ops of one prediction: give one model, one --hardware and one --batch-size"
        )
    shape = (args.seq_len,) if args.seq_len else parse_input_shape(args.input_shape)
    predictor = Predictor.from_checkpoint(args.checkpoint)
    queries = [
        Query(
            model=model,
            hardware=device,
            batch_size=batch,
            input_shape=shape,
            precision=args.precision,
            mode=args.mode,
            optimizer=args.optimizer,
            timed=args.timed,
            memory_format=args.memory_format,
            h2d=args.h2d,
            num_devices=args.num_devices,
        )
        for model in models
        for device in hardware
        for batch in batches
    ]
    if args.calibrate:
        predictor.calibrate(
            [
                (replace(queries[0], model=ref, batch_size=batch, input_shape=None), ms)
                for ref, batch, ms in _references(args)
            ],
            hardware_file=args.hardware_file,
        )
    if args.measured_on:
        measured_on, ms = args.measured_on
        try:
            ms = float(ms)
        except ValueError:
            raise GnnperfError(
                f"--measured-on {measured_on} {ms}: expected a device and milliseconds"
            ) from None
        rows = [
            predictor.transfer(q, measured_on, ms, breakdown=args.breakdown, hardware_file=args.hardware_file)
            for q in queries
        ]
    else:
        rows = predictor.predict(queries, breakdown=args.breakdown, hardware_file=args.hardware_file)
    for query, row in zip(queries, rows, strict=True):
        if args.epoch_samples:
            row["epoch"] = epoch_estimate(row, args.epoch_samples, args.epochs or 1)
        try:
            row["memory"] = predictor.memory(query, args.hardware_file, max_batch=args.max_batch)
            if row["memory"] is None and args.max_batch:
                row["memory_note"] = (
                    "no memory estimate: it covers training steps on a GPU whose memory size is known"
                )
        except GnnperfError as e:  # a model the shape-only trace cannot run
            row["memory"], row["memory_note"] = None, str(e)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    elif len(rows) == 1:
        _print_row(rows[0], args)
    else:
        _print_comparison(rows, args)
    return 0


def _print_row(row: dict, args: argparse.Namespace) -> None:
    """The text report of one prediction."""
    lo, hi = row["interval_ms"]
    seen = "seen in training" if row["hardware_seen_in_training"] else "predicted from its specs"
    devices = f" x {row['num_devices']} devices" if row["num_devices"] > 1 else ""
    layout = ", channels_last" if row["memory_format"] == "channels_last" else ""
    print(
        f"{row['model']} on {row['hardware']} ({seen}), batch {row['batch_size']}{devices}, {row['precision']}"
        f"{layout}, {row['timed']}"
    )
    print(
        f"  iteration time {row['iteration_time_ms']:.2f} ms  ({row['interval_coverage']:.0%} interval {lo:.2f} .. {hi:.2f} ms)"
    )
    if not row["hardware_seen_in_training"] and "calibration_factor" not in row:
        print(
            "  the interval is that of the devices seen in training, not of one predicted from its specs: a device "
            f"no training row had (the H200) was missed by {UNSEEN_DEVICE_MAPE}% MAPE ({UNSEEN_DEVICE_STUDY}); "
            "--calibrate with a model timed on it"
        )
    if "epoch" in row:
        ep = row["epoch"]
        print(
            f"  epoch of {ep['samples']} samples: {ep['iterations']} iterations, {ep['time_s']:.1f} s "
            f"({ep['interval_s'][0]:.1f} .. {ep['interval_s'][1]:.1f} s; data loading and evaluation not included)"
        )
        if ep["epochs"] > 1:
            unit, size = _time_unit(ep["run_time_s"])
            lo_run, hi_run = (v / size for v in ep["run_interval_s"])
            print(
                f"  run of {ep['epochs']} epochs: {ep['run_time_s'] / size:.1f} {unit} ({lo_run:.1f} .. {hi_run:.1f} "
                f"{unit})"
            )
    if row["memory"]:
        m = row["memory"]
        held = m["weights_mb"] + m["gradients_mb"] + m["optimizer_mb"]
        verdict = {
            "fits": "fits",
            "at the limit": "at the limit: above the share usable in practice, it may run out of memory",
            "does not fit": "does NOT fit: expect an out-of-memory error",
        }[m["verdict"]]
        print(
            f"  peak memory {m['total_mb'] / 1024:.1f} GiB per device (activations {m['activations_mb'] / 1024:.1f}, "
            f"weights + gradients + optimizer {held / 1024:.1f}), of {m['device_memory_gb']:g} GB: {verdict}"
        )
        if "largest_batch" in m:
            print(f"  largest batch whose step fits: {m['largest_batch']} per device")
    elif "memory_note" in row:
        print(f"  {row['memory_note']}")
    if row["unlearned_workload"]:
        print(
            f"  not learned (constant in this checkpoint's training data), so ignored by the network: "
            f"{', '.join(row['unlearned_workload'])}"
        )
    if row["outside_training_range"]:
        print(
            f"  outside this checkpoint's training range, extrapolated: {', '.join(row['outside_training_range'])}"
        )
    if row["hardware_outside_training_range"]:
        print(
            f"  {row['hardware']}'s data sheet is outside the range of the training devices, extrapolated: "
            f"{', '.join(row['hardware_outside_training_range'])}"
        )
    if row["unseen_on_device_kind"]:
        unseen = ", ".join(row["unseen_on_device_kind"])
        print(f"  never seen on this kind of device in training, extrapolated: {unseen}")
    if row["unseen_combination"]:
        together = ", ".join(row["unseen_combination"])
        print(f"  never together on this kind of device in training, extrapolated: {together}")
    if row["priced_at_fp32_peak"]:
        print(
            f"  {row['hardware']} has no {row['precision']} rate of its own in the hardware table: priced at its FP32 "
            f"peak; how it really runs there the table does not say (the TITAN Xp's fp16 training steps took a median "
            f"1.2x their fp32 time, the P100 has fp16 units at twice its fp32 rate)"
        )
    if row["unseen_op_types"]:
        how = (
            f"{row['unseen_op_share']:.0%} of its roofline time; blended with the {row['fallback_baseline']} baseline, "
            f"the network alone says {row['gnn_iteration_time_ms']:.2f} ms"
            if "unseen_op_share" in row
            else "no fallback in this checkpoint: the network extrapolates"
        )
        print(f"  op types unseen in training: {', '.join(row['unseen_op_types'])} ({how})")
    if "calibration_factor" in row:
        print(f"  calibrated on {len(args.calibrate)} measurement(s): x{row['calibration_factor']:.3f}")
    if "measured_on" in row:
        ref = row["measured_on"]
        print(
            f"  from {ref['ms']:.2f} ms measured on {ref['hardware']} (predicted there {ref['predicted_ms']:.2f} ms): "
            f"x{row['transfer_factor']:.3f}"
        )
    for op in row.get("breakdown", []):
        print(f"  {op['ms']:10.3f} ms  {op['op']:<20} {op['name']}")


# Short names of a row's extrapolation flags for the comparison table, with what each means (printed once below it).
NOTES = {
    "hardware_outside_training_range": ("data sheet", "figures outside those of the training devices"),
    "outside_training_range": (
        "workload range",
        "batch size or device count outside the training rows' range",
    ),
    "unlearned_workload": ("unlearned", "a workload feature constant in training, so ignored by the network"),
    "unseen_on_device_kind": (
        "unseen on kind",
        "a workload value never seen on this kind of device in training",
    ),
    "unseen_combination": ("unseen together", "workload values never seen together on this kind of device"),
    "priced_at_fp32_peak": (
        "fp32 rate",
        "no rate of its own for this precision in the table: priced at FP32 peak",
    ),
    "unseen_op_types": ("unseen ops", "op types no training graph had"),
}


def _batch_sizes(text: str) -> list[int]:
    """``--batch-size`` as a list: one size or several, comma-separated; each at least 1."""
    from gnnperf.errors import GnnperfError

    try:
        sizes = [int(t) for t in str(text).split(",") if t.strip()]
    except ValueError:
        raise GnnperfError(f"--batch-size {text}: expected an integer or several, comma-separated") from None
    if not sizes:
        raise GnnperfError(f"--batch-size {text!r}: expected an integer or several, comma-separated")
    for size in sizes:
        if size < 1:
            raise GnnperfError(f"--batch-size must be at least 1, got {size}")
    return list(dict.fromkeys(sizes))


def _hardware_names(text: str, hardware_file: str | None) -> list[str]:
    """``--hardware`` as a list of names: one, several comma-separated, or ``all`` (every GPU of the table)."""
    from gnnperf.hardware.table import load_table

    if text.strip() == "all":
        return sorted(name for name, spec in load_table(hardware_file).items() if spec.kind == "gpu")
    return list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip())) or [text]


def _print_comparison(rows: list[dict], args: argparse.Namespace) -> None:
    """One table row per (model, device, batch size); with ``--hardware all`` the fastest first per model."""
    from rich import box
    from rich.console import Console
    from rich.table import Column, Table

    models = list(dict.fromkeys(r["model"] for r in rows))
    if args.hardware.strip() == "all":
        rows = sorted(rows, key=lambda r: (models.index(r["model"]), r["batch_size"], r["iteration_time_ms"]))
    first, batches = rows[0], {r["batch_size"] for r in rows}
    devices = f" per device x {first['num_devices']} devices" if first["num_devices"] > 1 else ""
    batch = (
        f"batch {first['batch_size']}{devices}, "
        if len(batches) == 1
        else f"batch{devices}, " * bool(devices)
    )
    layout = ", channels_last" if first["memory_format"] == "channels_last" else ""
    what = first["model"] if len(models) == 1 else f"{len(models)} models"
    title = f"{what}: {batch}{first['precision']}{layout}, {first['timed']}"
    memory = any(r["memory"] for r in rows)
    # a zoo reference runs to a hundred characters: folded, not cut, so that two of them stay apart
    header: list[str | Column] = [Column("model", overflow="fold", max_width=48)] * (len(models) > 1)
    header += ["hardware", "batch"]
    header = [h for h in header if h != "batch" or len(batches) > 1]
    header += ["ms / iter", f"{first['interval_coverage']:.0%} interval", "samples/s"]
    header += ["peak GiB"] * memory + ["max batch"] * (memory and args.max_batch)
    header += [f"{args.epochs} epochs" if (args.epochs or 1) > 1 else "epoch"] * bool(args.epoch_samples)
    table = Table(*header, "extrapolated", title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    used: set[str] = set()
    for row in rows:
        lo, hi = row["interval_ms"]
        from_specs = not row["hardware_seen_in_training"] and "calibration_factor" not in row
        cells = [row["model"]] * (len(models) > 1) + [row["hardware"] + " *" * from_specs]
        cells += [str(row["batch_size"])] * (len(batches) > 1)
        cells += [f"{row['iteration_time_ms']:.4g}", f"{lo:.4g}-{hi:.4g}"]
        cells.append(f"{row['batch_size'] * row['num_devices'] / row['iteration_time_ms'] * 1000:,.0f}")
        m = row["memory"]
        if memory:
            cells.append(f"{m['total_mb'] / 1024:.1f} {m['verdict']}" if m else "-")
        if args.max_batch and memory:
            cells.append(str(m["largest_batch"]) if m else "-")
        if args.epoch_samples:
            ep = row["epoch"]
            seconds = ep["run_time_s"] if ep["epochs"] > 1 else ep["time_s"]
            unit, size = _time_unit(seconds)
            cells.append(f"{seconds / size:.1f} {unit}")
        flags = [key for key in NOTES if row.get(key)]
        used.update(flags)
        cells.append(", ".join(NOTES[k][0] for k in flags) or "-")
        table.add_row(*cells)
    console = Console()
    if not console.is_terminal:  # a file or a pipe: whole lines rather than 80 columns
        console = Console(width=200)
    console.print(table)
    notes = []
    if any(not r["hardware_seen_in_training"] and "calibration_factor" not in r for r in rows):
        notes.append(
            f"* no training rows: predicted from the data sheet; on the one such GPU measured (the H200) the "
            f"predictions missed by {UNSEEN_DEVICE_MAPE}% MAPE ({UNSEEN_DEVICE_STUDY}), more than the interval says"
        )
    notes += [f"{NOTES[k][0]}: {NOTES[k][1]} (--json says which)" for k in NOTES if k in used]
    if "calibration_factor" in first:
        notes.append(
            f"calibrated on {len(args.calibrate)} measurement(s): x{first['calibration_factor']:.3f}"
        )
    if "measured_on" in first:
        ref = first["measured_on"]
        notes.append(f"scaled from {ref['ms']:.2f} ms measured on {ref['hardware']} by the predicted ratio")
    if args.epoch_samples:
        notes.append(f"epochs of {args.epoch_samples} samples; data loading and evaluation not included")
    notes += list(dict.fromkeys(r["memory_note"] for r in rows if "memory_note" in r))
    for note in notes:
        console.print(f"  {note}")


def _references(args: argparse.Namespace) -> list[tuple[str, int, float]]:
    """``--calibrate`` triples as (model, batch size, ms); a malformed one is a user error."""
    from gnnperf.errors import GnnperfError

    out = []
    for ref, batch, ms in args.calibrate:
        try:
            out.append((ref, int(batch), float(ms)))
        except ValueError:
            raise GnnperfError(
                f"--calibrate {ref} {batch} {ms}: expected a model, a batch size and milliseconds"
            ) from None
        if out[-1][1] < 1:
            raise GnnperfError(f"--calibrate {ref} {batch} {ms}: the batch size must be at least 1")
    return out


def _time_unit(seconds: float) -> tuple[str, float]:
    """The largest of s, min, h and days that ``seconds`` is at least one of, with its size in seconds."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return unit, size
    return "s", 1.0
