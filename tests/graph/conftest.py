import pytest

from gnnperf.graph.build import GraphCache


@pytest.fixture(scope="session")
def graph_cache(tmp_path_factory) -> GraphCache:
    """One cache for the session: each model is exported once across tests."""
    return GraphCache(tmp_path_factory.mktemp("graphs"))
