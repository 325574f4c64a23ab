"""A step at a smaller batch is predicted no slower than at a larger one (the batch cap of ``Predictor.predict``).

A larger batch runs the same kernels as a smaller one on more data, so its step takes at least as long; at small
batches, where launches and the framework bound the step, the time is flat. The network learns the batch
dependence from rows mostly at one batch per model (timm's tables at the largest batch that fit, the torchvision
benchmark at 12), and below batch 16 its predictions can fall as the batch grows: the shipped v13 did so on 85 of
672 doublings of a grid of 7 models, 6 GPUs and 2 precisions, by up to 12% a doubling
(``experiments/batch_monotone``). So each prediction is capped at the predictions of the same step at the powers
of two above its batch, up to :data:`LARGEST`.

Why a cap and not a floor: on the shipped predictor's test part, flooring each prediction at the smaller powers of
two raised 103 of the torchvision benchmark's 228 rows (all at batch 12, its only batch, so well learned; the
smaller batches there are extrapolated, and too slow) and took that source from 7.4% to 11.3% MAPE; the cap changed
6 of 1,164 rows and the MAPE by under 0.03 point on every source, an isotonic fit over the batches 66 rows and 0.02
point overall. ``Predictor.predict`` adds the larger batches asked of the same step in one call to the ladder, so
two asked batches between the same powers of two (10 and 12) are capped against each other too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

LARGEST = (
    4096  # the largest batch a prediction is capped at (the range checked in experiments/batch_monotone)
)


def larger_batches(batch_size: int) -> list[int]:
    """The powers of two above ``batch_size``, up to :data:`LARGEST`."""
    return [2**k for k in range(LARGEST.bit_length()) if batch_size < 2**k]


def cap_batches(steps: Sequence[tuple[Hashable, int]]) -> list[list[int]]:
    """Per asked (step, batch), the batches its prediction is capped at, in order.

    The powers of two above the batch (:func:`larger_batches`) and the larger batches asked of the same step.
    """
    asked: dict[Hashable, set[int]] = {}
    for step, batch in steps:
        asked.setdefault(step, set()).add(batch)
    return [sorted({*larger_batches(b), *(a for a in asked[step] if a > b)}) for step, b in steps]


def cap_at_larger(
    ms: Sequence[float], ladders: Sequence[Sequence[tuple[int, int]]]
) -> list[tuple[float, int | None]]:
    """Each asked prediction capped at its larger batches' predictions.

    Args:
        ms: predicted times of every item; the first ``len(ladders)`` are the asked queries.
        ladders: per asked query, (batch, index into ``ms``) of the larger batches it is capped at.

    Returns:
        Per asked query, the capped time and the batch whose prediction set it (None where its own did).
    """
    out = []
    for i, ladder in enumerate(ladders):
        best, source = float(ms[i]), None
        for batch, j in ladder:
            if ms[j] < best:
                best, source = float(ms[j]), batch
        out.append((best, source))
    return out
