"""The ``gnnperf`` command.

Each sub-command lives next to the code it drives and exposes ``add_arguments(parser)`` and
``run(args) -> int``; this module only wires them up and turns user errors into one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import NoReturn

from gnnperf.errors import GnnperfError, quiet_library_warnings

# name -> (module with add_arguments/run, help line)
COMMANDS: dict[str, tuple[str, str]] = {
    "graph": ("gnnperf.graph.cli", "export a model and print its op table"),
    "hardware": ("gnnperf.hardware.cli", "list, show or probe hardware entries"),
    "zoo": ("gnnperf.zoo.cli", "list model-zoo families and sample configurations"),
    "data": ("gnnperf.data.cli", "summarise a sample store or import public benchmark tables"),
    "predict": (
        "gnnperf.predictor.cli",
        "predict a model's iteration time on a device with a trained GNN, or compare models, devices and batches",
    ),
}


class OneLineErrors(argparse.ArgumentParser):
    """argparse's usage errors as one line, as every other user error (argparse prints the usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(prog="gnnperf", description="Predict deep-learning iteration time.")
    parser.add_argument("-v", "--verbose", action="store_true", help="show library warnings and debug logs")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        module = importlib.import_module(module_name)
        module.add_arguments(p)
        p.set_defaults(_run=module.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if not args.verbose:
        quiet_library_warnings()
    try:
        return int(args._run(args) or 0)
    except GnnperfError as e:
        print(f"gnnperf {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gnnperf predict ... --json | head -1`: the reader has what it wanted
        import os

        # Python flushes stdout again at exit, into the closed pipe: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
