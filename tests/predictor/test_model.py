import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from gnnperf.errors import GnnperfError
from gnnperf.predictor.backbones import BACKBONES, build, register_backbone
from gnnperf.predictor.model import PerfGNN
from gnnperf.predictor.readout import READOUTS, register_readout
from gnnperf.predictor.target import from_target, get_loss, mape_loss, to_target
from tests.predictor import F_AGG, F_EDGE, F_GRAPH, F_HW, F_NODE, make_batch, make_graph, stats_of

DIMS = {"node_dim": F_NODE, "edge_dim": F_EDGE, "graph_dim": F_GRAPH, "hw_dim": F_HW, "agg_dim": F_AGG}


def small_model(**kw) -> PerfGNN:
    torch.manual_seed(0)
    args = {**DIMS, "hidden": 32, "layers": 2, "dropout": 0.0, **kw}
    return PerfGNN(**args)


def test_registries_reject_duplicates_and_unknown_names():
    assert {"gine", "gatv2", "transformer"} <= set(BACKBONES)
    with pytest.raises(ValueError, match="already registered"):
        register_backbone("gine")(lambda *a: None)
    with pytest.raises(ValueError, match="already registered"):
        register_readout("additive")(object)
    with pytest.raises(GnnperfError, match="did you mean: gine"):
        build("gin", 32, 2, 0.0)
    with pytest.raises(GnnperfError, match="multiple of heads"):
        build("gatv2", 30, 2, 0.0, heads=4)


@pytest.mark.parametrize("size", [{"hidden": 0}, {"layers": -1}, {"dropout": 1.0}, {"heads": 0}])
def test_a_bad_model_size_is_a_user_error(size):
    with pytest.raises(GnnperfError, match="bad model size"):
        PerfGNN(F_NODE, F_EDGE, F_GRAPH, F_HW, F_AGG, **size)


@pytest.mark.parametrize("readout", sorted(READOUTS))
@pytest.mark.parametrize("backbone", sorted(BACKBONES))
def test_forward_backward(backbone, readout):
    batch = make_batch()
    model = small_model(
        backbone=backbone, readout=readout, num_devices=2, stats=stats_of(batch.to_data_list())
    )
    log_ms, contrib = model(batch)
    assert log_ms.shape == (3,) and torch.isfinite(log_ms).all()
    if readout in ("additive", "roofline", "roofline_scaled", "roofline_overlap", "opcost"):
        assert contrib.shape == (batch.num_nodes,) and (contrib > 0).all()
    else:
        assert contrib is None
    get_loss("huber", delta=0.5)(log_ms, to_target(batch.y)).backward()
    grads = [p.grad for p in model.backbone.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)
    assert model.node_encoder[0].weight.grad.abs().sum() > 0


@pytest.mark.parametrize("readout", ["additive", "roofline", "roofline_scaled", "roofline_overlap", "opcost"])
def test_breakdown_sums_to_total(readout):
    batch = make_batch()
    model = small_model(readout=readout, stats=stats_of(batch.to_data_list())).eval()
    if readout == "roofline_scaled":  # a non-zero graph-level factor must scale the ops, not only the total
        torch.nn.init.normal_(model.readout.log_scale.weight, std=0.5)
    with torch.no_grad():
        log_ms, contrib = model(batch)
    parts = model.breakdown(batch)
    torch.testing.assert_close(parts.node_ms, contrib)
    per_graph = torch.zeros(3).index_add_(0, batch.batch, parts.node_ms) + parts.overhead_ms
    torch.testing.assert_close(per_graph, from_target(log_ms), rtol=1e-5, atol=0)
    torch.testing.assert_close(parts.total_ms, from_target(log_ms), rtol=1e-5, atol=0)
    with pytest.raises(GnnperfError, match="breakdown"):
        small_model(readout="pooled").breakdown(batch)


def test_roofline_prior_is_work_over_peak_plus_bytes_over_bandwidth():
    from gnnperf.graph.features import GRAPH_FEATURES, NODE_FEATURES
    from gnnperf.hardware import HARDWARE_FEATURES
    from gnnperf.predictor.roofline import RooflinePrior

    node, graph, hw_names = (
        [n for n, _ in NODE_FEATURES],
        [n for n, _ in GRAPH_FEATURES],
        list(HARDWARE_FEATURES),
    )
    g = make_graph(2, seed=0)
    g.x.zero_()
    g.x[0, node.index("log_flops")] = np.log1p(4e9)  # 4 GFLOP, nothing moved
    g.x[1, node.index("log_bytes_read")] = np.log1p(3e6)  # 3 MB read, 1 MB written, no FLOPs
    g.x[1, node.index("log_bytes_written")] = np.log1p(1e6)
    g.u.zero_()
    g.u[0, graph.index("precision=amp_fp16")] = 1.0
    g.u[0, graph.index("timed=fwd+bwd+opt")] = 1.0
    g.hw.zero_()  # no fp16 tensor peak: the fp32 one is used
    g.hw[0, hw_names.index("log1p_peak_fp32_tflops")] = np.log1p(20.0)
    g.hw[0, hw_names.index("log1p_mem_bandwidth_gbs")] = np.log1p(500.0)
    compute_ms, memory_ms = RooflinePrior()(g, torch.zeros(2, dtype=torch.long))
    # x3 for forward + backward: 4e9 * 3 / 20e12 s = 0.6 ms; 4e6 * 3 / 500e9 s = 0.024 ms
    torch.testing.assert_close(compute_ms, torch.tensor([0.6, 0.0]), rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(memory_ms, torch.tensor([0.0, 0.024]), rtol=1e-4, atol=1e-6)
    g.hw[0, hw_names.index("log1p_peak_fp16_tensor_tflops")] = np.log1p(80.0)
    compute_ms, _ = RooflinePrior()(g, torch.zeros(2, dtype=torch.long))
    torch.testing.assert_close(compute_ms[0], torch.tensor(0.15), rtol=1e-4, atol=1e-6)


def test_roofline_readout_is_faster_on_a_faster_device():
    g = make_graph(10, seed=4)
    fast = g.clone()
    fast.hw = g.hw.clone()
    fast.hw[0] = g.hw[0] + 2.0  # every peak and the bandwidth larger (log1p scale)
    model = small_model(readout="roofline", stats=stats_of([g])).eval()
    torch.nn.init.zeros_(model.conditioning.film.weight)  # untrained FiLM: the factors ignore the device
    with torch.no_grad():
        slow_ms, _ = model(Batch.from_data_list([g]))
        fast_ms, _ = model(Batch.from_data_list([fast]))
    assert fast_ms < slow_ms


def test_overlap_readout_takes_the_smooth_max_of_host_and_device_time():
    g = make_graph(12, seed=6)
    model = small_model(readout="roofline_overlap", stats=stats_of([g])).eval()
    batch = Batch.from_data_list([g])
    with torch.no_grad():
        log_ms, _ = model(batch)
        h, context, node_batch = model._encode(batch)
        log_device, log_fixed = model.readout.terms(h, model.prior(batch, node_batch))
        overhead_ms = torch.exp(model.readout.log_overhead(context).squeeze(-1))
    host, device, k = torch.exp(log_fixed).sum(), torch.exp(log_device).sum(), model.readout.SHARPNESS
    busy = (host**k + device**k) ** (1 / k)
    torch.testing.assert_close(from_target(log_ms), busy + overhead_ms, rtol=1e-4, atol=0)
    assert max(host, device) <= busy < host + device  # overlapped: less than the roofline readout's sum


def _on_other_device(g, roofline: bool, by: float):
    """``g`` on a device whose roofline specs (peaks, bandwidth; or, ``roofline=False``, all others) are larger."""
    from gnnperf.hardware import HARDWARE_FEATURES

    names = list(HARDWARE_FEATURES)
    columns = [i for i, c in enumerate(names) if ("peak" in c or "bandwidth" in c) == roofline]
    other = g.clone()
    other.hw = g.hw.clone()
    other.hw[0, columns] += by
    return other


def test_without_hardware_conditioning_only_the_roofline_sees_the_device():
    g = make_graph(10, seed=7)
    other = _on_other_device(g, roofline=False, by=1.5)  # same peaks, other specs
    faster = _on_other_device(g, roofline=True, by=2.0)
    model = small_model(
        readout="roofline", hardware_conditioning=False, num_devices=2, stats=stats_of([g, other, faster])
    )
    torch.nn.init.normal_(model.conditioning.film.weight, std=0.3)  # as after training
    torch.nn.init.normal_(model.conditioning.device_embedding.weight)
    with torch.no_grad():
        log_ms, _ = model.eval()(Batch.from_data_list([g, other, faster]))
    torch.testing.assert_close(log_ms[0], log_ms[1])
    assert log_ms[2] < log_ms[0]
    with pytest.raises(GnnperfError, match="blind to the device"):
        small_model(readout="pooled", hardware_conditioning=False)


def test_power_law_readout_turns_part_of_a_faster_roofline_into_speed():
    g = make_graph(10, seed=8)
    faster = _on_other_device(g, roofline=True, by=2.0)
    model = small_model(readout="power_law", hardware_conditioning=False, stats=stats_of([g, faster])).eval()
    torch.nn.init.normal_(model.conditioning.film.weight, std=0.3)  # as after training
    batch = Batch.from_data_list([g, faster])
    with torch.no_grad():
        log_ms, _ = model(batch)
        _, _, node_batch = model._encode(batch)
        compute, memory = model.prior(batch, node_batch)
    roofline_ms = torch.zeros(2).index_add_(0, node_batch, compute + memory)
    speedup, roofline_speedup = log_ms[0] - log_ms[1], torch.log(roofline_ms[0] / roofline_ms[1])
    assert 0 < speedup < roofline_speedup  # faster, by a power below 1 of the roofline's speed-up


def test_node_workload_lets_each_op_see_the_layout():
    from gnnperf.graph.features import GRAPH_FEATURES

    column = [n for n, _ in GRAPH_FEATURES].index("channels_last")
    nchw = make_graph(10, seed=4)
    nchw.u = nchw.u.clone()
    nchw.u[0, column] = 0.0
    nhwc = nchw.clone()
    nhwc.u = nchw.u.clone()
    nhwc.u[0, column] = 1.0
    pair = Batch.from_data_list([nchw, nhwc])
    states = {}
    for node_workload in (False, True):
        model = small_model(node_workload=node_workload, stats=stats_of([nchw, nhwc])).eval()
        with torch.no_grad():  # FiLM starts as the identity: only the encoder input can tell the two apart
            h, _, node_batch = model._encode(pair)
        states[node_workload] = (h[node_batch == 0], h[node_batch == 1])
    torch.testing.assert_close(*states[False])
    assert not torch.allclose(*states[True])


def test_hardware_vector_changes_prediction_and_op_costs():
    model = small_model().eval()
    # Non-zero FiLM weights (as after training) so the device scales every op, not only the readout's scale.
    torch.nn.init.normal_(model.conditioning.film.weight, std=0.3)
    g = torch.Generator().manual_seed(1)
    fast, slow = torch.randn(F_HW, generator=g), torch.randn(F_HW, generator=g)
    pair = Batch.from_data_list([make_graph(10, seed=3, hw=fast), make_graph(10, seed=3, hw=slow)])
    with torch.no_grad():
        log_ms, contrib = model(pair)
    assert abs(log_ms[0] - log_ms[1]) > 1e-4
    share = contrib.view(2, 10) / contrib.view(2, 10).sum(1, keepdim=True)
    assert not torch.allclose(share[0], share[1], rtol=1e-3)


def test_unseen_device_uses_spec_alone():
    model = small_model(num_devices=2).eval()
    torch.nn.init.normal_(model.conditioning.device_embedding.weight)
    hw = torch.randn(F_HW)
    graphs = [make_graph(8, seed=5, hw=hw, hw_id=i) for i in (0, -1, 7)]
    spec_only = small_model(num_devices=0).eval()
    spec_only.load_state_dict({k: v for k, v in model.state_dict().items() if "device_embedding" not in k})
    with torch.no_grad():
        log_ms, _ = model(Batch.from_data_list(graphs))
        no_embedding, _ = spec_only(Batch.from_data_list(graphs))
    assert torch.isfinite(log_ms).all()
    torch.testing.assert_close(log_ms[1], log_ms[2])  # -1 and out-of-range both mean "unseen"
    assert log_ms[0] != log_ms[1]  # a known device's embedding is used
    torch.testing.assert_close(log_ms[1], no_embedding[1])  # same weights apart from the embedding


def test_target_transform_and_losses():
    ms = torch.tensor([0.5, 20.0, 4000.0])
    torch.testing.assert_close(from_target(to_target(ms)), ms)
    np.testing.assert_allclose(from_target(to_target(np.array([3.0, 7.0]))), [3.0, 7.0])
    target = to_target(ms)
    assert mape_loss(target, target) == 0
    assert torch.isclose(mape_loss(target + np.log(1.1), target), torch.tensor(0.1))
    far = (target + 50.0).requires_grad_()  # e^50 overflows float32 ratios; the capped loss stays finite
    loss = mape_loss(far, target)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(far.grad).all() and (far.grad > 0).all()
    assert get_loss("mse")(target + 1, target) == 1
    with pytest.raises(GnnperfError, match="unknown loss"):
        get_loss("mae")


def test_stats_become_buffers():
    batch = make_batch()
    stats = stats_of(batch.to_data_list())
    model = small_model(stats=stats)
    torch.testing.assert_close(model.standardize["x"].mean, stats["x"][0])
    assert "standardize.hw.std" in model.state_dict()
    with pytest.raises(ValueError, match="shape"):
        small_model(stats={**stats, "u": (torch.zeros(3), torch.ones(3))})


def test_features_and_op_types_unseen_in_training_are_ignored():
    train = [make_graph(9, seed=s) for s in range(4)]
    unseen = 5  # an op id, and so its one-hot column, that no training graph has
    for g in train:
        g.x[:, unseen] = 0.0
        g.op[g.op == unseen] = unseen + 1
    model = small_model(stats=stats_of(train)).eval()
    assert not model.standardize["x"].varied[unseen] and model.standardize["x"].varied[unseen + 1]
    test = make_graph(9, seed=9)
    test.op[:] = unseen
    test.x[:, unseen] = 1.0
    with torch.no_grad():
        before, _ = model(Batch.from_data_list([test]))
        model.op_embedding.weight[unseen].normal_(std=10.0)
        model.node_encoder[0].weight[:, unseen].normal_(std=10.0)
        after, _ = model(Batch.from_data_list([test]))
        torch.testing.assert_close(before, after)  # nothing untrained reaches the prediction
        test.op[:] = unseen + 1
        model.op_embedding.weight[unseen + 1].normal_(std=10.0)
        seen, _ = model(Batch.from_data_list([test]))
    assert not torch.allclose(seen, after)


def test_op_dropout_hides_op_types_in_training_only():
    train = [make_graph(9, seed=s) for s in range(4)]
    model = small_model(stats=stats_of(train), op_dropout=1.0, device_dropout=0.0)
    test = make_graph(9, seed=9)
    other_ops = test.clone()
    other_ops.op = (test.op + 1) % model.num_ops
    other_ops.x[:, : model.num_ops] = torch.roll(test.x[:, : model.num_ops], 1, dims=1)
    with torch.no_grad():
        model.train()  # every op type hidden: the types make no difference
        a, _ = model(Batch.from_data_list([test]))
        b, _ = model(Batch.from_data_list([other_ops]))
        torch.testing.assert_close(a, b)
        model.eval()  # seen types count again
        a, _ = model(Batch.from_data_list([test]))
        b, _ = model(Batch.from_data_list([other_ops]))
    assert not torch.allclose(a, b)


def test_anchored_readout_stays_within_its_bound_of_the_cost_model():
    from gnnperf.predictor.readout import AnchoredReadout

    readout = AnchoredReadout(hidden=8, context_dim=16)
    torch.nn.init.normal_(readout.pool.mlp[-1].weight, std=100.0)  # a wildly confident correction
    h, context = torch.randn(6, 8), torch.randn(2, 16)
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    prior = (torch.rand(6) * 5.0, torch.rand(6))
    log_ms, contrib = readout(h, context, batch, prior)
    a, b, c = readout.rates(context[:, :8]).unbind(-1)
    compute, memory = (torch.zeros(2).index_add_(0, batch, p) for p in prior)
    cost = torch.log(compute * a.exp() + memory * b.exp() + c.exp())
    assert contrib is None
    assert ((log_ms - cost).abs() <= np.log(AnchoredReadout.MAX_CORRECTION) + 1e-5).all()
    assert ((log_ms - cost).abs() > 0.5).all()  # and the correction does act


def test_opcost_readout_prices_each_op_by_its_class_within_its_bound():
    from gnnperf.baselines.opcost import CLASSES
    from gnnperf.graph.features import OP_INDEX
    from gnnperf.predictor.readout import OpCostReadout

    readout = OpCostReadout(hidden=8, context_dim=16)
    readout.fit_rates(torch.rand(3 * len(CLASSES) + 1))  # a rate of its own for each class and term
    with pytest.raises(GnnperfError, match="expected 19"):
        readout.fit_rates([1.0, 2.0])
    torch.nn.init.normal_(readout.pool.mlp[-1].weight, std=100.0)  # a wildly confident correction
    h, context = torch.randn(4, 8), torch.randn(2, 16)
    batch = torch.tensor([0, 0, 1, 1])
    op = torch.tensor([OP_INDEX["Conv"], OP_INDEX["Relu"], OP_INDEX["MatMul"], OP_INDEX["Conv"]])
    prior = (torch.rand(4) * 5.0, torch.rand(4))
    log_ms, contrib = readout(h, context, batch, prior, op)
    rates = readout.log_rates.exp()
    cls = [CLASSES.index(k) for k in ("conv", "other", "matmul", "conv")]
    op_ms = torch.stack(
        [rates[k, 0] * prior[0][i] + rates[k, 1] * prior[1][i] + rates[k, 2] for i, k in enumerate(cls)]
    )
    overhead = readout.log_overhead.exp()
    cost = torch.log(torch.zeros(2).index_add_(0, batch, op_ms) + overhead)
    gap = (log_ms - cost).detach().abs()
    assert (gap <= np.log(OpCostReadout.MAX_CORRECTION) + 1e-5).all() and (gap > 0.5).all()
    # each op's share is its class-priced time under its graph's one correction
    share = (contrib / op_ms).detach()
    torch.testing.assert_close(share[0], share[1])
    torch.testing.assert_close(share[2], share[3])
