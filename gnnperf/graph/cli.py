"""``gnnperf graph MODEL --batch-size N``: export a model and print its op table (or one JSON object)."""

from __future__ import annotations

import argparse
import json
from collections import Counter


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model",
        help="timm:NAME, torchvision:NAME, hf:config.json or hf:MODEL_TYPE?k=v, zoo:FAMILY?k=v, file.onnx, pkg.mod:fn, file.py:fn",
    )
    parser.add_argument("--batch-size", type=int, default=1, help="batch size to specialise to (default 1)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--input-shape", help="per-sample input shape, e.g. 3,224,224")
    shape.add_argument("--seq-len", type=int, help="sequence length for token models")
    parser.add_argument("--exporter", default="auto", choices=["auto", "torchscript", "dynamo"])
    parser.add_argument("--top", type=int, default=15, help="rows of the op table (default 15)")
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the graph cache")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def summarize(graph, batch_size: int) -> dict:
    """Totals and per-op-type aggregates of a graph at a batch size (the ``--json`` object)."""
    from gnnperf.graph.cost import graph_costs

    costs, unknown = graph_costs(graph, batch_size)
    by_op: dict[str, dict[str, float]] = {}
    for node, c in zip(graph.nodes, costs):
        row = by_op.setdefault(node.op_type, {"count": 0, "flops": 0.0, "bytes": 0.0, "params": 0})
        row["count"] += 1
        row["flops"] += c.flops
        row["bytes"] += c.bytes_read + c.bytes_written
        row["params"] += c.params
    return {
        "model": graph.model_ref,
        "family": graph.meta.get("family"),
        "input_shape": list(graph.input_shape),
        "batch_size": batch_size,
        "exporter": graph.exporter,
        "opset": graph.opset,
        "num_nodes": len(graph.nodes),
        "num_edges": len(graph.edges()),
        "flops": sum(c.flops for c in costs),
        "mat_flops": sum(c.mat_flops for c in costs),
        "bytes": sum(c.bytes_read + c.bytes_written for c in costs),
        "params": graph.param_count(),
        "op_counts": dict(Counter(n.op_type for n in graph.nodes).most_common()),
        "ops": dict(sorted(by_op.items(), key=lambda kv: -kv[1]["flops"])),
        "unknown_ops": unknown,
        "repeated_blocks": graph.meta.get("repeated_blocks"),
        # ops of the export folded away, not priced (Dropout of rate 0, the dynamo exporter's Identity; in a repeated
        # stack, those of the two exported blocks)
        "folded_ops": graph.meta.get("folded", {}),
    }


def run(args: argparse.Namespace) -> int:
    from gnnperf.errors import GnnperfError
    from gnnperf.graph.build import GraphCache, build_graph
    from gnnperf.zoo.resolve import parse_input_shape, resolve_hf

    if args.batch_size < 1:
        raise GnnperfError(f"--batch-size must be at least 1, got {args.batch_size}")
    if args.seq_len is not None and args.seq_len < 1:
        raise GnnperfError(f"--seq-len must be at least 1, got {args.seq_len}")
    if args.top < 1:
        raise GnnperfError(f"--top must be at least 1, got {args.top}")
    shape = (args.seq_len,) if args.seq_len else parse_input_shape(args.input_shape)
    graph = build_graph(
        args.model, shape, exporter=args.exporter, cache=None if args.no_cache else GraphCache()
    )
    summary = summarize(graph, args.batch_size)
    if args.json:
        print(json.dumps(summary))
        return 0
    _print_tables(summary, args.top)
    if (spec := resolve_hf(args.model)) is not None:  # where an hf model's graph is not the model as run
        if spec.graph_builder is not None:
            print(
                f"exported with eager attention, which the predictor learned (the model runs {spec.attention})"
            )
        for assumed in spec.assumptions:
            print(f"assumed: {assumed}")
    return 0


def _print_tables(s: dict, top: int) -> None:
    from rich.table import Table

    from gnnperf.console import stdout_console

    def g(x: float) -> str:
        return f"{x / 1e9:,.3f}"

    table = Table(
        title=f"{s['model']}  batch {s['batch_size']}  input {s['input_shape']}  ({s['exporter']} exporter)"
    )
    # per op: the parameters and buffers it reads, a shared weight once per use; the model's count is below
    for col in ("op", "count", "GFLOPs", "share", "MB moved", "params read"):
        table.add_column(col, justify="left" if col == "op" else "right")
    total = s["flops"] or 1.0
    for op, row in list(s["ops"].items())[:top]:
        table.add_row(
            op,
            str(row["count"]),
            g(row["flops"]),
            f"{row['flops'] / total:.1%}",
            f"{row['bytes'] / 1e6:,.1f}",
            f"{row['params']:,}",
        )
    table.add_section()
    table.add_row(
        "total", str(s["num_nodes"]), g(s["flops"]), "100%", f"{s['bytes'] / 1e6:,.1f}",
        f"{sum(row['params'] for row in s['ops'].values()):,}",
    )  # fmt: skip
    console = stdout_console()
    console.print(table)
    console.print(
        f"nodes {s['num_nodes']}  edges {s['num_edges']}  forward GFLOPs {g(s['flops'])} "
        f"(matrix {g(s['mat_flops'])})  params {s['params'] / 1e6:.2f} M (trainable)"
    )
    if s["folded_ops"]:
        folded = ", ".join(f"{op} {n}" for op, n in s["folded_ops"].items())
        console.print(f"folded away, not priced: {folded}")
    if s["unknown_ops"]:
        console.print(f"[yellow]no cost rule (counted as OTHER, zero FLOPs): {s['unknown_ops']}[/]")
