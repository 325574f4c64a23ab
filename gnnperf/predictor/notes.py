"""The notes ``gnnperf predict``'s reports print beside a prediction: its memory, how several devices run it, and
what activation checkpointing adds (:mod:`gnnperf.predictor.report`)."""

from __future__ import annotations

# an hf model run with eager attention (the reference names it, or its class has no sdpa)
EAGER_ATTENTION_NOTE = (
    "eager attention keeps each layer's attention matrix for the backward pass; sdpa, transformers' default and an "
    "hf: reference's where the class has it, keeps none and runs as one fused kernel (its time composed so)"
)


def print_memory(m: dict) -> None:
    """The memory lines of one prediction: the peak, at which moment, by what holds it, and the verdict."""
    verdict = {
        "fits": "fits",
        "at the limit": "at the limit: above the share usable in practice, it may run out of memory",
        "does not fit": "does NOT fit: expect an out-of-memory error",
    }[m["verdict"]]
    gib = {k: v / 1024 for k, v in m.items() if k.endswith("_mb")}
    if m["peak_at"] == "forward":  # an inference step
        print(
            f"  peak memory {gib['total_mb']:.1f} GiB per device in the forward pass (tensors {gib['activations_mb']:.1f} "
            f"at once; weights {gib['weights_mb']:.1f}), of {m['device_memory_gb']:g} GB: {verdict}"
        )
        if "largest_batch" in m:
            print(f"  largest batch whose step fits: {m['largest_batch']} per device")
        return
    held = m["weights_mb"] + m["optimizer_mb"] + m["ddp_buckets_mb"]
    buckets = " + DDP buckets" if m["ddp_buckets_mb"] else ""
    moment = {
        "backward": f"in the backward pass (activations and gradients {gib['backward_mb']:.1f} at once, of "
        f"{gib['activations_mb']:.1f} and {gib['gradients_mb']:.1f}",
        "tied_gradients": f"at the end of the backward pass (the gradients {gib['gradients_mb']:.1f} and a tied "
        f"weight's two more {gib['tied_gradients_mb']:.1f}"
        + (", the root unit's weights and gradients whole" if m.get("fsdp") else ""),
        "update": f"at the optimizer update (the gradients {gib['gradients_mb']:.1f} and the update's temporaries "
        f"{gib['update_mb']:.1f}",
        # sharded, accumulating without syncing every pass
        "pass_start": "at the start of a later micro-batch's forward pass (every gradient whole, the root unit's and "
        f"the first block's weights gathered: {gib['total_mb'] - held / 1024 - gib['workspace_mb']:.1f}",
    }[m["peak_at"]]
    print(
        f"  peak memory {gib['total_mb']:.1f} GiB per device {moment}; weights{buckets} + optimizer "
        f"{held / 1024:.1f}), of {m['device_memory_gb']:g} GB: {verdict}"
    )
    if m.get("fsdp"):
        f = m["fsdp"]
        print(
            f"  sharded over {f['devices']} devices: weights, gradients and optimizer state a shard each; the "
            f"root unit's weights ({f['root_mb'] / 1024:.1f} GiB: all but the {f['units']} repeated blocks) gathered "
            f"whole through both passes, each block's ({f['largest_unit_mb'] / 1024:.2f} GiB at most) in turn"
        )
    if "largest_batch" in m:
        print(f"  largest batch whose step fits: {m['largest_batch']} per device")
    if m.get("attention") == "eager":
        print(f"  {EAGER_ATTENTION_NOTE}")


def parallel_note(row: dict, one: bool = True) -> str:
    """How a prediction on several GPUs runs them: ``DataParallel`` as learned, or ``DistributedDataParallel``.

    With ``one``, the DDP line gives ``row``'s all-reduce times; for a table (given its row with the most devices)
    only what the rows share.
    """
    if row["parallel"] == "dp":
        return (
            "devices: torch.nn.DataParallel (one process scattering each batch), as the training rows ran it; "
            "--parallel ddp for DistributedDataParallel, fsdp for fully sharded"
        )
    if row["parallel"] == "fsdp":
        return _fsdp_note(row, one)
    how = "DistributedDataParallel: one device's predicted step + the gradient all-reduce its backward pass does not hide"
    if "ddp" not in row:  # nothing timed that has a backward pass
        return f"{how} (none: no backward pass is timed)"
    d = row["ddp"]
    ring = (
        f" ({d['exposed_allreduce_ms']:.2f} of {d['allreduce_ms']:.2f} ms after a {d['step_ms']:.2f} ms step), a ring "
        f"over {_links(d)} at {d['allreduce_gbs']:.0f} GB/s"
        if one
        else ", a ring over each GPU's interconnect (--json: ddp)"
    )
    return (
        f"{how}{ring}; composed from the data sheet, not learned: no source here timed DDP, and published 8-GPU "
        f"ResNet-50 runs lost 3-19% an iteration where it adds at most 0.2% (experiments/ddp){_machines(d)}"
    )


def _links(parts: dict) -> str:
    """What the rings of ``parts`` (a row's ``ddp`` or ``fsdp``) run over: the GPUs' link, and the network priced."""
    if parts["network"] and parts["gpus_per_machine"] == 1:  # one GPU a machine: no peer link in the rings
        return parts["network"]
    return parts["interconnect"] + (f" and {parts['network']}" if parts["network"] else "")


def _machines(parts: dict) -> str:
    """Whether the rings of ``parts`` (a row's ``ddp`` or ``fsdp``) cross machines, and at what the network is priced."""
    if not parts["beyond_one_machine"]:
        return ""
    spans = f"; the GPUs span {parts['machines']} machines of {parts['gpus_per_machine']}"
    if parts["network"] is None:
        return (
            f"{spans}, whose network is not priced: only the GPUs' link is (give --network: the machines' NICs, such "
            "as 8x400gbit, or a measured all-reduce bus bandwidth, such as 380gbs)"
        )
    # hybrid: the replicas' rings cross machines where a group's may not
    crossing = {parts["bandwidth_bound"], parts.get("replicate_bound")}
    bound = "which bounds the rings" if "network" in crossing else "faster than the GPUs' link"
    return f"{spans}, over a network of {parts['network']} ({bound})"


def _fsdp_note(row: dict, one: bool) -> str:
    how = (
        "fully sharded (FSDP2, each repeated block a unit): one device's predicted step + the weights' all-gathers "
        "and the gradients' reduce-scatter its passes do not hide"
    )
    if "fsdp" not in row:
        return f"{how} (none: {'one device' if row['num_devices'] == 1 else 'no backward pass is timed'})"
    f = row["fsdp"]
    if f.get("param_dtype"):
        how += f"; mixed precision: the passes and the gathers in {f['param_dtype']}, fp32 shards and reduce-scatter"
    if not f.get("reshard_after_forward", True):
        how += "; the blocks' weights kept from the forward pass to the backward pass (one all-gather)"
    if f.get("replicas", 1) > 1:
        how += (
            f"; hybrid: sharded over groups of {f['shard_devices']}, replicated {f['replicas']} times, the gradient "
            f"shards all-reduced across them ({f['replicate_allreduce_ms']:.2f} ms at {f['replicate_gbs']:.0f} GB/s)"
        )
    if not f.get("sync_every_pass", True):
        how += "; the micro-batches before the last keep the gradients whole, reduce-scattered once"
    ring = (
        f" ({f['exposed_ms']:.2f} ms of {2 if f.get('reshard_after_forward', True) else 1} x "
        f"{f['all_gather_ms']:.2f} + {f['reduce_scatter_ms']:.2f} after a "
        f"{f['step_ms']:.2f} ms step, less {f['sharded_update_saves_ms']:.2f} for updating a shard), rings over "
        f"{_links(f)} at {f['link_gbs']:.0f} GB/s"
        if one
        else ", rings over each GPU's interconnect (--json: fsdp)"
    )
    return (
        f"{how}{ring}; composed from the data sheet, not learned; its time checked against one published run "
        f"(torchtitan's Llama 3.1 8B on 8 and 128 H100s), its memory against it and sharded CPU runs: "
        f"experiments/fsdp{_machines(f)}"
    )


def accumulation_note(acc: dict) -> str:
    """What gradient accumulation adds to a step (:mod:`gnnperf.predictor.accumulation`)."""
    k = acc["micro_batches"]
    extra = f" + {acc['recompute_ms']:.2f} recomputing" if acc["recompute_ms"] else ""
    extra += f" + {acc['collectives_ms']:.2f} collectives" if acc["collectives_ms"] else ""
    return (
        f"gradients of {k} micro-batches summed before each update: {acc['one_pass_ms']:.2f} ms for the pass with the "
        f"update + {k - 1} x ({acc['pass_ms']:.2f} ms a pass without it{extra} + {acc['gradient_sum_ms']:.2f} "
        "summing the gradients); composed, not learned: experiments/grad_accum"
    )


def checkpointing_note(ck: dict) -> str:
    """What activation checkpointing adds to a step (:mod:`gnnperf.predictor.recompute`)."""
    if not ck["blocks"]:
        return "activation checkpointing: no repeated blocks found in the model, so nothing is checkpointed"
    kind = "selective activation checkpointing (by op)" if ck["selective"] else "activation checkpointing"
    again = "what they do not keep of their forward pass" if ck["selective"] else "their forward pass"
    return (
        f"{kind} of {ck['blocks']} blocks: +{ck['recompute_ms']:.2f} ms recomputing {again} "
        f"({ck['recompute_share']:.0%} of the forward FLOPs; composed, not learned: experiments/checkpointing); "
        f"{ck['step_without_ms']:.2f} ms without"
    )
