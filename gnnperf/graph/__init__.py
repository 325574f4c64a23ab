"""Model -> ONNX -> op graph (IR) with per-op costs -> PyG features."""

from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.features import FEATURE_VERSION, to_data
from gnnperf.graph.ir import OpGraph

__all__ = ["FEATURE_VERSION", "GraphCache", "OpGraph", "build_graph", "to_data"]
