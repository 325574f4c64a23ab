"""Importing this package registers every zoo family."""

from gnnperf.zoo.families import (  # noqa: F401  (each module registers its families on import)
    convnext,
    densenet,
    mlp,
    mobilenet,
    resnet,
    rnn,
    squeezenet,
    transformer,
    vgg,
    vit,
)
