"""User-facing errors.

A :class:`GnnperfError` is a mistake in what the user asked for (a bad model reference, an unknown device, an
unreadable file). Entry points print its message on one line and exit with code 2; any other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import difflib
import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterable
from typing import Any


class GnnperfError(Exception):
    """An error caused by user input; reported as one line, exit code 2."""


class GnnperfWarning(UserWarning):
    """Something skipped or dropped on the way (an unreadable shard, samples without a graph); the entry points
    print it as one ``warning:`` line, without the source line Python's default format adds."""


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean: a, b?)' for close matches of ``name``, or ''."""
    close = difflib.get_close_matches(name, list(choices), n=n, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def number(value: Any, what: str, kind: type = int, minimum: float | None = None) -> Any:
    """``kind(value)`` (``int`` or ``float``), or a :class:`GnnperfError` naming ``what``: for config values a user
    can mistype on the command line (``split.fold=abc``); with ``minimum``, a smaller value is one too."""
    noun = "an integer" if kind is int else "a number"
    try:
        x = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise GnnperfError(f"{what}: expected {noun}, got {value!r}") from None
    if kind is int and isinstance(value, float) and x != value:  # int(2.5) would be 2
        raise GnnperfError(f"{what}: expected {noun}, got {value!r}")
    if minimum is not None and not x >= minimum:  # `not >=`: a float nan is refused too
        raise GnnperfError(f"{what}: expected {noun} of at least {minimum:g}, got {value!r}")
    return x


def run_script(main: Callable[[], object]) -> None:
    """Run a script's ``main`` the way the entry points do: a :class:`GnnperfError` is one line and exit code 2."""
    try:
        main()
    except GnnperfError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)


def quiet_library_warnings() -> None:
    """Hide the libraries' deprecation chatter (torch.jit, Lightning, timm) from an entry point's output.

    Lightning's advertisement for its cloud logger (an INFO line on every fit) is dropped always, and gnnperf's own
    warnings print as one line; the libraries' warnings are left alone when the user asked for them (``python -W
    ...`` or ``PYTHONWARNINGS``).
    """
    logging.getLogger("pytorch_lightning.utilities.rank_zero").addFilter(_no_lightning_tip)
    warnings.formatwarning = _format_warning
    if sys.warnoptions:
        return
    # transformers logs through its own handler (config checks of a random-weight build); read at its first log
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)


_DEFAULT_FORMAT = warnings.formatwarning


def _format_warning(message, category, filename, lineno, line=None) -> str:  # noqa: ANN001 (warnings' signature)
    if issubclass(category, GnnperfWarning):
        return f"warning: {message}\n"
    return _DEFAULT_FORMAT(message, category, filename, lineno, line)


def _no_lightning_tip(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("\N{ELECTRIC LIGHT BULB} Tip:")
