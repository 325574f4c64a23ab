"""The rich console the command-line tables print to."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

PIPED_WIDTH = 200


def stdout_console() -> Console:
    """A console on stdout; a pipe or a file has no terminal width, and rich would wrap its tables at 80 columns."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)
