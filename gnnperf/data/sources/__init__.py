"""Adapters that turn public benchmark tables into samples of the project's schema (GUIDE "Public data").

Each adapter registers itself with :func:`register_source` when its module is imported; :func:`get_source`
imports them on first use, so importing this package stays cheap. An adapter is a function
``read(path, limit=None) -> (rows, report)``: ``path`` is the folder (or one file) the user gives, ``rows``
are complete samples (:func:`gnnperf.data.schema.make_sample`) and ``report`` an :class:`ImportReport` of
counts and of every row that could not be imported (``file:row: reason``).

The sources time different things (optimizer step or not, host copies, precision, several devices), and each
sample says which in its identity fields (``timed``, ``optimizer``, ``precision``, ``num_devices``,
``software``), so samples of different protocols never share a ``sample_id``.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gnnperf.data.sources.common import ImportReport
from gnnperf.errors import GnnperfError, suggest

if TYPE_CHECKING:
    from gnnperf.hardware.table import HardwareSpec

ReadFn = Callable[..., tuple[list[dict[str, Any]], ImportReport]]

# Modules holding the adapters, imported on first lookup.
_MODULES = ("timm_csv", "torchvision_bench", "neusight")


@dataclass(frozen=True)
class Source:
    """One registered adapter.

    Attributes:
        name: registry key, also the samples' ``source`` column (``timm-benchmark``).
        read: ``read(path, limit=None) -> (rows, report)``.
        description: one line for listings and help.
        hardware: ``hardware() -> [HardwareSpec]``: devices the adapter's rows name that are not in the
            packaged spec table; the importer stores them as ``<store>/hardware/<name>.json``.
    """

    name: str
    read: ReadFn
    description: str
    hardware: Callable[[], list[HardwareSpec]] = list


SOURCES: dict[str, Source] = {}


def register_source(
    name: str, description: str = "", hardware: Callable[[], list[HardwareSpec]] | None = None
) -> Callable[[ReadFn], ReadFn]:
    """Decorator registering ``read`` as the adapter ``name``; a second adapter of that name raises."""

    def decorate(read: ReadFn) -> ReadFn:
        if name in SOURCES:
            raise ValueError(f"source adapter '{name}' is registered twice")
        doc = (read.__doc__ or name).strip().splitlines()[0]
        SOURCES[name] = Source(name, read, description or doc, hardware or list)
        return read

    return decorate


def _load_sources() -> None:
    for module in _MODULES:
        importlib.import_module(f"{__name__}.{module}")


def get_source(name: str) -> Source:
    """The adapter registered as ``name``; an unknown name is a user error listing the known ones."""
    _load_sources()
    if name not in SOURCES:
        raise GnnperfError(
            f"unknown source '{name}'{suggest(name, SOURCES)}; known: {', '.join(sorted(SOURCES))}"
        )
    return SOURCES[name]


def list_sources() -> list[str]:
    _load_sources()
    return sorted(SOURCES)


def read_source(
    name: str, path: str | os.PathLike, limit: int | None = None
) -> tuple[list[dict[str, Any]], ImportReport]:
    """Read ``path`` with the adapter ``name`` (see the module docstring)."""
    return get_source(name).read(Path(path), limit=limit)


__all__ = [
    "SOURCES",
    "ImportReport",
    "Source",
    "get_source",
    "list_sources",
    "read_source",
    "register_source",
]
