"""The networks whose time is predicted: parametric families and the model-reference resolver."""

from gnnperf.zoo.resolve import ModelSpec, parse_input_shape, resolve

__all__ = ["ModelSpec", "parse_input_shape", "resolve"]
