"""``gnnperf zoo``: list the parametric model families and sample configurations from them.

``gnnperf zoo list`` prints one row per family with its input kind, description, parameters and defaults;
``gnnperf zoo sample FAMILY -n N --seed S`` prints N canonical ``zoo:`` references, one per line, the same
for the same seed.
"""

from __future__ import annotations

import argparse

from gnnperf.errors import GnnperfError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="zoo_command", required=True, metavar="ACTION")
    sub.add_parser("list", help="list families with their parameters and defaults")
    sample = sub.add_parser("sample", help="print sampled canonical zoo: references")
    sample.add_argument("family", help="family name, as shown by 'gnnperf zoo list'")
    sample.add_argument("-n", "--num", type=int, default=5, help="number of configurations (default 5)")
    sample.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def run(args: argparse.Namespace) -> int:
    if args.zoo_command == "list":
        _list()
    else:
        for ref in sample_refs(args.family, args.num, args.seed):
            print(ref)
    return 0


def sample_refs(family: str, n: int, seed: int = 0) -> list[str]:
    """``n`` canonical ``zoo:`` references drawn from ``family``'s sampler with ``seed``."""
    import numpy as np

    from gnnperf.zoo.registry import format_query, get_family
    from gnnperf.zoo.resolve import resolve

    if n < 1:
        raise GnnperfError(f"-n must be at least 1, got {n}")
    if seed < 0:  # numpy's generators take none
        raise GnnperfError(f"--seed must be at least 0, got {seed}")
    fam = get_family(family)
    rng = np.random.default_rng(seed)
    return [resolve(f"zoo:{family}?{format_query(fam.sample(rng))}").ref for _ in range(n)]


def _format_value(value: object) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def _list() -> None:
    from rich.table import Table

    from gnnperf.console import stdout_console
    from gnnperf.zoo.registry import get_family, list_families

    table = Table(title="gnnperf model zoo (zoo:FAMILY?key=value&...)")
    table.add_column("family", style="bold", no_wrap=True)
    table.add_column("input")
    table.add_column("MMACs", justify="right")
    table.add_column("description")
    table.add_column("params (defaults)", overflow="fold")
    for name in list_families():
        fam = get_family(name)
        macs = f"{fam.macs(fam.defaults) / 1e6:.0f}" if fam.macs else "-"
        params = "\n".join(f"{k}={_format_value(v)}" for k, v in fam.defaults.items())
        table.add_row(name, fam.input_kind, macs, fam.description, params)
    stdout_console().print(table)
    print("MMACs: forward multiply-accumulates per sample at the defaults, in millions.")
