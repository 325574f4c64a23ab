"""Hardware: the one spec table, the probe of the local device, and the hardware feature vector.

The vector (numpy) loads on first use, so importing this package is cheap. The probe lives in
``gnnperf.hardware.probe`` (``from gnnperf.hardware.probe import probe``); it is not re-exported here because
the function would shadow its own module's name.
"""

from __future__ import annotations

from typing import Any

from gnnperf.hardware.table import (
    HARDWARE_TABLE_VERSION,
    HardwareSpec,
    canonical_name,
    get_spec,
    load_table,
    spec_from_dict,
    spec_to_dict,
)

_LAZY = {"hardware_vector": "gnnperf.hardware.vector", "HARDWARE_FEATURES": "gnnperf.hardware.vector"}

__all__ = [
    "HARDWARE_FEATURES",
    "HARDWARE_TABLE_VERSION",
    "HardwareSpec",
    "canonical_name",
    "get_spec",
    "hardware_vector",
    "load_table",
    "spec_from_dict",
    "spec_to_dict",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
