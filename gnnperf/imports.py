"""Heavy libraries imported without the optional ones they pull in for features gnnperf does not use.

timm imports wandb (for its training script's logging) and torch_geometric imports transformers (for its LLM
modules) whenever those are installed, as they are here: 0.6 s and 0.5 s of `gnnperf predict`'s start-up on this
2-core machine, 0.9 s of its 5.7 s of imports (``experiments/predict_cold``, 2026-12-03). While timm or torch_geometric loads, ``import wandb`` or ``import
transformers`` fails as if the package were missing, which both catch; an import afterwards (the wandb logger, an
``hf:`` model) loads it as usual.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType


@contextmanager
def _absent(*names: str) -> Iterator[None]:
    """While the block runs, importing one of ``names`` not yet imported raises ImportError."""
    hidden = [n for n in names if n not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # what `import` reads as "not installed"
    try:
        yield
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def import_timm() -> ModuleType:
    """``import timm`` without its wandb import."""
    with _absent("wandb"):
        import timm
    return timm


def import_pyg() -> ModuleType:
    """``import torch_geometric`` without its transformers import."""
    with _absent("transformers"):
        import torch_geometric
    return torch_geometric
