"""``torchvision:NAME`` references: a torchvision model with random weights, at its default weights' input size.

Classifiers and segmentation models take images, video models 16-frame clips (``input_kind="video"``); detection and
optical-flow models need a second input and are refused by name. The default weights are read for their metadata
only (crop size, frames); nothing is downloaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from torch import nn

from gnnperf.errors import GnnperfError, suggest
from gnnperf.zoo.resolve import ModelSpec

# Why the torchvision models of these tasks are refused before an export that would fail with the model's own
# assertion: gnnperf feeds one input tensor, and times the step the model computes from it.
UNSUPPORTED_TORCHVISION_TASKS = {
    "detection": "a detection model: its training step takes target boxes beside the images and matches them to "
    "anchors or proposals in data-dependent code, which one static graph cannot price",
    "optical_flow": "an optical-flow model: it takes two images and refines its flow in a loop, and gnnperf "
    "prices models of one input",
}

# Frames per clip of a torchvision video model: the Kinetics-400 recipe of torchvision's references trains on
# 16-frame clips; a model whose weights need more (``min_temporal_size``) gets that many.
VIDEO_FRAMES = 16


def torchvision_spec(name: str) -> ModelSpec:
    """The spec of ``torchvision:NAME``; detection and optical-flow models are refused by name."""
    import torchvision

    names = torchvision.models.list_models()
    if name not in names:
        raise GnnperfError(f"unknown torchvision model '{name}'{suggest(name, names)}")
    builder = torchvision.models.get_model_builder(name)
    # torchvision.models.<task>.<module>, or torchvision.models.<module> for classifiers
    task = builder.__module__.split(".")[2]
    if task in UNSUPPORTED_TORCHVISION_TASKS:
        raise GnnperfError(f"torchvision:{name} is {UNSUPPORTED_TORCHVISION_TASKS[task]}")
    crop = _weights_crop(name)
    input_kind, input_shape = "image", (3, crop, crop)
    if task == "video":
        input_kind, input_shape = "video", (3, _video_frames(name), crop, crop)
    kwargs: dict[str, Any] = {"weights": None}
    # detection and segmentation builders fetch ImageNet backbone weights by default
    if "weights_backbone" in inspect.signature(builder).parameters:
        kwargs["weights_backbone"] = None
    sized_builder = None
    # a ViT's position table is sized at build: ViT-H/14's default weights are at 518
    if task == "vision_transformer":
        kwargs["image_size"] = crop
        sized_builder = _square(name, lambda size: builder(**{**kwargs, "image_size": size}))
    if name in ("inception_v3", "googlenet"):
        kwargs["init_weights"] = False  # scipy truncnorm init is slow and irrelevant to timing
        kwargs["aux_logits"] = False
    return ModelSpec(
        ref=f"torchvision:{name}",
        family=builder.__module__.rsplit(".", 1)[-1],
        input_kind=input_kind,
        default_input_shape=input_shape,
        input_names=("input",),
        builder=lambda _depth: builder(**kwargs),
        sized_builder=sized_builder,
    )


def _square(
    name: str, build: Callable[[int], nn.Module]
) -> Callable[[int | None, tuple[int, ...]], nn.Module]:
    """A ``sized_builder`` for a model of square images only (torchvision's ViTs take one ``image_size``)."""

    def sized(_depth: int | None, shape: tuple[int, ...]) -> nn.Module:
        if len(shape) != 3 or shape[1] != shape[2]:
            raise GnnperfError(f"torchvision:{name} takes square images: got {','.join(map(str, shape))}")
        return build(shape[1])

    return sized


def _weights_crop(name: str) -> int:
    """The crop size of the torchvision model's default weights, as timm's ``pretrained_cfg`` gives its own.

    The weights enum is read for its metadata only (no download). Most classifiers are at 224; EfficientNet
    scales it with the model (B7 600), Inception-v3 is at 299, Swin V2 at 256, the SWAG ViT-H/14 and RegNetY-128GF at
    518 and 384; R(2+1)D / R3D / MC3 at 112. A builder without weights or a crop (segmentation) gets 224.
    """
    import torchvision

    try:
        preset = torchvision.models.get_model_weights(name).DEFAULT.transforms()
    except (ValueError, AttributeError):
        return 224
    crop = getattr(preset, "crop_size", None)  # segmentation presets resize only (to 520): those stay at 224
    return int(crop[0]) if crop else 224


def _video_frames(name: str) -> int:
    """Frames per clip of a video model: :data:`VIDEO_FRAMES`, or more where its default weights need them."""
    import torchvision

    min_frames = torchvision.models.get_model_weights(name).DEFAULT.meta.get("min_temporal_size") or 0
    return max(VIDEO_FRAMES, min_frames)
