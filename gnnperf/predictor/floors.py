"""The floors under a prediction: a step is never predicted faster than a step it contains.

- the device floor (:data:`~gnnperf.predictor.parallel.DP_FLOOR_NOTE`): a DataParallel step on several GPUs is at
  least the same step on one;
- the update floor (:data:`~gnnperf.predictor.optimizer_step.UPDATE_FLOOR_NOTE`): a step that times an optimizer
  update is at least the same step without one plus the update's least time, where the step without one (its mode,
  precision, timed region and layout) was in training on a GPU: elsewhere it is the network's guess, not a floor (on
  the timm RTX 3090 rows, AMP fp16 steps no GPU source timed without an update, such a floor raised 30 of 149 and
  made them worse; ``experiments/optimizer_step``). GPUs only: the least time is at the data sheet's bandwidth.

Floors compose: the step a floor refers to is floored itself, so two GPUs with SGD are at least one GPU with SGD,
which is at least one GPU without an update plus the update.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from gnnperf.predictor.optimizer_step import update_floor_ms

if TYPE_CHECKING:
    from gnnperf.graph.ir import OpGraph
    from gnnperf.hardware.table import HardwareSpec
    from gnnperf.measure.workload import Workload

DEVICE, UPDATE = "floored_at_one_device", "floored_at_update"  # the prediction rows' flags


def trained_together(trained_on: Mapping[str, Any], kind: str, workload: Workload) -> bool:
    """Whether ``workload``'s mode, precision, timed region and layout were in training together on a ``kind`` device
    (``trained_on["workload_combinations_by_kind"]``; False for a checkpoint that does not record them)."""
    combos = trained_on.get("workload_combinations_by_kind", {}).get(kind, [])
    return [workload.mode, workload.precision, workload.timed_label, workload.memory_format] in combos


@dataclass
class Floors:
    """The floors of a batch of prediction items.

    Attributes:
        item_of: the index of a step's prediction item, added to the batch if it is not in it yet.
        device: apply the device floor.
        update: apply the update floor.
        trained_on: the checkpoint's ``trained_on`` record (which steps its training had per device kind).
        under: per item, the floors under it: (flag, the item it is floored at, ms added to that item's time).
    """

    item_of: Callable[[OpGraph, HardwareSpec, Workload], int]
    device: bool
    update: bool
    trained_on: Mapping[str, Any]
    under: dict[int, list[tuple[str, int, float]]] = field(default_factory=dict)

    def add(self, i: int, graph: OpGraph, spec: HardwareSpec, workload: Workload) -> None:
        """Register the floors of item ``i`` (``workload`` of ``graph`` on ``spec``) and of the items they refer to."""
        if i in self.under:
            return
        self.under[i] = []
        if self.device and workload.num_devices > 1:
            self._at(i, DEVICE, graph, spec, replace(workload, num_devices=1), 0.0)
        # GPUs only: a GPU's bandwidth is its data sheet's peak, which bounds every kernel; a CPU's is a probed copy
        # rate, which in-place updates beat (experiments/optimizer_step: SGD at 2x it on weights larger than the L3)
        if not (self.update and spec.kind == "gpu" and workload.timed == "fwd+bwd+opt"):
            return
        bare = replace(workload, optimizer="none", timed="fwd+bwd")
        if trained_together(self.trained_on, "gpu", bare):
            least = update_floor_ms(
                graph.param_count(), workload.optimizer, workload.precision, spec.mem_bandwidth_gbs
            )
            self._at(i, UPDATE, graph, spec, bare, least)

    def _at(
        self, i: int, flag: str, graph: OpGraph, spec: HardwareSpec, workload: Workload, plus: float
    ) -> None:
        j = self.item_of(graph, spec, workload)
        self.under[i].append((flag, j, plus))
        self.add(j, graph, spec, workload)

    def resolve(self, item_ms: Sequence[float]) -> list[tuple[float, str | None, float]]:
        """Each item's floored time, the flag of the floor that set it (None: its own time) and the ms it added."""
        done: dict[int, tuple[float, str | None, float]] = {}

        def floored(i: int) -> tuple[float, str | None, float]:
            if i not in done:
                best: tuple[float, str | None, float] = (float(item_ms[i]), None, 0.0)
                for flag, j, plus in self.under.get(i, []):
                    if (ms := floored(j)[0] + plus) > best[0]:
                        best = (ms, flag, plus)
                done[i] = best
            return done[i]

        return [floored(i) for i in range(len(item_ms))]
