"""UnseenOpFallback: the weight is the unseen op types' share of roofline time, the blend is in log space."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gnnperf.baselines.registry import BaselineData
from gnnperf.predictor.fallback import UnseenOpFallback

# Two op types lead the node columns (as OP_VOCAB's one-hots lead NODE_FEATURES); B is never in training.
COLUMNS = ("op=A", "op=B", "log_flops", "log_bytes_read", "log_bytes_written")
PEAK, BANDWIDTH = 1e12, 1e11
SEEN = np.array([True, False])


def node(op: str, flops: float, read: float, written: float) -> list[float]:
    return [float(op == "A"), float(op == "B"), math.log1p(flops), math.log1p(read), math.log1p(written)]


def make(graphs: list[list[list[float]]], hardware: list[str], peak: float = PEAK, y=None) -> BaselineData:
    seqs = [np.array(g) for g in graphs]
    flops = np.array([np.expm1(s[:, 2]).sum() for s in seqs])
    n = len(seqs)
    return BaselineData(
        agg=np.zeros((n, 1)),
        hw=np.zeros((n, 1)),
        hardware=np.array(hardware, dtype=object),
        flops=flops,
        bytes=np.array([np.expm1(s[:, 3:]).sum() for s in seqs]),
        peak_flops=np.full(n, peak),
        bandwidth=np.full(n, BANDWIDTH),
        y_ms=y,
        op_seq=seqs,
        op_columns=COLUMNS,
        precision=np.full(n, "fp32", dtype=object),
        timed=np.full(n, "fwd+bwd+opt", dtype=object),
    )


@pytest.fixture(scope="module")
def fallback() -> UnseenOpFallback:
    # train: A-only graphs on dev-a, time = 3 * FLOPs / 1e9 ms exactly, so the flops baseline has a = 3e-9
    rng = np.random.default_rng(0)
    graphs = [[node("A", f, 1e6, 1e6)] for f in rng.uniform(1e9, 1e10, 12)]
    train = make(graphs, ["dev-a"] * 12)
    train.y_ms = 3 * train.flops / 1e9
    return UnseenOpFallback.fit(SEEN, train, baseline="flops")


def test_graphs_of_seen_ops_keep_the_gnn_prediction(fallback):
    data = make([[node("A", 2e9, 1e6, 1e6), node("A", 1e8, 1e9, 1e9)]], ["dev-a"])
    out, w = fallback.apply(np.array([7.0]), data)
    assert w.tolist() == [0.0] and out.tolist() == [7.0]


def test_weight_is_the_unseen_share_of_roofline_time_and_the_blend_is_geometric(fallback):
    # A: compute-bound, 4e9 FLOPs -> 4 ms; B: memory-bound, 1e8 bytes moved -> 1 ms (its 1e6 FLOPs are 0.001 ms)
    data = make([[node("A", 4e9, 1e6, 1e6), node("B", 1e6, 5e7, 5e7)]], ["dev-a"])
    w = fallback.unseen_share(data)
    assert w[0] == pytest.approx(1.0 / 5.0, rel=1e-6)
    gnn = np.array([30.0])
    base = fallback.baseline.predict(data)
    assert base[0] == pytest.approx(3 * (4e9 + 1e6) / 1e9, rel=1e-6)
    out, w2 = fallback.apply(gnn, data)
    assert w2 == pytest.approx(w)
    assert out[0] == pytest.approx(30.0 ** (4 / 5) * base[0] ** (1 / 5), rel=1e-6)


def test_a_graph_of_unseen_ops_gets_the_baseline(fallback):
    data = make([[node("B", 5e9, 1e6, 1e6)]], ["dev-a"])
    out, w = fallback.apply(np.array([100.0]), data)
    assert w[0] == pytest.approx(1.0)
    assert out[0] == pytest.approx(15.0, rel=1e-6)


def test_unseen_device_without_peak_keeps_the_gnn_prediction(fallback):
    data = make([[node("B", 5e9, 1e6, 1e6)]], ["dev-z"], peak=float("nan"))
    out, w = fallback.apply(np.array([100.0]), data)
    assert out.tolist() == [100.0] and w.tolist() == [0.0]


def test_state_round_trip_keeps_plain_types(fallback):
    state = fallback.state_dict()
    assert state["seen_ops"] == [True, False]
    again = UnseenOpFallback.from_state(state)
    data = make([[node("A", 4e9, 1e6, 1e6), node("B", 1e6, 5e7, 5e7)]], ["dev-a"])
    assert again.apply(np.array([30.0]), data)[0] == pytest.approx(fallback.apply(np.array([30.0]), data)[0])


@pytest.mark.parametrize("name", ["flops", "opcost"])
def test_any_plain_baseline_can_be_the_fallback_and_round_trips(name):
    rng = np.random.default_rng(1)
    graphs = [[node("A", f, 1e6, 1e6)] for f in rng.uniform(1e9, 1e10, 12)]
    train = make(graphs, ["dev-a"] * 12)
    train.y_ms = 3 * train.flops / 1e9 + 0.5
    fb = UnseenOpFallback.fit(SEEN, train, baseline=name)
    assert fb.name == name and fb.state_dict()["name"] == name
    data = make([[node("A", 4e9, 1e6, 1e6), node("B", 2e9, 5e7, 5e7)]], ["dev-a"])
    out, w = fb.apply(np.array([30.0]), data)
    assert 0 < w[0] < 1 and out[0] != pytest.approx(30.0)
    again = UnseenOpFallback.from_state(fb.state_dict())
    assert again.apply(np.array([30.0]), data)[0] == pytest.approx(out[0])


def test_unknown_or_unsavable_fallback_is_a_user_error():
    from gnnperf.errors import GnnperfError

    train = make([[node("A", 1e9, 1e6, 1e6)]] * 4, ["dev-a"] * 4)
    train.y_ms = np.full(4, 3.0)
    for name in ("flop", "gbm"):  # a typo; a baseline whose state a checkpoint cannot load with weights_only
        with pytest.raises(GnnperfError, match=f"'{name}' cannot be the fallback"):
            UnseenOpFallback.fit(SEEN, train, baseline=name)
    with pytest.raises(GnnperfError, match="unknown unseen-op fallback"):
        UnseenOpFallback.from_state({"name": "nosuch", "seen_ops": [True], "baseline": {}})
