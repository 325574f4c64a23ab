"""Which cached graphs had ops folded away (``meta["folded"]``, IR_VERSION 3), by reference kind and exporter.

.venv/bin/python experiments/all_sources/folded.py .cache/graphs [--op Identity]
"""

from __future__ import annotations

import argparse
import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cache", type=Path, help="a graph cache folder")
    parser.add_argument("--op", default="Identity", help="list the graphs that folded this op type")
    args = parser.parse_args()
    graphs: Counter[tuple[str, str]] = Counter()
    folded: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    listed = defaultdict(list)
    for path in sorted(args.cache.glob("*.json.gz")):
        with gzip.open(path, "rt") as f:
            graph = json.load(f)
        ref = graph["model_ref"]
        group = ("hf" if ref.startswith("hf:") else ref.split(":")[0], graph["exporter"])
        graphs[group] += 1
        ops = graph.get("meta", {}).get("folded", {})
        folded[group].update({op: 1 for op in ops})
        if args.op in ops:
            listed[group].append(f"{ref} {graph['input_shape']}: {ops[args.op]}")
    for group in sorted(graphs):
        counts = ", ".join(f"{op} in {n}" for op, n in sorted(folded[group].items())) or "none"
        print(f"{group[0]} ({group[1]}): {graphs[group]} graphs; folded {counts}")
        for line in listed[group]:
            print(f"  {args.op}: {line}")


if __name__ == "__main__":
    main()
