"""``gnnperf predict MODEL --hardware NAME --batch-size N``: a trained GNN's prediction for a model."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from gnnperf.predictor.parallel import GPUS_PER_MACHINE, PARALLEL
from gnnperf.predictor.report import fastest_first, print_comparison, print_row

MAX_COUNT = 2**31 - 1  # a batch size or device count beyond it is a typo (past 2**63 torch cannot hold it)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        nargs="+",
        help="model reference (timm:NAME, torchvision:NAME, hf:config.json, hf:MODEL_TYPE, zoo:..., .onnx, pkg.mod:fn, file.py:fn); several "
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
        default="1",
        help="data-parallel devices, each with --batch-size samples (default 1; the shipped predictor learned 1-4 "
        "GPUs from DataParallel rows); several, comma-separated (1,2,4), for a comparison table",
    )
    parser.add_argument(
        "--parallel",
        default="dp",
        choices=PARALLEL,
        help="how several devices run: dp, torch.nn.DataParallel, as learned (default); ddp, "
        "DistributedDataParallel: one device's predicted step + the gradient all-reduce the backward pass does "
        "not hide, from the interconnect's bandwidth; fsdp, fully sharded (FSDP2 fully_shard, ZeRO-3; each "
        "transformer layer a unit): weights, gradients and optimizer state sharded over the devices, the step + "
        "the all-gathers and reduce-scatter the passes do not hide (both composed, not learned)",
    )
    parser.add_argument(
        "--fsdp-param-dtype",
        choices=["bf16", "fp16"],
        help="with --parallel fsdp and --precision fp32: FSDP2's MixedPrecisionPolicy(param_dtype=..., "
        "reduce_dtype=float32), the passes in that type over fp32 shards, the weights gathered in it and the "
        "gradients reduce-scattered in fp32",
    )
    parser.add_argument(
        "--fsdp-no-reshard",
        action="store_true",
        help="with --parallel fsdp: FSDP2 fully_shard(reshard_after_forward=False), each block's weights kept "
        "gathered from its forward pass to its backward pass (one all-gather a step, more memory)",
    )
    parser.add_argument(
        "--ddp-bucket-view",
        action="store_true",
        help="with --parallel ddp: DistributedDataParallel(gradient_as_bucket_view=True), the gradients views into "
        "its buckets, so no second copy of them in memory",
    )
    parser.add_argument(
        "--fsdp-no-sync",
        action="store_true",
        help="with --parallel fsdp and --grad-accum K: FSDP2 set_requires_gradient_sync(False) for the first K-1 "
        "micro-batches, the gradients kept whole and summed on each device, reduce-scattered once (less "
        "communication, more memory)",
    )
    parser.add_argument(
        "--fsdp-shard-devices",
        type=int,
        metavar="S",
        help="with --parallel fsdp: hybrid sharding (HSDP, fully_shard over a 2-D mesh): sharded over groups of S "
        "devices (such as one machine's) and replicated across the groups, which all-reduce their gradient shards",
    )
    parser.add_argument(
        "--gpus-per-machine",
        type=int,
        default=GPUS_PER_MACHINE,
        metavar="G",
        help="GPUs a machine holds, sharing its GPU-to-GPU link (default 8, an HGX/DGX board); --parallel ddp or "
        "fsdp on more devices spans machines",
    )
    parser.add_argument(
        "--network",
        metavar="SPEC",
        help="with --parallel ddp or fsdp over several machines: their network, as NICs per machine x each one's "
        "Gbit/s (8x400gbit: the NICs' rate at 0.9) or the all-reduce bus bandwidth nccl-tests measured on them "
        "(380gbs); the collectives run at the slower of it and the GPUs' link (without it the network is not "
        "priced, and the prediction says so)",
    )
    parser.add_argument(
        "--h2d", action="store_true", help="include the host-to-device copy of the inputs in the time"
    )
    parser.add_argument(
        "--activation-checkpointing",
        nargs="?",
        const="full",
        default=False,
        choices=["full", "selective"],
        help="checkpoint the repeated blocks (transformer layers, residual blocks): the memory keeps only their "
        "inputs, the time adds their forward pass again (composed); 'selective': by op, as torchtitan, keeping every "
        "other matrix product's and attention's outputs (write a model reference before the bare flag, not after)",
    )
    parser.add_argument(
        "--grad-accum",
        type=int,
        default=1,
        metavar="K",
        help="sum the gradients of K micro-batches of --batch-size before each optimizer update: the iteration is "
        "the update's (K passes, one update, DDP's all-reduce once, FSDP's collectives every pass, or with "
        "--fsdp-no-sync its gathers alone before the last; composed, not learned), and the memory estimate "
        "holds every gradient through the later passes",
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
        help="list the N ops with the most predicted time (those at one place in repeated blocks as one) and the "
        "time of each op class",
    )
    parser.add_argument(
        "--calibrate",
        nargs=3,
        action="append",
        metavar=("REF_MODEL", "REF_BATCH", "REF_MS"),
        help="a reference model measured on this hardware with this workload (batch size, iteration ms, one "
        "micro-batch's step under --grad-accum; at the "
        "--input-shape or --seq-len given if it takes the same kind of input, else at its default); the prediction "
        "is scaled by measured / predicted for it (repeatable: geometric mean)",
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

    batches = _positive_ints(args.batch_size, "--batch-size")
    device_counts = _positive_ints(args.num_devices, "--num-devices")
    if args.grad_accum < 1:
        raise GnnperfError(f"--grad-accum must be at least 1 micro-batch, got {args.grad_accum}")
    if args.epoch_samples is not None and args.epoch_samples < 1:
        raise GnnperfError(f"--epoch-samples must be at least 1, got {args.epoch_samples}")
    if args.epochs is not None and args.epoch_samples is None:
        raise GnnperfError(
            f"--epochs {args.epochs} needs --epoch-samples N (the training samples of one epoch)"
        )
    if args.epochs is not None and args.epochs < 1:
        raise GnnperfError(f"--epochs must be at least 1, got {args.epochs}")
    if args.calibrate and args.measured_on:
        raise GnnperfError("--calibrate and --measured-on are two ways to anchor a prediction: give one")
    if args.breakdown < 0:
        raise GnnperfError(f"--breakdown must be a number of ops >= 0, got {args.breakdown}")
    if args.seq_len is not None and args.seq_len < 1:
        raise GnnperfError(f"--seq-len must be at least 1, got {args.seq_len}")
    hardware = _hardware_names(args.hardware, args.hardware_file)
    no_link = []  # with 'all' and DDP or FSDP: the GPUs whose entry gives no peer bandwidth, left out of the ranking
    # one GPU a machine and a network: the rings need no GPU-to-GPU link
    network_only = args.gpus_per_machine == 1 and args.network is not None
    if (
        args.parallel != "dp"
        and max(device_counts) > 1
        and _asks_every_gpu(args.hardware)
        and not network_only
    ):
        from gnnperf.hardware.table import load_table
        from gnnperf.predictor.parallel import link_gbs

        table = load_table(args.hardware_file)
        no_link = [h for h in hardware if h in table and link_gbs(table[h].interconnect) is None]
        hardware = [h for h in hardware if h not in no_link]
    if (len(hardware) > 1 or len(device_counts) > 1) and args.calibrate:
        raise GnnperfError(
            "--calibrate scales the predictions for the device and device count it was measured with: give one "
            "--hardware and one --num-devices"
        )
    models = list(dict.fromkeys(args.model))
    if (len(batches) > 1 or len(models) > 1 or len(device_counts) > 1) and args.measured_on:
        raise GnnperfError(
            "--measured-on is the time of one model at one batch size and device count: give one of each"
        )
    if len(models) * len(hardware) * len(batches) * len(device_counts) > 1 and args.breakdown:
        raise GnnperfError(
            "--breakdown lists the ops of one prediction: give one model, --hardware, --batch-size and --num-devices"
        )
    if args.input_shape is not None and not args.input_shape.strip():
        raise GnnperfError(
            "--input-shape is empty: give the per-sample shape, such as 3,224,224, or leave it out"
        )
    shape = (args.seq_len,) if args.seq_len is not None else parse_input_shape(args.input_shape)
    if (
        args.checkpoint is not None and not args.checkpoint.strip()
    ):  # `--checkpoint ""`: a typo, not "the default"
        raise GnnperfError("--checkpoint is empty: give a file, or leave it out for the default")
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
            num_devices=count,
            parallel=args.parallel,
            activation_checkpointing=args.activation_checkpointing == "full" or args.activation_checkpointing,
            grad_accum=args.grad_accum,
            fsdp_param_dtype=args.fsdp_param_dtype,
            fsdp_reshard_after_forward=not args.fsdp_no_reshard,
            fsdp_sync_every_pass=not args.fsdp_no_sync,
            fsdp_shard_devices=args.fsdp_shard_devices,
            ddp_bucket_view=args.ddp_bucket_view,
            gpus_per_machine=args.gpus_per_machine,
            network=args.network,
        )
        for model in models
        for device in hardware
        for batch in batches
        for count in device_counts
    ]
    if args.calibrate:
        predictor.calibrate(
            [
                (
                    replace(
                        queries[0],
                        model=ref,
                        batch_size=batch,
                        grad_accum=1,  # a reference is timed one pass at a time
                        fsdp_sync_every_pass=True,
                        input_shape=_reference_shape(ref, models, shape),
                    ),
                    ms,
                )
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
        if "calibration_factor" in row:
            row["calibrated_on"] = len(args.calibrate)
        if args.epoch_samples:
            row["epoch"] = epoch_estimate(row, args.epoch_samples, args.epochs or 1)
        try:
            row["memory"] = predictor.memory(query, args.hardware_file, max_batch=args.max_batch)
            if row["memory"] is None and args.max_batch:
                row["memory_note"] = "no memory estimate: it covers steps on a GPU whose memory size is known"
        except GnnperfError as e:  # a model the shape-only trace cannot run
            row["memory"], row["memory_note"] = None, str(e)
    if _asks_every_gpu(args.hardware):  # a ranking: the table and the JSON lines alike
        rows = fastest_first(rows)
    if args.json:
        for row in rows:
            print(json.dumps(row))
    elif len(rows) == 1:
        print_row(rows[0])
    else:
        print_comparison(rows)
    if no_link:  # beside the JSON lines, not among them
        print(
            f"  left out: {', '.join(no_link)} (their entries give no GPU-to-GPU bandwidth, which --parallel "
            f"{args.parallel} needs; a --hardware-file entry can give one)",
            file=sys.stderr if args.json else sys.stdout,
        )
    return 0


def _positive_ints(text: str, flag: str) -> list[int]:
    """``--batch-size`` or ``--num-devices`` as a list: one value or several, comma-separated; each at least 1."""
    from gnnperf.errors import GnnperfError

    try:
        values = [int(t) for t in str(text).split(",")]  # an empty item ("32," or "32,,64") is a typo too
    except ValueError:
        raise GnnperfError(f"{flag} {text!r}: expected an integer or several, comma-separated") from None
    for value in values:
        if not 1 <= value <= MAX_COUNT:
            raise GnnperfError(f"{flag} must be between 1 and {MAX_COUNT}, got {value}")
    return list(dict.fromkeys(values))


def _hardware_names(text: str, hardware_file: str | None) -> list[str]:
    """``--hardware`` as a list of names: one or several, comma-separated; ``all`` among them is every GPU of the table."""
    from gnnperf.errors import GnnperfError
    from gnnperf.hardware.table import canonical_name, load_table

    names = [t.strip() for t in text.split(",")]
    if not all(names):
        raise GnnperfError(f"--hardware {text!r}: expected a device name or several, comma-separated")
    gpus = []
    if _asks_every_gpu(text):
        gpus = sorted(name for name, spec in load_table(hardware_file).items() if spec.kind == "gpu")
    expanded = [g for n in names for g in (gpus if n.lower() == "all" else [n])]
    # aliases of one entry are one device; a name the table lacks stays as given (a trained-on CPU, a typo)
    return list(dict.fromkeys(canonical_name(n, hardware_file) or n for n in expanded))


def _asks_every_gpu(text: str) -> bool:
    return any(t.strip().lower() == "all" for t in text.split(","))


def _reference_shape(ref: str, models: list[str], shape: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """A ``--calibrate`` reference's input shape: the ``--input-shape``/``--seq-len`` given where it takes the
    same kind of input as the model predicted (images, token ids, ...), else its own default."""
    from gnnperf.zoo.resolve import resolve

    if shape is None or resolve(ref).input_kind != resolve(models[0]).input_kind:
        return None
    return shape


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
