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
        help="model reference (timm:NAME, torchvision:NAME, hf:config.json, zoo:..., .onnx, pkg.mod:fn)",
    )
    parser.add_argument(
        "--hardware",
        required=True,
        help="hardware table name or alias (see `gnnperf hardware list`), or a device the checkpoint was trained on",
    )
    parser.add_argument("--hardware-file", help="extra hardware spec file (CSV/YAML/JSON)")
    parser.add_argument("--batch-size", type=int, required=True, help="samples per iteration on each device")
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
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from gnnperf.errors import GnnperfError
    from gnnperf.predict import Predictor, Query, epoch_estimate
    from gnnperf.zoo.resolve import parse_input_shape

    if args.batch_size < 1:
        raise GnnperfError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.epoch_samples is not None and args.epoch_samples < 1:
        raise GnnperfError(f"--epoch-samples must be at least 1, got {args.epoch_samples}")
    if args.epochs is not None and (args.epochs < 1 or args.epoch_samples is None):
        raise GnnperfError(f"--epochs needs --epoch-samples and must be at least 1, got {args.epochs}")
    shape = (args.seq_len,) if args.seq_len else parse_input_shape(args.input_shape)
    predictor = Predictor.from_checkpoint(args.checkpoint)
    query = Query(
        model=args.model,
        hardware=args.hardware,
        batch_size=args.batch_size,
        input_shape=shape,
        precision=args.precision,
        mode=args.mode,
        optimizer=args.optimizer,
        timed=args.timed,
        memory_format=args.memory_format,
        h2d=args.h2d,
        num_devices=args.num_devices,
    )
    if args.calibrate and args.measured_on:
        raise GnnperfError("--calibrate and --measured-on are two ways to anchor a prediction: give one")
    if args.calibrate:
        predictor.calibrate(
            [
                (replace(query, model=ref, batch_size=batch, input_shape=None), ms)
                for ref, batch, ms in _references(args)
            ],
            hardware_file=args.hardware_file,
        )
    if args.measured_on:
        hardware, ms = args.measured_on
        try:
            ms = float(ms)
        except ValueError:
            raise GnnperfError(f"--measured-on {hardware} {ms}: expected a device and milliseconds") from None
        row = predictor.transfer(
            query, hardware, ms, breakdown=args.breakdown, hardware_file=args.hardware_file
        )
    else:
        (row,) = predictor.predict(query, breakdown=args.breakdown, hardware_file=args.hardware_file)
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
        print(json.dumps(row))
        return 0
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
    return 0


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
