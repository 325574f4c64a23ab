"""Predictor checkpoints: written after training, read without Lightning (version checks, the model rebuilt).

Training goes through :class:`~gnnperf.predictor.module.PerfModule`; prediction needs only the network, so
:func:`load_model` reads the checkpoint with ``torch.load`` and skips importing Lightning, which would cost
``gnnperf predict`` seconds of start-up.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from gnnperf.errors import GnnperfError
from gnnperf.imports import import_pyg
from gnnperf.predictor.model import PerfGNN, Stats

if TYPE_CHECKING:
    from gnnperf.predictor.fallback import UnseenOpFallback
    from gnnperf.predictor.module import PerfModule


def code_versions() -> dict[str, Any]:
    """What the running code produces: versions, feature name lists and op vocabulary."""
    from gnnperf.data.aggregate import AGG_FEATURES
    from gnnperf.graph.features import EDGE_FEATURES, FEATURE_VERSION, GRAPH_FEATURES, NODE_FEATURES, OP_VOCAB
    from gnnperf.hardware import HARDWARE_FEATURES, HARDWARE_TABLE_VERSION

    return {
        "feature_version": FEATURE_VERSION,
        "hardware_table_version": HARDWARE_TABLE_VERSION,
        "node_features": [n for n, _ in NODE_FEATURES],
        "edge_features": [n for n, _ in EDGE_FEATURES],
        "graph_features": [n for n, _ in GRAPH_FEATURES],
        "hw_features": list(HARDWARE_FEATURES),
        "agg_features": list(AGG_FEATURES),
        "op_vocab": list(OP_VOCAB),
    }


def check_compatible(hparams: Mapping[str, Any], extras: Mapping[str, Any] | None = None) -> None:
    """Raise GnnperfError listing every version or feature list in ``hparams`` that differs from the code.

    Another hardware table is compatible when every device the checkpoint trained on that is in the table has the
    hardware features it was trained with (``extras``: the checkpoint's ``gnnperf`` entry, whose training record
    holds those specs): a corrected or added spec of a device it never saw changes only that device's predictions.
    """
    diffs = []
    for key, code in code_versions().items():
        saved = hparams.get(key)
        if key.endswith("_version"):
            if saved == code:
                continue
            changed = _changed_trained_devices(extras) if key == "hardware_table_version" else None
            if changed == []:
                continue
            note = f" (hardware features changed for {', '.join(changed)})" if changed else ""
            diffs.append(f"checkpoint {key.upper()} {saved} != code {code}{note}")
        elif list(saved or []) != code:
            extra = sorted(set(saved or []) - set(code))[:3]
            lacking = sorted(set(code) - set(saved or []))[:3]
            detail = (
                f"{len(saved or [])} vs {len(code)} names; only in checkpoint {extra}, only in code {lacking}"
            )
            diffs.append(f"checkpoint {key} differ from code ({detail})")
    from gnnperf.graph.cost import ABLATE_VAR, ablated

    # a predictor checkpoint's node features were costed with the rules it records; Lightning's own checkpoints of
    # a run (no gnnperf entry: extras None) are read back by the process that wrote them
    saved_off, code_off = sorted((extras or {}).get("cost_ablations") or []), sorted(ablated())
    if extras is not None and saved_off != code_off:
        diffs.append(f"checkpoint cost rules switched off {saved_off} != {ABLATE_VAR} {code_off}")
    if diffs:
        raise GnnperfError("incompatible checkpoint: " + "; ".join(diffs))


def _changed_trained_devices(extras: Mapping[str, Any] | None) -> list[str] | None:
    """Trained devices whose hardware features differ in the packaged table; None without a training record."""
    import numpy as np

    from gnnperf.hardware.table import load_table, spec_from_dict
    from gnnperf.hardware.vector import hardware_vector

    records = ((extras or {}).get("trained_on") or {}).get("hardware_specs")
    if not records:
        return None
    table = load_table()
    return [
        name
        for name, record in sorted(records.items())
        if name in table
        and not np.array_equal(
            hardware_vector(spec_from_dict(record)), hardware_vector(table[name]), equal_nan=True
        )
    ]


def build_model(hparams: Mapping[str, Any], stats: Stats | None = None) -> PerfGNN:
    """The :class:`PerfGNN` that ``PerfModule`` hyper-parameters describe."""
    h = hparams
    return PerfGNN(
        node_dim=len(h["node_features"]),
        edge_dim=len(h["edge_features"]),
        graph_dim=len(h["graph_features"]),
        hw_dim=len(h["hw_features"]),
        agg_dim=len(h["agg_features"]),
        hidden=h["hidden"],
        layers=h["layers"],
        backbone=h["backbone"],
        readout=h["readout"],
        dropout=h["dropout"],
        num_devices=len(h["devices"]) if h["device_embedding"] else 0,
        use_agg=h["use_agg"],
        op_embedding_dim=h["op_embedding_dim"],
        num_ops=len(h["op_vocab"]),
        heads=h["heads"],
        bidirectional=h["bidirectional"],
        device_dropout=h["device_dropout"],
        op_dropout=h.get("op_dropout", 0.0),  # checkpoints before it trained without
        hardware_conditioning=h.get("hardware_conditioning", True),  # likewise
        node_workload=h.get("node_workload", False),  # likewise
        stats=stats,
    )


def save_predictor(module: PerfModule, path: str | Path, **extra: Any) -> Path:
    """Write a predictor checkpoint: the module's Lightning checkpoint dict plus ``extra`` under ``gnnperf``."""
    import pytorch_lightning as pl  # only here: reading a checkpoint must not import it

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    ckpt = {
        "state_dict": module.state_dict(),
        "hyper_parameters": dict(module.hparams),
        "pytorch-lightning_version": pl.__version__,
        "gnnperf": dict(extra),
    }
    return write_checkpoint(ckpt, path)


def write_checkpoint(ckpt: dict[str, Any], path: str | Path) -> Path:
    """Write a checkpoint dict atomically (a reader never sees half a file)."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    torch.save(ckpt, tmp)
    os.replace(tmp, path)
    return path


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """The raw dict of a predictor checkpoint; GnnperfError (one line) for a missing, unreadable or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise GnnperfError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a file that is not one of its archives
        # Their messages run to several lines (the weights-only one advises weights_only=False, which is wrong
        # here); the first sentence names the problem.
        reason = str(e).strip().splitlines()[0].split(". ")[0] if str(e).strip() else ""
        raise GnnperfError(
            f"cannot read checkpoint {path}: not a PyTorch checkpoint or truncated ({type(e).__name__}: {reason})"
        ) from None
    if not isinstance(ckpt, dict) or not {"hyper_parameters", "state_dict"} <= ckpt.keys():
        raise GnnperfError(
            f"{path} is not a gnnperf predictor checkpoint (no hyper_parameters and state_dict; "
            "gnnperf-train writes one as predictor.ckpt)"
        )
    return ckpt


def not_a_predictor(path: str | Path) -> GnnperfError:
    """The error for a checkpoint without the ``gnnperf`` entry: Lightning's own (``checkpoints/best.ckpt``)."""
    return GnnperfError(
        f"{path} is a Lightning checkpoint of a training run, not a predictor (no interval, training record or "
        "fallback); use the run's predictor.ckpt (gnnperf-train writes it in the run's folder)"
    )


def load_model(path: str | Path) -> tuple[PerfGNN, dict[str, Any], dict[str, Any]]:
    """(network in eval mode, hyper-parameters, the ``gnnperf`` extras) of a predictor checkpoint."""
    ckpt = read_checkpoint(path)
    if "gnnperf" not in ckpt:
        raise not_a_predictor(path)
    hparams = dict(ckpt["hyper_parameters"])
    state = {k[len("model.") :]: v for k, v in ckpt["state_dict"].items() if k.startswith("model.")}
    check_compatible(hparams, ckpt.get("gnnperf"))
    import_pyg()  # the network's first torch_geometric import on the predict path: without transformers
    model = build_model(hparams)
    model.load_state_dict(state)
    return model.eval(), hparams, dict(ckpt.get("gnnperf", {}))


def load_fallback(info: Mapping[str, Any]) -> UnseenOpFallback | None:
    """The checkpoint's :class:`~gnnperf.predictor.fallback.UnseenOpFallback`, or None (trained without one)."""
    from gnnperf.predictor.fallback import UnseenOpFallback

    state = info.get("unseen_op_fallback")
    return UnseenOpFallback.from_state(state) if state else None
