"""OpGraph.structure_digest (the network without its names) and the library versions a cached graph records."""

from __future__ import annotations

import gzip
import json
import logging

from gnnperf.graph.build import GraphCache, build_graph
from gnnperf.graph.ir import OpGraph


def test_the_same_network_under_other_names_has_one_digest(graph_cache) -> None:
    plain = build_graph("tests.graph.factories:tiny_cnn", (3, 8, 8), cache=graph_cache)
    named = build_graph("tests.graph.factories:tiny_cnn_named", (3, 8, 8), cache=graph_cache)
    assert [p for n in named.nodes for p in n.params] != [p for n in plain.nodes for p in n.params]
    assert named.structure_digest() == plain.structure_digest()
    # a reloaded graph keeps its digest
    assert OpGraph.from_dict(plain.to_dict()).structure_digest() == plain.structure_digest()


def test_a_stride_an_input_size_or_a_wire_changes_the_digest(graph_cache) -> None:
    plain = build_graph("tests.graph.factories:tiny_cnn", (3, 8, 8), cache=graph_cache)
    strided = build_graph("tests.graph.factories:tiny_cnn_strided", (3, 8, 8), cache=graph_cache)
    larger = build_graph("tests.graph.factories:tiny_cnn", (3, 16, 16), cache=graph_cache)
    digests = {g.structure_digest() for g in (plain, strided, larger)}
    assert len(digests) == 3
    rewired = OpGraph.from_dict(plain.to_dict())
    relu = next(n for n in rewired.nodes if n.op_type == "Relu")
    relu.inputs = [rewired.inputs[0]]  # the same ops, fed from the graph input instead of the BatchNorm
    assert rewired.structure_digest() != plain.structure_digest()


def test_a_graph_cached_with_other_library_versions_is_built_again(tmp_path, caplog) -> None:
    from importlib.metadata import version

    cache = GraphCache(tmp_path)
    ref, shape = "tests.graph.factories:tiny_cnn", (3, 8, 8)
    graph = build_graph(ref, shape, cache=cache)
    assert graph.meta["built_with"] == {"torch": version("torch")}
    (path,) = tmp_path.glob("*.json.gz")
    old = OpGraph.from_dict(graph.to_dict())
    old.meta["built_with"] = {"torch": "1.0.0"}
    old.nodes = old.nodes[:1]  # what the old exporter made of it
    with gzip.open(path, "wt") as f:
        json.dump(old.to_dict(), f)
    # a dataset of cached graphs keeps it and says so once ...
    with caplog.at_level(logging.WARNING, logger="gnnperf.graph.build"):
        kept = build_graph(ref, shape, cache=cache, cached_only=True)
        build_graph(ref, shape, cache=cache, cached_only=True)
    assert len(kept.nodes) == 1 and sum("built with {'torch': '1.0.0'}" in m for m in caplog.messages) == 1
    # ... a build exports it again and caches the new one
    again = build_graph(ref, shape, cache=cache)
    assert again.to_dict() == graph.to_dict()
    assert build_graph(ref, shape, cache=cache, cached_only=True).to_dict() == graph.to_dict()
    # entries from before versions were recorded are used as they are
    old.meta.pop("built_with")
    with gzip.open(path, "wt") as f:
        json.dump(old.to_dict(), f)
    assert len(build_graph(ref, shape, cache=cache).nodes) == 1
