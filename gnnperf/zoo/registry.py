"""Registry of parametric model families (``zoo:FAMILY?key=value`` references).

A family builds a randomly initialised ``nn.Module`` from keyword hyper-parameters and samples those
hyper-parameters for dataset generation. Families register themselves with :func:`register_family` when
:mod:`gnnperf.zoo.families` is imported; a duplicate name raises.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from torch import nn

from gnnperf.errors import GnnperfError, suggest

INPUT_KINDS = ("image", "tokens", "sequence", "vector")


@dataclass(frozen=True)
class Family:
    """One parametric architecture family.

    Attributes:
        name: registry key, used in ``zoo:NAME?...``.
        build: ``build(**params) -> nn.Module`` with random weights.
        sample: ``sample(rng) -> params`` draws one configuration (a subset of ``defaults``' keys).
        defaults: every hyper-parameter with its default; types here coerce query-string values.
        input_kind: ``image`` (float B,C,H,W), ``tokens`` (int64 B,L), ``sequence`` (float B,T,F) or
            ``vector`` (float B,F).
        input_shape: ``input_shape(params) -> per-sample shape`` used when the workload gives none.
        vocab_size: ``vocab_size(params) -> int`` for ``tokens`` families (token ids are drawn below it).
        description: one line for listings.
        macs: ``macs(params) -> float`` approximate forward multiply-accumulates per sample (convolutions and
            matrix products); samplers use it to keep draws CPU-affordable, listings show it.
    """

    name: str
    build: Callable[..., nn.Module]
    sample: Callable[[np.random.Generator], dict[str, Any]]
    defaults: dict[str, Any]
    input_kind: str
    input_shape: Callable[[dict[str, Any]], tuple[int, ...]]
    vocab_size: Callable[[dict[str, Any]], int] | None = None
    description: str = ""
    macs: Callable[[dict[str, Any]], float] | None = None
    tags: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.input_kind not in INPUT_KINDS:
            raise ValueError(f"family {self.name}: input_kind must be one of {INPUT_KINDS}")
        if self.input_kind == "tokens" and self.vocab_size is None:
            raise ValueError(f"family {self.name}: a tokens family needs vocab_size")

    def params(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Defaults updated with ``overrides``; unknown keys are a user error."""
        overrides = overrides or {}
        unknown = set(overrides) - set(self.defaults)
        if unknown:
            key = sorted(unknown)[0]
            raise GnnperfError(
                f"zoo family '{self.name}' has no parameter '{key}'{suggest(key, self.defaults)}; "
                f"parameters: {', '.join(sorted(self.defaults))}"
            )
        return {**self.defaults, **overrides}


FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Add ``family`` to the registry; a second family of the same name is a bug and raises."""
    if family.name in FAMILIES:
        raise ValueError(f"zoo family '{family.name}' is registered twice")
    FAMILIES[family.name] = family
    return family


def _load_families() -> None:
    import gnnperf.zoo.families  # noqa: F401  (registers on import)


def get_family(name: str) -> Family:
    _load_families()
    if name not in FAMILIES:
        raise GnnperfError(
            f"unknown zoo family '{name}'{suggest(name, FAMILIES)}; known: {', '.join(sorted(FAMILIES))}"
        )
    return FAMILIES[name]


def list_families() -> list[str]:
    _load_families()
    return sorted(FAMILIES)


def format_query(params: dict[str, Any]) -> str:
    """Canonical query string of ``params``: keys sorted, lists comma-joined (``depths=2,2&width=64``)."""
    return "&".join(
        f"{k}={','.join(map(str, v)) if isinstance(v, (list, tuple)) else v}"
        for k, v in sorted(params.items())
    )


def coerce(value: str, like: Any) -> Any:
    """Parse a query-string value to the type of the default ``like``."""
    if isinstance(like, bool):
        if value.lower() in ("1", "true", "yes"):
            return True
        if value.lower() in ("0", "false", "no"):
            return False
        raise GnnperfError(f"expected a boolean, got '{value}'")
    if isinstance(like, (list, tuple)):
        return [coerce(v, like[0] if like else 0) for v in value.split(",") if v]
    try:
        if isinstance(like, int):
            return int(value)
        if isinstance(like, float):
            return float(value)
    except ValueError:
        kind = "an integer" if isinstance(like, int) else "a number"
        raise GnnperfError(f"expected {kind}, got '{value}'") from None
    return value
