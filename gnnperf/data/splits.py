"""Train/val/test splits of the sample table: one registry, index arrays out (saved: :mod:`~gnnperf.data.split_files`).

Each split function is ``fn(samples, seed, fold, num_folds, **kw) -> {"train", "val", "test"}`` of row
positions in ``samples``; :func:`make_split` checks that the parts are non-empty, disjoint and cover every
row. Splits depend only on the table's content and the seed (groups are sorted before shuffling).

``holdout_model`` orders the models by a hash of the seed and each model's name (``order="hash"``) rather than by a
seeded permutation (``order="permutation"``, the order before 2026-12-04): a permutation of one more model is
another draw, so a network that joined the data moved models between every part (the shipped predictor v19, one
network more than v18, tested 978 rows of which v18 had trained on 662). In hash order a model that joins takes one
place, and each chunk boundary moves by at most one model: the test part of the next data version is this one's, give
or take the newcomers and a model at each boundary.

| name | test part | val part |
|---|---|---|
| ``random`` | rows: chunk ``fold`` of a seeded permutation, ``test_frac`` of the rows (default ``1/num_folds``) | ``val_frac`` of the rows, from the rest |
| ``holdout_model`` | models: chunk ``fold`` of the models in hash order, ``test_frac`` of them | ``val_frac`` of the models, from the rest |
| ``holdout_family`` | families ``fold::num_folds`` of the sorted family list (of the ``family_query`` rows) | ``val_frac`` of the remaining models (``val_by="family"``: of the remaining families) |
| ``holdout_hardware`` | device ``fold`` of the sorted device list | ``val_frac`` of the models, on the other devices |
| ``holdout_column`` | rows whose ``column`` is one of ``values`` (``source``: train on CNN tables, test on transformers) | ``val_frac`` of the other models |

A "model" here is a group of references (:func:`gnnperf.data.groups.model_groups`): those whose graphs are the
same network (the ``graph_digest`` of the processed samples) form one, so that a deprecated timm alias
(``ssl_resnet50``), a DeiT that is a ViT, or torchvision's ResNet-50 beside timm's never sits in train while its
twin is tested. Without a ``graph_digest`` column each ``model_ref`` is its own group. ``holdout_family`` leaves out of every part the rows
of other families that are the same network as a tested one (``left_out``).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from gnnperf.data.groups import model_groups
from gnnperf.data.store import select_samples
from gnnperf.errors import GnnperfError, suggest

log = logging.getLogger(__name__)
PARTS = ("train", "val", "test")
SplitFn = Callable[..., dict[str, np.ndarray]]
SPLITS: dict[str, SplitFn] = {}


def register_split(name: str) -> Callable[[SplitFn], SplitFn]:
    """Decorator adding a split function under ``name``; a duplicate name raises ``ValueError``."""

    def add(fn: SplitFn) -> SplitFn:
        if name in SPLITS:
            raise ValueError(f"split '{name}' is already registered")
        SPLITS[name] = fn
        return fn

    return add


def _chunk(n: int, frac: float | None, fold: int, num_folds: int) -> slice:
    """The test positions of ``fold`` among ``n`` items.

    Without ``frac``, k-fold: the ``num_folds`` chunks partition all ``n`` items, sizes differing by at most one.
    With ``frac``: positions ``fold * k .. (fold + 1) * k``, ``k = round(frac * n)`` (at least 1).
    """
    if frac is None:
        start, end = ((2 * i * n + num_folds) // (2 * num_folds) for i in (fold, fold + 1))  # round(i*n/k)
        if fold >= num_folds or end <= start:
            raise GnnperfError(f"fold {fold} of {num_folds} is empty: only {n} items to split")
        return slice(start, end)
    if not 0 < frac < 1:
        raise GnnperfError(f"bad test_frac {frac}: expected a fraction in (0, 1)")
    k = max(1, round(frac * n))
    if (fold + 1) * k > n:
        raise GnnperfError(f"fold {fold} needs {(fold + 1) * k} items at {k} per fold; only {n} to split")
    return slice(fold * k, (fold + 1) * k)


def _val_size(n: int, val_frac: float) -> int:
    """How many of ``n`` items validate: ``val_frac`` of them, at least 1 when ``val_frac > 0``."""
    if not 0 <= val_frac < 1:
        raise GnnperfError(f"bad val_frac {val_frac}: expected a fraction in [0, 1)")
    return max(1, round(val_frac * n)) if val_frac > 0 else 0


def _take_val(items: np.ndarray, val_frac: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(val, rest): :func:`_val_size` of ``items`` drawn with ``rng``."""
    items = rng.permutation(items)
    k = _val_size(len(items), val_frac)
    return items[:k], items[k:]


def _hash_order(items: np.ndarray, seed: int, salt: str = "test") -> np.ndarray:
    """``items`` sorted by the SHA-256 of ``seed``, ``salt`` and the item: a seeded order in which an item's rank
    among the others does not depend on which other items there are (see the module docstring)."""
    keys = [hashlib.sha256(f"{seed}/{salt}/{item}".encode()).digest() for item in items]
    return np.asarray(items)[sorted(range(len(keys)), key=keys.__getitem__)]


def _rows(samples: pd.DataFrame, column: str, values: np.ndarray) -> np.ndarray:
    return np.flatnonzero(samples[column].isin(list(values)).to_numpy())


def _group_split(
    groups: np.ndarray, rows: np.ndarray, val_frac: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """(train, val) of ``rows``, grouped by ``groups`` (per row, as :func:`model_groups` gives them)."""
    val_groups, _ = _take_val(np.unique(groups[rows]), val_frac, rng)
    mask = np.isin(groups[rows], val_groups)
    return rows[~mask], rows[mask]


@register_split("random")
def random_split(
    samples: pd.DataFrame,
    seed: int,
    fold: int,
    num_folds: int,
    val_frac: float = 0.1,
    test_frac: float | None = None,
) -> dict[str, np.ndarray]:
    """Rows at random: the same model may sit in train and test (at another batch size or device)."""
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(samples))
    test_slice = _chunk(len(samples), test_frac, fold, num_folds)
    test = perm[test_slice]
    rest = np.concatenate([perm[: test_slice.start], perm[test_slice.stop :]])
    val, train = _take_val(rest, val_frac, rng)
    return {"train": train, "val": val, "test": test}


@register_split("holdout_model")
def holdout_model(
    samples: pd.DataFrame,
    seed: int,
    fold: int,
    num_folds: int,
    val_frac: float = 0.1,
    test_frac: float | None = None,
    order: str = "hash",
) -> dict[str, np.ndarray]:
    """Unseen models: every batch size and device of a model (:func:`model_groups`) is in one part.

    ``order``: ``"hash"`` (models keep their places when others join the data) or ``"permutation"`` (a seeded
    shuffle, as the shipped predictor v19 and earlier were split).
    """
    groups = model_groups(samples)
    if order == "hash":
        rng, models = None, _hash_order(np.unique(groups), seed)
    elif order == "permutation":
        rng = np.random.default_rng(seed)
        models = rng.permutation(np.unique(groups))
    else:
        raise GnnperfError(f"holdout_model: bad order {order!r}; expected 'hash' or 'permutation'")
    test_slice = _chunk(len(models), test_frac, fold, num_folds)
    rest_models = np.concatenate([models[: test_slice.start], models[test_slice.stop :]])
    if rng is None:  # the first of the rest in a hash order of its own salt: stable when models join
        val_models = _hash_order(rest_models, seed, salt="val")[: _val_size(len(rest_models), val_frac)]
    else:
        val_models, _ = _take_val(rest_models, val_frac, rng)
    test = np.flatnonzero(np.isin(groups, models[test_slice]))
    val = np.flatnonzero(np.isin(groups, val_models))
    train = np.setdiff1d(np.arange(len(samples)), np.concatenate([test, val]))
    return {"train": train, "val": val, "test": test}


@register_split("holdout_family")
def holdout_family(
    samples: pd.DataFrame,
    seed: int,
    fold: int,
    num_folds: int,
    val_frac: float = 0.1,
    family_query: str | None = None,
    val_by: str = "model",
) -> dict[str, np.ndarray]:
    """Leave-family-out: fold ``f`` tests families ``f::num_folds`` of the sorted family list.

    ``family_query`` takes the family list from the rows it selects only (e.g. one benchmark table, so its folds
    stay the same when other tables join the training data); a held-out family's rows of every table are tested.
    ``val_by="family"`` validates on ``val_frac`` of the remaining families (their rows of every table) instead of
    ``val_frac`` of the remaining models, so that early stopping and the best checkpoint are chosen on families
    the model has not seen, the question the test part asks.
    """
    listed = select_samples(samples, family_query) if family_query else samples
    families = np.unique(listed["family"].to_numpy())
    test_families = families[fold::num_folds]
    if len(test_families) == len(families):
        raise GnnperfError(
            f"holdout_family needs families left to train on; fold {fold} of {num_folds} tests all "
            f"{len(families)} ({', '.join(families)})"
        )
    test = _rows(samples, "family", test_families)
    groups = model_groups(samples)
    twins = np.setdiff1d(np.flatnonzero(np.isin(groups, groups[test])), test)  # another family's same network
    rest = np.setdiff1d(np.arange(len(samples)), np.concatenate([test, twins]))
    if val_by == "model":
        train, val = _group_split(groups, rest, val_frac, np.random.default_rng(seed))
    elif val_by == "family":
        val_families, _ = _take_val(
            np.setdiff1d(families, test_families), val_frac, np.random.default_rng(seed)
        )
        val = np.intersect1d(_rows(samples, "family", val_families), rest)
        train = np.setdiff1d(rest, val)
    else:
        raise GnnperfError(f"holdout_family: bad val_by {val_by!r}; expected 'model' or 'family'")
    return {"train": train, "val": val, "test": test, "left_out": twins}


@register_split("holdout_column")
def holdout_column(
    samples: pd.DataFrame,
    seed: int,
    fold: int,
    num_folds: int,
    column: str = "source",
    values: list[str] | None = None,
    val_frac: float = 0.1,
) -> dict[str, np.ndarray]:
    """Rows whose ``column`` is in ``values`` are the test part (``fold``/``num_folds`` unused)."""
    if column not in samples.columns:
        raise GnnperfError(f"holdout_column: no column {column!r}{suggest(column, list(samples.columns))}")
    # compared as text: a Hydra list gives numbers (values: [4]) for a number column (num_devices), or text
    as_text = samples[column].astype(str)
    present, wanted = set(as_text), [str(v) for v in values or []]
    missing = [v for v in wanted if v not in present]
    if not values or missing:
        raise GnnperfError(
            f"holdout_column: values {missing or values} not in column {column!r} (it has {sorted(present)[:10]})"
        )
    test = np.flatnonzero(as_text.isin(wanted).to_numpy())
    rest = np.setdiff1d(np.arange(len(samples)), test)
    train, val = _group_split(model_groups(samples), rest, val_frac, np.random.default_rng(seed))
    return {"train": train, "val": val, "test": test}


@register_split("holdout_group")
def holdout_group(
    samples: pd.DataFrame,
    seed: int,
    fold: int,
    num_folds: int,
    columns: list[str] | None = None,
    val_frac: float = 0.1,
) -> dict[str, np.ndarray]:
    """Fold ``f`` tests the ``f``-th of the sorted distinct value combinations of ``columns`` (``num_folds`` unused).

    ``columns: [hardware, precision]`` tests one precision on one device, which trains on its other precisions and
    the other devices' rows of this one; :func:`holdout_hardware` is ``[hardware]``.
    """
    columns = list(columns or ["hardware"])
    missing = [c for c in columns if c not in samples.columns]
    if missing:
        raise GnnperfError(
            f"holdout_group: no column {missing[0]!r}{suggest(missing[0], list(samples.columns))}"
        )
    keys = pd.Series(list(map(tuple, samples[columns].astype(str).to_numpy())), index=samples.index)
    groups = sorted(set(keys))
    if fold >= len(groups):
        listed = ", ".join("/".join(g) for g in groups[:12])
        raise GnnperfError(f"holdout_group fold {fold}: only {len(groups)} group(s) of {columns} ({listed})")
    test = np.flatnonzero((keys == groups[fold]).to_numpy())
    rest = np.setdiff1d(np.arange(len(samples)), test)
    train, val = _group_split(model_groups(samples), rest, val_frac, np.random.default_rng(seed))
    return {"train": train, "val": val, "test": test}


@register_split("holdout_hardware")
def holdout_hardware(
    samples: pd.DataFrame, seed: int, fold: int, num_folds: int, val_frac: float = 0.1
) -> dict[str, np.ndarray]:
    """Leave-one-device-out: fold ``f`` tests device ``f`` of the sorted device list (``num_folds`` unused)."""
    devices = np.unique(samples["hardware"].to_numpy())
    if fold >= len(devices):
        raise GnnperfError(
            f"holdout_hardware fold {fold}: only {len(devices)} device(s) ({', '.join(devices)})"
        )
    return holdout_group(samples, seed, fold, num_folds, columns=["hardware"], val_frac=val_frac)


# Splits whose fold picks one of num_folds chunks (random and holdout_model only without a test_frac); the others
# count their folds in the data (devices, value groups) or have one.
FOLDS_BELOW_NUM_FOLDS = frozenset({"holdout_family", "random", "holdout_model"})


def check_split_args(name: str, fold: int, num_folds: int, **kw: Any) -> None:
    """What can be checked of a split without the data: its name and its fold (before a sweep's jobs start)."""
    if name not in SPLITS:
        raise GnnperfError(
            f"unknown split '{name}'{suggest(name, SPLITS)}; known: {', '.join(sorted(SPLITS))}"
        )
    if num_folds < 1 or fold < 0:
        raise GnnperfError(f"bad fold {fold} of num_folds {num_folds}: expected fold >= 0 and num_folds >= 1")
    if name in FOLDS_BELOW_NUM_FOLDS and kw.get("test_frac") is None and fold >= num_folds:
        raise GnnperfError(f"{name} fold {fold} is not below num_folds {num_folds}")


def make_split(
    name: str,
    samples: pd.DataFrame,
    seed: int = 0,
    fold: int = 0,
    num_folds: int = 5,
    test_query: str | None = None,
    **kw: Any,
) -> dict[str, np.ndarray]:
    """The split ``name`` of ``samples``: sorted int64 row positions for ``train``, ``val`` and ``test``.

    A split may leave rows out of every part (``holdout_family``: the same network as a tested model, under
    another family's name); every other row is in exactly one part.

    Args:
        test_query: a ``DataFrame.query`` expression; only the test rows it selects are tested, and the other
            rows the split put in the test part are left out of every part (never trained on). For example a
            held-out GPU scored on one benchmark's rows while every other source trains the model, without the
            GPU's rows from those sources leaking into training.

    Raises:
        GnnperfError: unknown split name, bad fold, or a split that leaves a part empty.
    """
    check_split_args(name, fold, num_folds, **kw)
    raw = SPLITS[name](samples, seed=seed, fold=fold, num_folds=num_folds, **kw)
    split = {p: np.sort(np.asarray(raw[p], dtype=np.int64)) for p in PARTS}
    what = f"split {name} (seed {seed}, fold {fold})"
    left_out = len(raw.get("left_out", ()))
    if left_out:
        log.info(
            "%s: %d rows of other families' models that are a tested network are in no part", what, left_out
        )
    if test_query:
        selected = select_samples(samples.reset_index(drop=True), test_query).index.to_numpy()
        tested = np.intersect1d(split["test"], selected)
        log.info(
            "%s: test_query %r keeps %d of %d test rows; the other %d are in no part",
            what,
            test_query,
            len(tested),
            len(split["test"]),
            len(split["test"]) - len(tested),
        )
        split["test"] = tested
    check_split(split, len(samples) - left_out, what=what, cover=not test_query)
    return split


def check_split(split: dict[str, np.ndarray], num_rows: int, what: str = "split", cover: bool = True) -> None:
    """Raise :class:`GnnperfError` if a part is empty, two parts share a row or (``cover``) a row is in none."""
    empty = [p for p in PARTS if len(split[p]) == 0]
    if empty:
        sizes = ", ".join(f"{p}={len(split[p])}" for p in PARTS)
        raise GnnperfError(f"{what} of {num_rows} samples leaves {'/'.join(empty)} empty ({sizes})")
    together = np.concatenate([split[p] for p in PARTS])
    if len(np.unique(together)) != len(together):
        raise GnnperfError(f"{what}: a sample is in more than one part")
    if cover and len(together) != num_rows:
        raise GnnperfError(f"{what}: {num_rows - len(together)} sample(s) are in no part")
