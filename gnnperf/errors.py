"""User-facing errors.

A :class:`GnnperfError` is a mistake in what the user asked for (a bad model reference, an unknown device, an
unreadable file). Entry points print its message on one line and exit with code 2; any other exception is a bug
and keeps its traceback.
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Callable, Iterable


class GnnperfError(Exception):
    """An error caused by user input; reported as one line, exit code 2."""


def suggest(name: str, choices: Iterable[str], n: int = 3) -> str:
    """Return ' (did you mean: a, b?)' for close matches of ``name``, or ''."""
    close = difflib.get_close_matches(name, list(choices), n=n, cutoff=0.6)
    return f" (did you mean: {', '.join(close)}?)" if close else ""


def run_script(main: Callable[[], object]) -> None:
    """Run a script's ``main`` the way the entry points do: a :class:`GnnperfError` is one line and exit code 2."""
    try:
        main()
    except GnnperfError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
