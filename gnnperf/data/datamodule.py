"""Lightning DataModule: the dataset, one split of it and the train-only normalisation statistics."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytorch_lightning as pl
from omegaconf import OmegaConf
from torch_geometric.loader import DataLoader

from gnnperf.data.dataset import PerfDataset
from gnnperf.data.split_files import load_split, save_split
from gnnperf.data.splits import PARTS, make_split
from gnnperf.data.stats import feature_stats
from gnnperf.data.store import selection
from gnnperf.errors import number


class PerfDataModule(pl.LightningDataModule):
    """Batches of :class:`PerfDataset` samples for one split (see :mod:`gnnperf.data.splits`).

    Args:
        stores: sample store directories.
        root: directory of the processed dataset files.
        split: split name (``random``, ``holdout_model``, ``holdout_family``, ``holdout_hardware``).
        seed, fold, num_folds: passed to the split.
        batch_size: samples per batch.
        num_workers: DataLoader worker processes (each keeps its own Data cache).
        split_file: JSON of sample ids per part: loaded when it exists, else written after splitting, so
            a split can be committed and reproduced; one saved for another split (name, seed, fold, options)
            is refused rather than tested under this run's name.
        split_kwargs: extra split options (``val_frac``, ``test_frac``).
        graph_cache, query, build_graphs, max_median_over_p10, pool_software: see :class:`PerfDataset`.
        exclude: named ``DataFrame.query`` expressions of rows never to use, whatever ``query`` selects
            (:func:`~gnnperf.data.store.selection`); the data configs name the runs that another run of the same
            workload already measured.

    After :meth:`setup`: ``dataset``, ``split`` (row positions per part) and ``stats`` (train-only
    ``feature_stats``) are set.
    """

    def __init__(
        self,
        stores: Sequence[str | Path] | str | Path,
        root: str | Path,
        split: str = "random",
        seed: int = 0,
        fold: int = 0,
        num_folds: int = 5,
        batch_size: int = 32,
        num_workers: int = 0,
        split_file: str | Path | None = None,
        split_kwargs: dict[str, Any] | None = None,
        graph_cache: str | Path | None = None,
        query: str | None = None,
        exclude: Mapping[str, str | None] | None = None,
        build_graphs: bool = True,
        max_median_over_p10: float | None = None,
        pool_software: bool = False,
    ) -> None:
        super().__init__()
        self.stores = [str(s) for s in ([stores] if isinstance(stores, (str, Path)) else stores)]
        self.root = str(root)
        self.split_name = split
        self.seed, self.fold = number(seed, "seed"), number(fold, "fold")
        self.num_folds = number(num_folds, "num_folds")
        self.batch_size = number(batch_size, "data.batch_size", minimum=1)
        self.num_workers = number(num_workers, "num_workers")
        self.split_file = Path(split_file) if split_file else None
        if OmegaConf.is_config(split_kwargs):  # plain values: they go into the split file's JSON
            split_kwargs = OmegaConf.to_container(split_kwargs, resolve=True)
        self.split_kwargs = dict(split_kwargs or {})
        self.graph_cache = graph_cache
        if OmegaConf.is_config(exclude):
            exclude = OmegaConf.to_container(exclude, resolve=True)
        self.query = selection(query, exclude)
        self.build_graphs = build_graphs
        self.max_median_over_p10 = max_median_over_p10
        self.pool_software = pool_software
        self.dataset: PerfDataset | None = None
        self._prepared: PerfDataset | None = None  # loaded by prepare_data, taken over by setup
        self.split: dict[str, np.ndarray] | None = None
        self.stats: dict | None = None

    def prepare_data(self) -> None:
        # Process once (graphs exported, files written) before any worker loads the processed files. Lightning
        # calls this in fit() after our own setup(): the dataset is loaded by then, do not load it twice.
        if self.dataset is None:
            self._prepared = self._dataset()

    def _dataset(self) -> PerfDataset:
        return PerfDataset(
            self.root,
            self.stores,
            graph_cache=self.graph_cache,
            query=self.query,
            build_graphs=self.build_graphs,
            max_median_over_p10=self.max_median_over_p10,
            pool_software=self.pool_software,
        )

    def setup(self, stage: str | None = None) -> None:
        if self.dataset is not None:
            return
        dataset, self._prepared = self._prepared or self._dataset(), None
        samples = dataset.samples
        meta = {"split": self.split_name, "seed": self.seed, "fold": self.fold, "num_folds": self.num_folds}
        meta.update(self.split_kwargs)
        if self.split_file is not None and self.split_file.exists():
            split = load_split(self.split_file, samples, expect_meta=meta)
        else:
            split = make_split(
                self.split_name, samples, self.seed, self.fold, self.num_folds, **self.split_kwargs
            )
            if self.split_file is not None:
                save_split(split, self.split_file, samples, meta=meta)
        self.stats = feature_stats(dataset, split["train"])
        self.dataset, self.split = dataset, split

    def part(self, name: str) -> PerfDataset:
        """The dataset restricted to one part (``train``, ``val`` or ``test``)."""
        if self.dataset is None or self.split is None:
            raise RuntimeError("call setup() first")
        if name not in PARTS:
            raise ValueError(f"unknown part {name!r}")
        return self.dataset[self.split[name]]

    def _loader(self, name: str, shuffle: bool) -> DataLoader:
        return DataLoader(
            self.part(name),
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val", shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        return self._loader("test", shuffle=False)
