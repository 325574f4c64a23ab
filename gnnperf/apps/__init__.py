"""Thin Hydra entry points: each ``main(cfg)`` calls a function that returns its results."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gnnperf.errors import GnnperfError, quiet_library_warnings

# The repository's conf/ (absolute: Hydra reads a relative path as a Python module under console scripts).
CONF_DIR = str(Path(__file__).resolve().parents[2] / "conf")


@contextmanager
def user_errors(prog: str) -> Iterator[None]:
    """End a :class:`GnnperfError` in one line ``prog: error: ...`` and exit code 2; anything else still raises.

    Hydra's ``instantiate`` wraps what a target raises in an ``InstantiationException`` (a bad backbone name, a bad
    model size), so the chain of causes is searched too. The libraries' deprecation warnings are hidden.
    """
    quiet_library_warnings()
    try:
        yield
    except Exception as e:
        cause: BaseException | None = e
        while cause is not None and not isinstance(cause, GnnperfError):
            cause = cause.__cause__
        if cause is None:
            raise
        print(f"{prog}: error: {cause}", file=sys.stderr)
        sys.exit(2)
