"""The text reports of ``gnnperf predict``: one prediction, or a table comparing several.

Both read only the prediction rows (:meth:`gnnperf.predict.Predictor.predict` with the CLI's ``epoch`` and
``memory`` entries), which hold everything they print.
"""

from __future__ import annotations

from gnnperf.console import stdout_console
from gnnperf.predictor.coverage import THIN_ROWS
from gnnperf.predictor.epoch import samples_per_iteration
from gnnperf.predictor.notes import (
    EAGER_ATTENTION_NOTE,
    accumulation_note,
    checkpointing_note,
    parallel_note,
    print_memory,
)
from gnnperf.predictor.optimizer_step import UPDATE_FLOOR_NOTE
from gnnperf.predictor.parallel import DP_FLOOR_NOTE

# The GNN's MAPE on a GPU no training row had (experiments/h200_unseen/results.json, predictors.gnn.all.mape,
# rounded; a test keeps the two equal), quoted for devices predicted from their specs.
UNSEEN_DEVICE_MAPE = 46
UNSEEN_DEVICE_STUDY = "experiments/h200_unseen"
# what set the fused attention kernel's rate (gnnperf.predictor.fused_attention), by whether the flash ceiling did
RATE_SOURCE = {
    False: "the step's weight-product rate",
    True: "PyTorch's flash kernel's published rate on this GPU",
}


def print_row(row: dict) -> None:
    """The text report of one prediction."""
    lo, hi = row["interval_ms"]
    seen = "seen in training" if row["hardware_seen_in_training"] else "predicted from its specs"
    devices = f" x {row['num_devices']} devices" if row["num_devices"] > 1 else ""
    devices += f" x {row['grad_accum']} accumulated" if row.get("grad_accum", 1) > 1 else ""
    layout = ", channels_last" if row["memory_format"] == "channels_last" else ""
    print(
        f"{row['model']} on {row['hardware']} ({seen}), batch {row['batch_size']}{devices}, {_precision(row)}"
        f"{layout}, {row['timed']}"
    )
    # from the validation rows of its device, mode and precision (as predicted), or from every row
    step = f"{row['mode']} {row.get('precision_predicted_as') or _passes(row)}"
    scope = f", of {row['hardware']}'s {step} rows" if row.get("interval_scope") == "group" else ""
    print(
        f"  iteration time {row['iteration_time_ms']:.2f} ms  ({row['interval_coverage']:.0%} interval "
        f"{lo:.2f} .. {hi:.2f} ms{scope})"
    )
    if not row["hardware_seen_in_training"] and not {"calibration_factor", "measured_on"} & row.keys():
        print(
            "  the interval is that of the devices seen in training, not of one predicted from its specs: a device "
            f"no training row had (the H200) was missed by {UNSEEN_DEVICE_MAPE}% MAPE ({UNSEEN_DEVICE_STUDY}); "
            "--calibrate with a model timed on it"
        )
    for assumed in row.get("assumptions", ()):
        print(f"  assumed: {assumed}")
    if "fused_attention" in row:
        a = row["fused_attention"]
        print(
            f"  attention as sdpa's fused kernel: {a['fused_ms']:.2f} ms in place of the eager graph's attention ops' "
            f"{a['eager_ms']:.2f} ms (the eager step {a['eager_step_ms']:.2f} ms; composed at "
            f"{RATE_SOURCE[a['flash_ceiling']]}, {a['rate_tflops']:.0f} TFLOP/s{', causal' if a['causal'] else ''})"
        )
    if row["num_devices"] > 1:
        print(f"  {parallel_note(row)}")
    if "activation_checkpointing" in row:
        print(f"  {checkpointing_note(row['activation_checkpointing'])}")
    if "grad_accumulation" in row:
        print(f"  {accumulation_note(row['grad_accumulation'])}")
    if "epoch" in row:
        ep, n = row["epoch"], row["epoch"]["iterations"]
        print(
            f"  epoch of {ep['samples']} samples: {n} iteration{'s' * (n != 1)}, {ep['time_s']:.1f} s "
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
        print_memory(row["memory"])
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
    # calibrated: the level comes from the measurement on the device
    if row["unseen_on_device"] and "calibration_factor" not in row:
        unseen = ", ".join(row["unseen_on_device"])
        print(f"  never measured on {row['hardware']} in training (its level from other devices): {unseen}")
    if row["unseen_combination"]:
        together = ", ".join(row["unseen_combination"])
        print(f"  never together on this kind of device in training, extrapolated: {together}")
    if row.get("thin_on_device_kind"):
        print(f"  seen in few training rows of this kind of device: {', '.join(row['thin_on_device_kind'])}")
    if row.get("faster_than_trained"):
        print(
            f"  faster than every row of its mode on this kind of device in training: {row['faster_than_trained']}"
        )
    if row.get("channels_last_moot"):
        print(f"  channels_last: {NOTES['channels_last_moot'][1]}")
    if row.get("precision_predicted_as"):
        print(f"  {_passes(row)}: {NOTES['precision_predicted_as'][1]} ({row['precision_predicted_as']})")
    if row.get("capped_at_batch"):
        print(
            f"  at most the batch-{row['capped_at_batch']} prediction ({NOTES['capped_at_batch'][1]}; the network "
            f"said {row['uncapped_ms']:.2f} ms)"
        )
    if row.get("floored_at_one_device"):
        print(f"  {DP_FLOOR_NOTE} (the network said {row['unfloored_ms']:.2f} ms)")
    if row.get("floored_at_update"):
        print(
            f"  {UPDATE_FLOOR_NOTE} ({row['update_least_ms']:.3g} ms; the network said {row['unfloored_ms']:.2f} ms)"
        )
    if row["priced_at_fp32_peak"]:
        print(
            f"  {row['hardware']} has no {row['precision']} rate of its own in the hardware table: priced at its FP32 "
            f"peak; how it really runs there the table does not say (the TITAN Xp's fp16 training steps took a median "
            f"1.2x their fp32 time, the P100 has fp16 units at twice its fp32 rate)"
        )
    if row["unseen_input_rank"]:
        print(f"  {NOTES['unseen_input_rank'][1]}: {row['unseen_input_rank']}")
    if row["unseen_op_types"]:
        how = (
            f"{row['unseen_op_share']:.0%} of its roofline time; blended with the {row['fallback_baseline']} baseline, "
            f"the network alone says {row['gnn_iteration_time_ms']:.2f} ms"
            if "unseen_op_share" in row
            else "no fallback in this checkpoint: the network extrapolates"
        )
        print(f"  op types unseen in training: {', '.join(row['unseen_op_types'])} ({how})")
    if "calibration_factor" in row:
        print(f"  {_calibrated(row)}")
    if "measured_on" in row:
        ref = row["measured_on"]
        print(
            f"  from {ref['ms']:.2f} ms measured on {ref['hardware']} (predicted there {ref['predicted_ms']:.2f} ms): "
            f"x{row['transfer_factor']:.3f}"
        )
        if ref.get("flags"):  # the factor divides by that prediction: its extrapolations are this row's too
            notes = ", ".join(NOTES[k][0] for k in ref["flags"])
            print(f"  the prediction on {ref['hardware']} extrapolated: {notes} (--json says which)")
    if row.get("breakdown"):
        print("  ops with the most time (those at one place in repeated blocks together, x how many):")
    for op in row.get("breakdown", []):
        count = f"{op['count']} x" if op["count"] > 1 else ""
        print(f"  {op['ms']:10.3f} ms  {count:>6} {op['op']:<20} {op['name']}")
    if "breakdown_all_ops_ms" in row:
        listed = sum(op["ms"] for op in row["breakdown"])
        others = row["breakdown_all_ops_ms"] - listed
        print(f"  {others:10.3f} ms  in the other ops of the graph")
        step = row["breakdown_step_ms"]
        print(f"  {step - row['breakdown_all_ops_ms']:10.3f} ms  not attributed to any op")
        if (composed := row["iteration_time_ms"] - step) > 1e-6:
            print(f"  {composed:10.3f} ms  composed on the network's step of {step:.3f} ms (lines above)")
        classes = ", ".join(
            f"{c['class']} {c['ms']:,.1f} ms ({c['ms'] / step:.0%}, {c['count']} ops)"
            for c in row["breakdown_by_class"]
        )
        print(f"  by op class (of the step): {classes}")


# Short names of a row's extrapolation flags for the comparison table, with what each means (printed once below it).
NOTES = {
    "hardware_outside_training_range": (
        "data sheet",
        "figures outside those of the training devices, or missing where every one had them",
    ),
    "outside_training_range": (
        "workload range",
        "batch size or device count outside the training rows' range",
    ),
    "unlearned_workload": ("unlearned", "a workload feature constant in training, so ignored by the network"),
    "unseen_on_device_kind": (
        "unseen on kind",
        "a workload value never seen on this kind of device in training",
    ),
    "unseen_on_device": ("unseen on device", "a workload value never measured on this (training) device"),
    "unseen_combination": ("unseen together", "workload values never seen together on this kind of device"),
    "priced_at_fp32_peak": (
        "fp32 rate",
        "no rate of its own for this precision in the table: priced at FP32 peak",
    ),
    "thin_on_device_kind": (
        "thin",
        f"a workload value in under {THIN_ROWS} training rows of this kind of device",
    ),
    "faster_than_trained": (
        "below range",
        "faster than every training row of its mode on this kind of device (judged on the network's own time)",
    ),
    "unseen_op_types": ("unseen ops", "op types no training graph had"),
    "unseen_input_rank": ("input rank", "a model input of a rank no training graph had"),
    "channels_last_moot": (
        "layout moot",
        "no 4-D or 5-D input and no convolution for channels_last to change: predicted as the contiguous step",
    ),
    "capped_at_batch": (
        "batch cap",
        "predicted slower than at a larger batch, so given that time: a smaller batch is never slower",
    ),
    "floored_at_one_device": ("device floor", DP_FLOOR_NOTE),
    "floored_at_update": ("update floor", UPDATE_FLOOR_NOTE),
    "precision_predicted_as": (
        "as fp16",
        "bf16 at the device's fp16 rate, and barely seen in training: predicted as the fp16 step",
    ),
}


def fastest_first(rows: list[dict]) -> list[dict]:
    """The rows fastest first within each (model, batch size, device count), models in the order asked."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    key = lambda r: (models.index(r["model"]), r["batch_size"], r["num_devices"], r["iteration_time_ms"])  # noqa: E731
    return sorted(rows, key=key)


def print_comparison(rows: list[dict]) -> None:
    """One table row per (model, device, batch size), in the order given."""
    from rich import box
    from rich.table import Column, Table

    models = list(dict.fromkeys(r["model"] for r in rows))
    first, batches, counts = rows[0], {r["batch_size"] for r in rows}, {r["num_devices"] for r in rows}
    devices = (
        f" per device x {first['num_devices']} devices"
        if len(counts) == 1 and first["num_devices"] > 1
        else ""
    )
    devices = " per device" if len(counts) > 1 else devices
    batch = f"batch {first['batch_size']}" if len(batches) == 1 else "batch" if devices else ""
    batch = f"{batch}{devices}, " if batch else ""
    layout = ", channels_last" if first["memory_format"] == "channels_last" else ""
    what = first["model"] if len(models) == 1 else f"{len(models)} models"
    ck = first.get("activation_checkpointing")
    checkpointed = f", {'selective ' if ck['selective'] else ''}activation checkpointing" if ck else ""
    k = first.get("grad_accum", 1)
    accumulated = f", gradients of {k} micro-batches per update" if k > 1 else ""
    title = f"{what}: {batch}{_precision(first)}{layout}, {first['timed']}{checkpointed}{accumulated}"
    memory = any(r["memory"] for r in rows)
    # a zoo reference runs to a hundred characters: folded, not cut, so that two of them stay apart
    header: list[str | Column] = [Column("model", overflow="fold", max_width=48)] * (len(models) > 1)
    header += ["hardware"] + ["batch"] * (len(batches) > 1) + ["devices"] * (len(counts) > 1)
    header += ["ms / iter", f"{first['interval_coverage']:.0%} interval", "samples/s"]
    max_batch = any(r["memory"] and "largest_batch" in r["memory"] for r in rows)
    epoch = first.get("epoch")
    header += ["peak GiB"] * memory + ["max batch"] * max_batch
    header += [f"{epoch['epochs']} epochs" if epoch["epochs"] > 1 else "epoch"] if epoch else []
    table = Table(*header, "extrapolated", title=title, box=box.SIMPLE_HEAD, pad_edge=False)
    used: set[str] = set()
    for row in rows:
        lo, hi = row["interval_ms"]
        from_specs = not row["hardware_seen_in_training"] and "calibration_factor" not in row
        cells = [row["model"]] * (len(models) > 1) + [row["hardware"] + " *" * from_specs]
        cells += [str(row["batch_size"])] * (len(batches) > 1) + [str(row["num_devices"])] * (len(counts) > 1)
        cells += [_ms(row["iteration_time_ms"]), f"{_ms(lo)}-{_ms(hi)}"]
        rate = samples_per_iteration(row) / row["iteration_time_ms"] * 1000
        cells.append(f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}")
        m = row["memory"]
        if memory:
            cells.append(f"{m['total_mb'] / 1024:.1f} {m['verdict']}" if m else "-")
        if max_batch:
            cells.append(str(m["largest_batch"]) if m else "-")
        if epoch:
            ep = row["epoch"]
            seconds = ep["run_time_s"] if ep["epochs"] > 1 else ep["time_s"]
            unit, size = _time_unit(seconds)
            cells.append(f"{seconds / size:.1f} {unit}")
        flags = [key for key in NOTES if row.get(key)]
        used.update(flags)
        cells.append(", ".join(NOTES[k][0] for k in flags) or "-")
        table.add_row(*cells)
    console = stdout_console()
    console.print(table)
    notes = []
    if any(not r["hardware_seen_in_training"] and "calibration_factor" not in r for r in rows):
        notes.append(
            f"* no training rows: predicted from the data sheet; on the one such GPU measured (the H200) the "
            f"predictions missed by {UNSEEN_DEVICE_MAPE}% MAPE ({UNSEEN_DEVICE_STUDY}), more than the interval says"
        )
    notes += [f"{NOTES[k][0]}: {NOTES[k][1]} (--json says which)" for k in NOTES if k in used]
    if "calibration_factor" in first:
        notes.append(_calibrated(first))
    if "measured_on" in first:
        ref = first["measured_on"]
        notes.append(f"scaled from {ref['ms']:.2f} ms measured on {ref['hardware']} by the predicted ratio")
    if any(r["num_devices"] > 1 for r in rows):
        notes.append(parallel_note(max(rows, key=lambda r: r["num_devices"]), one=False))
    if checkpointed:
        again = (
            "what its blocks do not keep of their forward pass"
            if ck["selective"]
            else "its blocks' forward pass"
        )
        notes.append(
            f"activation checkpointing: each step plus {again} again (composed, not learned; --json gives the parts)"
        )
        none = [
            m
            for m in models
            if any(r["model"] == m and not r["activation_checkpointing"]["blocks"] for r in rows)
        ]
        if none:
            notes.append(f"no repeated blocks found, so nothing checkpointed: {', '.join(none)}")
    if accumulated:
        notes.append(
            f"gradient accumulation: each iteration {k} micro-batches' passes and one update (composed, not learned; "
            "--json gives the parts)"
        )
    if epoch:
        notes.append(f"epochs of {epoch['samples']} samples; data loading and evaluation not included")
    notes += list(dict.fromkeys(r["memory_note"] for r in rows if "memory_note" in r))
    assumed = {(r["model"], a) for r in rows for a in r.get("assumptions", ())}
    notes += [f"assumed{f' for {m}' * (len(models) > 1)}: {a}" for m, a in sorted(assumed)]
    if any(r["memory"] and r["memory"].get("attention") == "eager" for r in rows):
        notes.append(EAGER_ATTENTION_NOTE)
    for note in notes:
        console.print(f"  {note}")


def _precision(row: dict) -> str:
    """The row's precision as asked, with FSDP's mixed precision the passes' type beside the shards'."""
    mixed = row.get("fsdp_param_dtype")
    return f"{row['precision']} shards, {mixed} passes" if mixed else row["precision"]


def _passes(row: dict) -> str:
    """The precision a row's forward and backward passes run in (FSDP's mixed precision: not the shards')."""
    return row.get("fsdp_param_dtype") or row["precision"]


def _calibrated(row: dict) -> str:
    """The calibration line; ``calibrated_on`` (the number of reference measurements) is set by the CLI."""
    on = f" on {row['calibrated_on']} measurement(s)" if "calibrated_on" in row else ""
    return f"calibrated{on}: x{row['calibration_factor']:.3f}"


def _ms(value: float) -> str:
    """Milliseconds to four significant digits, without an exponent (29,380 rather than 2.938e+04)."""
    return f"{value:,.0f}" if value >= 1000 else f"{value:.4g}"


def _time_unit(seconds: float) -> tuple[str, float]:
    """The largest of s, min, h and days that ``seconds`` is at least one of, with its size in seconds."""
    for unit, size in (("days", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return unit, size
    return "s", 1.0
