"""Baselines on synthetic data where time = c_device * FLOPs (compute-bound ops), plus BaselineData itself."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from gnnperf.baselines import (
    BASELINES,
    BaselineData,
    get_baseline,
    load_baseline,
    register_baseline,
    save_baseline,
)
from gnnperf.baselines.flops import FlopsBaseline
from gnnperf.baselines.roofline import RooflineBaseline
from gnnperf.errors import GnnperfError
from gnnperf.eval.metrics import regression_metrics
from gnnperf.hardware.table import spec_from_dict

OP_COLUMNS = ("log_flops", "log_bytes_read", "log_bytes_written", "is_matmul")
# name -> (peak FLOP/s, bandwidth bytes/s); dev-c is never trained on.
DEVICES = {"dev-a": (10e12, 900e9), "dev-b": (30e12, 2000e9), "dev-c": (60e12, 3000e9)}
EFFICIENCY = 0.4  # achieved share of peak in the synthetic "measurements"


def make_data(n: int, devices: list[str], seed: int, noise: float = 0.05) -> BaselineData:
    """Samples of 4-16 compute-bound ops; time = 3 * FLOPs / (EFFICIENCY * peak) with lognormal noise."""
    rng = np.random.default_rng(seed)
    hardware = rng.choice(devices, size=n)
    seqs, flops, nbytes, y = [], [], [], []
    for dev in hardware:
        n_ops = int(rng.integers(4, 17))
        op_flops = np.exp(rng.uniform(np.log(1e7), np.log(1e10), n_ops))
        read = op_flops / 200 * rng.uniform(0.5, 1.5, n_ops)  # intensity ~100-400 FLOP/B: compute-bound
        written = read / 2
        seqs.append(
            np.stack([np.log1p(op_flops), np.log1p(read), np.log1p(written), rng.integers(0, 2, n_ops)], 1)
        )
        flops.append(op_flops.sum())
        nbytes.append((read + written).sum())
        y.append(3e3 * op_flops.sum() / (EFFICIENCY * DEVICES[dev][0]) * rng.lognormal(0, noise))
    flops, nbytes = np.array(flops), np.array(nbytes)
    peak = np.array([DEVICES[d][0] for d in hardware])
    bandwidth = np.array([DEVICES[d][1] for d in hardware])
    return BaselineData(
        agg=np.stack([np.log1p(flops), np.log1p(nbytes), np.log([len(s) for s in seqs])], 1),
        hw=np.stack([np.log(peak / 1e12), np.log(bandwidth / 1e9)], 1),
        hardware=hardware,
        flops=flops,
        bytes=nbytes,
        peak_flops=peak,
        bandwidth=bandwidth,
        y_ms=np.array(y),
        op_seq=seqs,
        op_columns=OP_COLUMNS,
        precision=np.full(n, "fp32"),
        timed=np.full(n, "fwd+bwd+opt"),
        sample_id=np.array([f"s{seed}-{i}" for i in range(n)]),
    )


@pytest.fixture(scope="module")
def splits() -> dict[str, BaselineData]:
    return {
        "train": make_data(240, ["dev-a", "dev-b"], seed=0),
        "test": make_data(60, ["dev-a", "dev-b"], seed=1),
        "unseen": make_data(30, ["dev-c"], seed=2),
    }


@pytest.fixture(scope="module")
def fitted(splits) -> dict[str, object]:
    return {name: cls().fit(splits["train"]) for name, cls in BASELINES.items()}


def test_registry_has_all_baselines():
    assert set(BASELINES) >= {"flops", "roofline", "gbm", "sequence"}
    assert get_baseline("roofline") is RooflineBaseline
    with pytest.raises(GnnperfError, match="did you mean: roofline"):
        get_baseline("rooflin")


def test_duplicate_registration_raises():
    with pytest.raises(ValueError, match="registered twice"):
        register_baseline("flops")(FlopsBaseline)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_fits_and_predicts_held_out_rows(name, fitted, splits):
    pred = fitted[name].predict(splits["test"])
    assert pred.shape == (len(splits["test"]),)
    assert regression_metrics(pred, splits["test"].y_ms)["mape"] < 30.0


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_unseen_device_predicts_positive_times(name, fitted, splits):
    pred = fitted[name].predict(splits["unseen"])
    assert pred.shape == (len(splits["unseen"]),)
    assert np.all(np.isfinite(pred) & (pred > 0))


@pytest.mark.parametrize("name", ["flops", "roofline", "opcost"])
def test_spec_scaled_baselines_transfer_to_unseen_device(name, fitted, splits):
    # All three scale by peak FLOP/s, and the synthetic time is exactly that law.
    assert regression_metrics(fitted[name].predict(splits["unseen"]), splits["unseen"].y_ms)["mape"] < 15.0


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_state_dict_round_trip(name, fitted, splits, tmp_path):
    model = fitted[name]
    expected = model.predict(splits["test"])
    rebuilt = type(model).from_state(model.state_dict())
    np.testing.assert_allclose(rebuilt.predict(splits["test"]), expected, rtol=1e-6)
    loaded = load_baseline(save_baseline(model, tmp_path / f"{name}.pkl"))
    assert type(loaded) is type(model)
    np.testing.assert_allclose(loaded.predict(splits["test"]), expected, rtol=1e-6)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_fit_without_targets_is_a_user_error(name, splits):
    data = splits["test"].subset(np.arange(5))
    data.y_ms = None
    with pytest.raises(GnnperfError, match="y_ms"):
        get_baseline(name)().fit(data)


def test_sequence_is_reproducible(splits):
    small = splits["train"].subset(np.arange(40))
    a = get_baseline("sequence")(epochs=2).fit(small).predict(splits["test"])
    b = get_baseline("sequence")(epochs=2).fit(small).predict(splits["test"])
    np.testing.assert_array_equal(a, b)


def test_sequence_packs_shared_op_arrays_once_with_the_same_predictions(splits):
    from gnnperf.baselines.sequence import _seq_stats, _stats, _unique

    train = splits["train"].subset(np.arange(40))
    base = [s.astype(np.float32) for s in train.op_seq[:20]]
    # samples 20-39 are the dataset's same (graph, batch) at other devices: views of the first twenty arrays
    train.op_seq = base + [s[:] for s in base]
    copied = train.subset(np.arange(40))
    copied.op_seq = [s.copy() for s in train.op_seq]
    distinct, where = _unique(train.op_seq)
    assert len(distinct) == 20 and list(where) == list(range(20)) * 2
    assert len(_unique(copied.op_seq)[0]) == 40
    np.testing.assert_allclose(
        _seq_stats(train.op_seq), _stats(np.concatenate(train.op_seq).astype(np.float64))
    )
    shared = get_baseline("sequence")(epochs=2).fit(train).predict(splits["test"])
    np.testing.assert_allclose(
        shared, get_baseline("sequence")(epochs=2).fit(copied).predict(splits["test"]), rtol=1e-5
    )


def test_sequence_ignores_a_context_column_training_never_varied(splits):
    # a third hardware column that every training row shares (one CPU host's cache size) and a test device differs in
    def with_column(data: BaselineData, value: float) -> BaselineData:
        out = data.subset(np.arange(len(data)))
        out.hw = np.concatenate([data.hw, np.full((len(data), 1), value)], axis=1)
        return out

    model = get_baseline("sequence")(epochs=2).fit(with_column(splits["train"].subset(np.arange(40)), 5.7))
    np.testing.assert_array_equal(
        model.predict(with_column(splits["test"], 5.7)), model.predict(with_column(splits["test"], 6.2))
    )


def test_flops_uses_intercept_for_constant_overhead():
    data = make_data(60, ["dev-a"], seed=3, noise=0.0)
    data.y_ms = data.y_ms + 5.0  # launch overhead
    model = FlopsBaseline().fit(data)
    a, b = model.coef["dev-a|fp32"]
    assert b == pytest.approx(5.0, rel=1e-6)
    assert a * DEVICES["dev-a"][0] == pytest.approx(3e3 / EFFICIENCY / 3, rel=1e-6)  # ms per FLOP of work


def test_opcost_learns_a_device_independent_launch_cost_per_op():
    from gnnperf.baselines.opcost import OpCostBaseline

    launch_ms = 0.05
    data = {}
    for part, devices, seed in (("train", ["dev-a", "dev-b"], 4), ("unseen", ["dev-c"], 5)):
        d = make_data(120, devices, seed=seed, noise=0.0)
        d.y_ms = d.y_ms + launch_ms * np.array([len(s) for s in d.op_seq])  # a host cost no GPU speeds up
        data[part] = d
    model = OpCostBaseline().fit(data["train"])
    other = 3 * 5  # the synthetic ops have no op-type columns: all in the "other" class
    assert model.coef[other + 2] == pytest.approx(launch_ms, rel=1e-3)
    assert model.coef[other] == pytest.approx(1 / EFFICIENCY, rel=1e-3)
    pred = model.predict(data["unseen"])
    np.testing.assert_allclose(pred, data["unseen"].y_ms, rtol=1e-3)
    data["unseen"].bandwidth[0] = np.nan
    with pytest.raises(GnnperfError, match="no peak FLOP/s or bandwidth for \\['dev-c'\\]"):
        model.predict(data["unseen"])
    with pytest.raises(GnnperfError, match="op classes"):
        OpCostBaseline.from_state({**model.state_dict(), "classes": ["conv"]})


def test_roofline_per_op_needs_op_features(fitted, splits):
    assert fitted["roofline"].per_op is True
    data = splits["test"].subset(np.arange(3))
    data.op_seq = None
    with pytest.raises(GnnperfError, match="per-op"):
        fitted["roofline"].predict(data)
    train = splits["train"].subset(np.arange(50))
    train.op_seq = None
    model = RooflineBaseline().fit(train)
    assert model.per_op is False
    assert model.efficiency == pytest.approx(1 / EFFICIENCY, rel=0.05)


def test_baseline_data_validates_lengths_and_subsets(splits):
    data = splits["test"]
    with pytest.raises(ValueError, match="rows"):
        BaselineData(**{**vars(data), "flops": data.flops[:-1]})
    sub = data.subset(data.hardware == "dev-a")
    assert set(sub.hardware) == {"dev-a"} and len(sub.op_seq) == len(sub)
    frame = sub.prediction_frame(sub.y_ms)
    assert list(frame["sample_id"]) == list(sub.sample_id)
    assert {"pred_ms", "true_ms", "hardware"} <= set(frame.columns)


def _pyg_batch(specs_names: list[str], precisions: list[str], timed: list[str], with_y: bool = True):
    from torch_geometric.data import Batch, Data

    from gnnperf.graph.features import GRAPH_FEATURES, NODE_FEATURES

    node_cols = [n for n, _ in NODE_FEATURES]
    graph_cols = [n for n, _ in GRAPH_FEATURES]
    graphs = []
    for i, (hw, prec, t) in enumerate(zip(specs_names, precisions, timed)):
        x = torch.zeros(3 + i, len(node_cols))
        x[:, node_cols.index("log_flops")] = torch.log1p(torch.full((3 + i,), 1e6))
        x[:, node_cols.index("log_bytes_read")] = torch.log1p(torch.full((3 + i,), 1e4))
        x[:, node_cols.index("log_bytes_written")] = torch.log1p(torch.full((3 + i,), 2e4))
        u = torch.zeros(1, len(graph_cols))
        u[0, graph_cols.index(f"precision={prec}")] = 1
        u[0, graph_cols.index(f"timed={t}")] = 1
        data = Data(
            x=x, edge_index=torch.zeros(2, 0, dtype=torch.long), u=u, hw=torch.ones(1, 4), agg=torch.ones(1, 5),
            hardware=hw, family="fam", sample_id=f"id{i}", model_ref=f"zoo:m{i}", num_nodes=3 + i,
        )  # fmt: skip
        if with_y:
            data.y = torch.tensor([10.0 * (i + 1)])
        graphs.append(data)
    return Batch.from_data_list(graphs)


def test_from_batches_reads_the_batch_format():
    specs = {
        "gpu-x": spec_from_dict({"name": "gpu-x", "vendor": "nvidia", "peak_fp32_tflops": 20,
                                 "peak_fp16_tensor_tflops": 80, "memory_gb": 16, "mem_bandwidth_gbs": 500}),
    }  # fmt: skip
    batches = [
        _pyg_batch(["gpu-x", "gpu-x"], ["amp_fp16", "bf16"], ["fwd+bwd+opt", "fwd"]),
        _pyg_batch(["gpu-x"], ["fp32"], ["fwd+bwd"]),
    ]
    data = BaselineData.from_batches(batches, specs)
    assert len(data) == 3
    np.testing.assert_allclose(data.flops, [3e6, 4e6, 3e6], rtol=1e-5)
    np.testing.assert_allclose(data.bytes, [9e4, 12e4, 9e4], rtol=1e-5)
    # amp_fp16 -> fp16 tensor peak; bf16 missing in the spec -> fp32 peak
    np.testing.assert_allclose(data.peak_flops, [80e12, 20e12, 20e12])
    np.testing.assert_allclose(data.bandwidth, 500e9)
    assert list(data.timed) == ["fwd+bwd+opt", "fwd", "fwd+bwd"]
    np.testing.assert_allclose(data.work_multiplier, [3, 1, 3])
    np.testing.assert_allclose(data.y_ms, [10, 20, 10])
    assert [len(s) for s in data.op_seq] == [3, 4, 3]
    assert list(data.sample_id) == ["id0", "id1", "id0"] and data.agg.shape == (3, 5)
    assert data.op_column("log_flops") == data.op_columns.index("log_flops")
    no_y = BaselineData.from_batches([_pyg_batch(["gpu-x"], ["fp32"], ["fwd"], with_y=False)], specs)
    assert no_y.y_ms is None
    with pytest.raises(GnnperfError, match="no hardware spec for 'gpu-y'"):
        BaselineData.from_batches([_pyg_batch(["gpu-y"], ["fp32"], ["fwd"])], specs)
    # single samples (what compare passes) read the same, and keep op_seq as views of each sample's x
    samples = batches[0].to_data_list() + batches[1].to_data_list()
    single = BaselineData.from_batches(samples, specs)
    np.testing.assert_allclose(single.flops, data.flops, rtol=1e-6)
    assert list(single.timed) == list(data.timed) and list(single.sample_id) == list(data.sample_id)
    assert np.shares_memory(single.op_seq[0], samples[0].x.numpy())


@pytest.mark.parametrize("device", ["a100-sxm4-40gb", "titan-xp", "rtx-3090", "mi100"])
def test_baseline_peaks_are_the_roofline_readouts(device):
    """Each precision's peak is the one the GNN's roofline readout uses: TF32 at the tensor rate on Ampere."""
    from gnnperf.baselines.registry import peak_flops_per_s
    from gnnperf.hardware import HARDWARE_FEATURES
    from gnnperf.hardware.table import load_table
    from gnnperf.hardware.vector import hardware_vector
    from gnnperf.predictor.roofline import _PEAK

    spec = load_table()[device]
    hw = hardware_vector(spec)
    for precision, column in _PEAK.items():
        readout = np.expm1(hw[HARDWARE_FEATURES.index(column)]) or spec.peak_fp32_tflops
        assert peak_flops_per_s(spec, precision) == pytest.approx(readout * 1e12, rel=1e-5), precision
    if device == "a100-sxm4-40gb":  # 156 TF32 tensor TFLOP/s against 19.5 fp32
        assert peak_flops_per_s(spec, "tf32") == pytest.approx(8 * peak_flops_per_s(spec, "fp32"), rel=0.01)
    if device == "titan-xp":  # Pascal: no tensor cores, TF32 math runs at the fp32 rate
        assert peak_flops_per_s(spec, "tf32") == peak_flops_per_s(spec, "fp32")


def test_opcost_prices_a_class_the_train_split_lacks_at_the_pooled_rates():
    from gnnperf.baselines.opcost import OpCostBaseline

    def typed(data: BaselineData, matmul: bool) -> BaselineData:
        seqs = [np.column_stack([s[:, :3], np.full(len(s), float(matmul))]) for s in data.op_seq]
        return replace(data, op_seq=seqs, op_columns=(*OP_COLUMNS[:3], "op=MatMul"))

    train = typed(make_data(120, ["dev-a", "dev-b"], seed=6, noise=0.0), matmul=False)  # every op in "other"
    test = typed(make_data(30, ["dev-c"], seed=7, noise=0.0), matmul=True)  # every op a matrix product
    np.testing.assert_allclose(OpCostBaseline(prior=1e-3).fit(train).predict(test), test.y_ms, rtol=1e-3)
    # without the prior the class keeps the zero rates NNLS leaves on columns it never saw
    assert np.all(OpCostBaseline(prior=0.0).fit(train).predict(test) < 1e-3 * test.y_ms)
    with pytest.raises(GnnperfError, match="non-negative weight"):
        OpCostBaseline(prior=-0.1)
