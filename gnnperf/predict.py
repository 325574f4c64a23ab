"""The ``Predictor`` API: a trained checkpoint -> iteration-time predictions for unseen models and devices.

A predictor checkpoint is a Lightning checkpoint of :class:`~gnnperf.predictor.module.PerfModule` (its
hyper-parameters hold the feature lists, ``FEATURE_VERSION``, the hardware table version and the device list;
its state holds the train-split normalisation statistics) plus a ``gnnperf`` entry written by
:func:`~gnnperf.predictor.checkpoint.save_predictor`: the split-conformal intervals (:mod:`gnnperf.predictor.interval`),
what it was trained on, its metrics and the unseen-op fallback, if any (:mod:`gnnperf.predictor.fallback`: graphs
with op types absent from training lean on a baseline's estimate; each prediction lists such op types).

:meth:`Predictor.calibrate` scales a device's later predictions by a few measured iteration times there (an
unseen GPU's error is mostly one scale: ``experiments/torchvision_lodo``); where predictions are already centred
on a device, one reference adds its own error (``experiments/timm_infer_lodo``: 14.1% -> 15.8%).
:meth:`Predictor.transfer` scales the same model's time on another device by the predicted ratio of the two.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the package's heavy imports stay lazy (predict start-up)
    from gnnperf.hardware.table import HardwareSpec
    from gnnperf.measure.workload import Workload

from gnnperf.predictor.epoch import epoch_estimate  # noqa: F401 - part of this module's API
from gnnperf.predictor.query import Query

DEFAULT_CHECKPOINT_ENV = "GNNPERF_CHECKPOINT"
# Trained on every real source (experiments/all_sources); its model card sits beside it.
SHIPPED_CHECKPOINT = Path(__file__).parent / "predictor" / "shipped" / "predictor.ckpt"


class Predictor:
    """Predicts iteration times with a trained GNN; build it with :meth:`from_checkpoint`."""

    def __init__(self, model, hparams: Mapping[str, Any], info: Mapping[str, Any], path: Path) -> None:
        self.model = model
        self.hparams = dict(hparams)
        self.info = dict(info)
        self.path = path
        from gnnperf.predictor.checkpoint import load_fallback

        self.fallback = load_fallback(self.info)  # for op types unseen in training (None: trained without)
        # measured / predicted per calibration key (hardware and workload, anchors.calibration_key), from calibrate()
        self.calibration: dict[tuple, float] = {}
        from gnnperf.predictor.traces import Traces

        # memory estimates: the trace does not depend on the device, only the verdict does
        self._traces = Traces()

    @classmethod
    def from_checkpoint(cls, path: str | Path | None = None) -> Predictor:
        """Load a predictor; ``None`` takes ``$GNNPERF_CHECKPOINT``, else the shipped one.

        Raises:
            GnnperfError: no checkpoint, or one from another feature version or hardware table.
        """
        from gnnperf.errors import GnnperfError
        from gnnperf.predictor.checkpoint import load_model

        path = path or os.environ.get(DEFAULT_CHECKPOINT_ENV)
        if not path and SHIPPED_CHECKPOINT.exists():
            path = SHIPPED_CHECKPOINT
        if not path:
            raise GnnperfError(
                f"no checkpoint: pass --checkpoint PATH or set {DEFAULT_CHECKPOINT_ENV} (train one with gnnperf-train)"
            )
        model, hparams, info = load_model(path)
        return cls(model, hparams, info, Path(path))

    @property
    def devices(self) -> list[str]:
        """Devices with training rows; any other table entry or spec file is predicted from its specs.

        Checkpoints written before ``trained_on.devices`` was recorded give every device of their data (the
        held-out one of a leave-one-device-out run included).
        """
        return list(self.info.get("trained_on", {}).get("devices", self.hparams["devices"]))

    def spec(self, hardware: str, hardware_file: str | None = None) -> HardwareSpec:
        """The spec of a device name or alias.

        The hardware table and ``hardware_file`` first, then the devices this checkpoint was trained on
        (``trained_on.hardware_specs``; the CPUs of the measured stores are in no table).

        Raises:
            GnnperfError: ``hardware_file`` gives a training device other specs than it was trained with (its
                learned embedding would be paired with them; another name predicts it from its specs).
        """
        from gnnperf.hardware.table import get_spec, spec_from_dict
        from gnnperf.predictor.coverage import check_respecified

        records = {
            n: spec_from_dict(d) for n, d in self.info.get("trained_on", {}).get("hardware_specs", {}).items()
        }
        spec = get_spec(hardware, hardware_file, records)
        if hardware_file and spec.name in records:
            check_respecified(spec, records[spec.name], hardware_file)
        return spec

    def device_index(self, hardware: str) -> int:
        """Index of ``hardware``'s learned embedding, or -1 when it had no training rows (predicted from its specs)."""
        return self.hparams["devices"].index(hardware) if hardware in self.devices else -1

    def calibrate(
        self, measured: Iterable[tuple[Query, float]], hardware_file: str | None = None
    ) -> dict[tuple, float]:
        """Scale later predictions by measured times of reference models on the same device and workload.

        Each (hardware, precision, mode, timed, memory format, devices, parallel) that a measurement covers gets the factor
        exp(mean log(measured / predicted)) over its measurements; predictions for it are multiplied by that
        factor (their interval keeps its relative width, whose coverage was measured without calibration).
        A later call replaces the factors of the groups it covers.

        Args:
            measured: (query, measured iteration time in ms) pairs, e.g. ResNet-50 timed once on the new GPU.

        Returns:
            The new factors by (hardware, precision, mode, timed, memory format, devices, parallel).

        Raises:
            GnnperfError: no measurements, or a time that is not a positive number.
        """
        from gnnperf.predictor.anchors import calibration_factors, check_calibration

        pairs = list(measured)
        check_calibration([ms for _, ms in pairs])
        rows = self.predict([q for q, _ in pairs], hardware_file=hardware_file, calibrated=False)
        factors = calibration_factors(rows, [ms for _, ms in pairs])
        self.calibration.update(factors)
        return factors

    def transfer(
        self,
        query: Query,
        measured_on: str,
        measured_ms: float,
        breakdown: int = 0,
        hardware_file: str | None = None,
    ) -> dict:
        """The prediction for ``query`` from the same model and workload timed on another device.

        Habitat's question (Yu et al., ATC 2021): the model ran on a device the user has (``measured_on``,
        ``measured_ms``); the prediction is that time times the checkpoint's predicted ratio between the two
        devices, so the network's error for this model, common to both devices, cancels and the error of the
        device ratio stays (held-out RTX 3090 from the RTX 4090: 8.6% -> 6.8% MAPE, ``experiments/timm_infer_lodo``).
        The row carries ``measured_on`` (with the prediction there and its extrapolation ``flags``) and
        ``transfer_factor`` (measured / predicted there); the interval is scaled alike (its coverage measured without).

        Raises:
            GnnperfError: ``measured_ms`` is not a positive number.
        """
        from gnnperf.predictor.anchors import check_transfer, transferred

        check_transfer(measured_ms)
        row, there = self.predict(
            [query, replace(query, hardware=measured_on)],
            breakdown=breakdown,
            hardware_file=hardware_file,
            calibrated=False,
        )
        return transferred(row, there, measured_ms)

    def memory(
        self, query: Query, hardware_file: str | None = None, max_batch: bool = False
    ) -> dict[str, Any] | None:
        """The step's peak memory per device for ``query`` (:mod:`gnnperf.graph.memory`, an inference step's
        :mod:`gnnperf.graph.inference_memory`; not learned).

        The dict of :meth:`~gnnperf.graph.memory.MemoryEstimate.on_device` (MB by what holds them, the device's
        memory, ``fits`` and ``verdict``; an inference step's ``peak_at`` is ``forward``), with ``largest_batch``
        per device when ``max_batch`` and a training step of an hf model its ``attention``
        (:data:`gnnperf.zoo.hf.ATTENTION`); None where the estimate does not apply: a device other than a GPU whose
        memory size is known (what it was checked on).

        Raises:
            GnnperfError: a model the shape-only trace cannot run, or an ONNX file (no PyTorch model to trace).
        """
        from gnnperf.graph.inference_memory import largest_inference_batch
        from gnnperf.graph.largest_batch import largest_batch
        from gnnperf.zoo.resolve import resolve_hf

        spec = self.spec(query.hardware, hardware_file)
        if spec.kind != "gpu" or not spec.memory_gb:
            return None
        if query.mode == "infer":
            inference = self._traces.inference(query)
            memory = inference.on_device(spec.memory_gb)
            if max_batch:
                workload = query.workload(query.input_shape or ())
                memory["largest_batch"] = largest_inference_batch(
                    query.model, workload, spec.memory_gb, inference
                )
            return memory
        estimate = self._traces.estimate(query)
        memory = estimate.on_device(spec.memory_gb)
        # an hf model's attention, which the report names where it is eager
        if (model := resolve_hf(query.model)) is not None:
            memory["attention"] = model.attention
        if max_batch:
            memory["largest_batch"] = largest_batch(
                query.model,
                query.workload(query.input_shape or ()),
                spec.memory_gb,
                estimate,
                *query.training_memory_options,
            )
        return memory

    def _item(self, graph, spec: HardwareSpec, workload: Workload, features: dict):
        """The network's input for ``workload`` of ``graph`` on ``spec`` (``hardware`` for the fallback's baseline).

        ``features`` keeps each (model, input shape, batch)'s node and edge features for the other workloads of one
        call, and each (model, workload)'s graph features for its other devices.
        """
        import torch

        from gnnperf.data.dataset import batch_features, graph_features, sample_data
        from gnnperf.hardware.vector import hardware_vector

        at_batch = ("batch", graph.model_ref, tuple(graph.input_shape), workload.batch_size)
        if at_batch not in features:
            features[at_batch] = batch_features(graph, workload.batch_size)
        key = (graph.model_ref, workload)
        if key not in features:
            features[key] = graph_features(graph, workload, features[at_batch])
        hw = torch.from_numpy(hardware_vector(spec))
        item = sample_data(graph, workload, hw, self.device_index(spec.name), features[key])
        item.hardware = spec.name
        return item

    def predict(
        self,
        queries: Query | Iterable[Query],
        breakdown: int = 0,
        hardware_file: str | None = None,
        calibrated: bool = True,
        batch_cap: bool = True,
        device_floor: bool = True,
        update_floor: bool = True,
    ) -> list[dict]:
        """Predictions for one or more queries: ``iteration_time_ms`` with an interval, optionally top ops.

        With ``breakdown=N`` a row also has ``breakdown``, the N groups of ops with the most predicted time (ops
        repeated across blocks together, :mod:`gnnperf.predictor.breakdown`), ``breakdown_by_class`` (every op
        class) and ``breakdown_all_ops_ms`` (all ops; the rest of the step is the readout's overhead).

        With ``batch_cap`` a prediction is at most those of the same step at the powers of two above its batch
        and at the larger batches asked in the same call (:mod:`gnnperf.predictor.batch_cap`); ``capped_at_batch``
        names the batch that set it, if one did. With ``device_floor`` a DataParallel step on several GPUs is at
        least the same step's on one (:data:`~gnnperf.predictor.parallel.DP_FLOOR_NOTE`); ``floored_at_one_device``
        says it set the time. With ``update_floor`` a GPU step that times an optimizer update is at least the same
        step without it plus the update's least time (:mod:`gnnperf.predictor.optimizer_step`), where such a step
        without one was in training (:mod:`gnnperf.predictor.floors`); ``floored_at_update`` says it set the time.
        After :meth:`calibrate`, predictions of a calibrated device and workload are scaled and carry
        ``calibration_factor``, unless ``calibrated`` is false.
        """
        from gnnperf.errors import GnnperfError
        from gnnperf.predictor.anchors import calibration_key, scale
        from gnnperf.predictor.asked import asked_step
        from gnnperf.predictor.batch_cap import cap_at_larger, cap_batches
        from gnnperf.predictor.breakdown import op_fields
        from gnnperf.predictor.floors import DEVICE, UPDATE, Floors
        from gnnperf.predictor.fused_attention import sdpa_steps
        from gnnperf.predictor.model import predict_samples
        from gnnperf.predictor.rows import time_row
        from gnnperf.zoo.resolve import resolve_hf

        queries = [queries] if isinstance(queries, Query) else list(queries)
        if not queries:
            return []
        if breakdown < 0:
            raise GnnperfError(f"breakdown must be a number of ops >= 0, got {breakdown}")
        items, graphs, layout_moot, checkpointed, features, loaded = [], [], [], [], {}, {}
        bare: list[Workload | None] = []  # an accumulated step's pass without the update, where it times one
        assumed = {q.model: m.assumptions for q in queries if (m := resolve_hf(q.model)) is not None}
        for q in queries:
            graph, spec, workload, moot = asked_step(self, q, hardware_file, loaded)
            layout_moot.append(moot)
            checkpointed.append(
                self._traces.checkpointed(q, workload) if q.activation_checkpointing else None
            )
            items.append(self._item(graph, spec, workload, features))
            graphs.append((graph, spec, workload))
            updates = q.grad_accum > 1 and workload.timed == "fwd+bwd+opt"
            bare.append(replace(workload, optimizer="none", timed="fwd+bwd") if updates else None)
        # the steps the asked ones are capped or floored at: items after the asked ones, each step once
        index = {(g.model_ref, s.name, w): i for i, (g, s, w) in enumerate(graphs)}
        item_steps = list(graphs)  # every item's (graph, device, workload)

        def item_of(graph, spec: HardwareSpec, workload: Workload) -> int:
            key = (graph.model_ref, spec.name, workload)
            if key not in index:
                index[key] = len(items)
                items.append(self._item(graph, spec, workload, features))
                item_steps.append((graph, spec, workload))
            return index[key]

        # the larger batches each prediction is capped at (a step's workload at batch 1 stands for it at every batch)
        steps = [((g.model_ref, s.name, replace(w, batch_size=1)), w.batch_size) for g, s, w in graphs]
        ladders = [
            [(b, item_of(g, s, replace(w, batch_size=b))) for b in (larger if batch_cap else [])]
            for (g, s, w), larger in zip(graphs, cap_batches(steps), strict=True)
        ]
        # a step is never faster than a step it contains (gnnperf/predictor/floors.py)
        floors = Floors(item_of, device_floor, update_floor, self.info.get("trained_on", {}))
        for i, (g, s, w) in enumerate(graphs):
            floors.add(i, g, s, w)
        bare_items: list[int | None] = []
        for (g, s, _), b in zip(graphs, bare, strict=True):
            bare_items.append(None if b is None else item_of(g, s, b))
            if b is not None:
                floors.add(bare_items[-1], g, s, b)
        gnn_ms, node_ms = predict_samples(self.model, items)
        gnn_ms = gnn_ms.numpy()
        all_ms, share = gnn_ms, [0.0] * len(items)
        if self.fallback is not None:
            from gnnperf.baselines.registry import BaselineData

            specs = {spec.name: spec for _, spec, _ in graphs}
            all_ms, share = self.fallback.apply(gnn_ms, BaselineData.from_batches(items, specs))
        if breakdown and node_ms is None:
            raise GnnperfError(
                f"a per-op breakdown needs a readout with per-op terms (additive, roofline*, opcost); {self.path} "
                f"uses the {self.hparams.get('readout')} readout"
            )
        # an sdpa model's attention as the fused kernel, in every step before one caps or floors another
        by_ref = {g.model_ref: assumed.get(q.model, ()) for q, (g, _, _) in zip(queries, graphs, strict=True)}
        fused, saved = sdpa_steps(item_steps, node_ms, by_ref)
        eager_ms, all_ms = all_ms, all_ms - saved
        capped = cap_at_larger(all_ms, ladders)
        item_ms = [c[0] for c in capped] + [float(v) for v in all_ms[len(graphs) :]]  # asked ones as capped
        floored = floors.resolve(item_ms)
        out = []
        for i, (graph, spec, workload) in enumerate(graphs):
            cap_batch = capped[i][1]
            ms, floor, least = floored[i]
            assumptions = assumed.get(queries[i].model, ())
            # each op's time in the step, the eager attention ops' as fused (a capped step's scaled alike: they
            # are the asked batch's)
            ops_ms = None if node_ms is None else node_ms[i] * (ms / all_ms[i])
            if fused[i] is not None:
                ops_ms[fused[i].pop("nodes")] *= fused[i]["fused_ms"] / fused[i]["eager_ms"]
            row = time_row(
                self, queries[i], graph, spec, workload, ms, u=items[i].u[0],
                assumptions=assumptions, layout_moot=layout_moot[i], checkpointed=checkpointed[i],
                bare_ms=None if bare_items[i] is None else floored[bare_items[i]][0],
            )  # fmt: skip
            row["capped_at_batch"] = cap_batch
            if cap_batch is not None:
                row["uncapped_ms"] = float(all_ms[i])
            row[DEVICE], row[UPDATE] = floor == DEVICE, floor == UPDATE
            if floor == UPDATE:
                row["update_least_ms"] = least
            if floor is not None:
                row["unfloored_ms"] = float(capped[i][0])
            if share[i] > 0:  # blended with the fallback's baseline (gnnperf/predictor/fallback.py)
                row["unseen_op_share"] = float(share[i])
                row["fallback_baseline"] = self.fallback.name
                row["gnn_iteration_time_ms"] = float(gnn_ms[i])
            if fused[i] is not None:
                row["fused_attention"] = fused[i] | {"eager_step_ms": float(eager_ms[i])}
            if ops_ms is not None and breakdown:
                row |= op_fields(graph, ops_ms, ms, breakdown)
            factor = self.calibration.get(calibration_key(row)) if calibrated else None
            if factor is not None:
                scale(row, factor)
                row["calibration_factor"] = factor
            out.append(row)
        return out
