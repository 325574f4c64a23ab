"""Aggregate-feature GBM baseline (ORION/PreNeT style): gradient-boosted trees on ``agg`` + ``hw``.

Target: log milliseconds. scikit-learn's ``HistGradientBoostingRegressor`` with a fixed seed and early stopping
off, so a fit is reproducible (early stopping would hold out a random validation slice). The device enters only
through its spec vector ``hw``, so an unseen device is predicted from its data sheet; trees cannot extrapolate
past the devices seen, which is part of what this baseline shows. One OpenMP thread by default
(``num_threads``): with ~10^3 samples threads gain little, and on a shared 2-core machine they spin-wait
(3x slower here).
"""

from __future__ import annotations

import pickle
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np

from gnnperf.baselines.registry import Baseline, BaselineData, check_training_data, register_baseline
from gnnperf.errors import GnnperfError


def _threads(n: int | None) -> AbstractContextManager:
    """Limit OpenMP to ``n`` threads (None: no limit)."""
    if n is None:
        return nullcontext()
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    return threadpool_limits(limits=n, user_api="openmp")


def _features(data: BaselineData) -> np.ndarray:
    return np.concatenate([data.agg, data.hw], axis=1).astype(np.float64)


@register_baseline("gbm")
class GBMBaseline(Baseline):
    """Histogram gradient boosting on aggregate + hardware features, predicting log ms."""

    def __init__(
        self,
        max_iter: int = 300,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 10,
        l2_regularization: float = 0.0,
        seed: int = 0,
        num_threads: int | None = 1,
    ) -> None:
        self.params = {
            "max_iter": max_iter,
            "learning_rate": learning_rate,
            "max_leaf_nodes": max_leaf_nodes,
            "min_samples_leaf": min_samples_leaf,
            "l2_regularization": l2_regularization,
            "seed": seed,
        }
        self.num_threads = num_threads
        self.model: Any = None
        self.n_features: int | None = None

    def fit(self, train: BaselineData) -> GBMBaseline:
        from sklearn.ensemble import HistGradientBoostingRegressor  # lazy: optional heavy import

        t = check_training_data(train, self.name)
        params = dict(self.params)
        seed = params.pop("seed")
        x = _features(train)
        self.model = HistGradientBoostingRegressor(
            loss="squared_error", early_stopping=False, random_state=seed, **params
        )
        with _threads(self.num_threads):
            self.model.fit(x, np.log(t))
        self.n_features = x.shape[1]
        return self

    def predict(self, data: BaselineData) -> np.ndarray:
        self._require_fitted(self.model is not None)
        x = _features(data)
        if x.shape[1] != self.n_features:
            raise GnnperfError(
                f"baseline 'gbm': fitted on {self.n_features} features, data has {x.shape[1]} "
                "(aggregate or hardware features changed)"
            )
        with _threads(self.num_threads):
            return np.exp(self.model.predict(x))

    def state_dict(self) -> dict[str, Any]:
        import sklearn

        return {
            "params": dict(self.params),
            "num_threads": self.num_threads,
            "n_features": self.n_features,
            "sklearn_version": sklearn.__version__,
            "model": pickle.dumps(self.model),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> GBMBaseline:
        import sklearn

        if state["sklearn_version"] != sklearn.__version__:
            raise GnnperfError(
                f"baseline 'gbm' was saved with scikit-learn {state['sklearn_version']}, "
                f"this is {sklearn.__version__}: refit it"
            )
        model = cls(**state["params"], num_threads=state["num_threads"])
        model.model = pickle.loads(state["model"])
        model.n_features = state["n_features"]
        return model
