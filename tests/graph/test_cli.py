"""`gnnperf graph`: JSON output, and one-line errors with exit code 2 for bad input."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gnnperf.graph.features import EDGE_FEATURES, GRAPH_FEATURES, NODE_FEATURES, OP_VOCAB

ROOT = Path(__file__).resolve().parents[2]


def gnnperf(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gnnperf.cli", *args], capture_output=True, text=True, cwd=ROOT
    )


def test_graph_json(tmp_path):
    res = gnnperf(
        "graph",
        "tests.graph.factories:residual",
        "--input-shape",
        "8,6,6",
        "--batch-size",
        "4",
        "--json",
        "--no-cache",
    )
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert {"model", "batch_size", "num_nodes", "num_edges", "flops", "params", "op_counts"} <= set(out)
    assert out["batch_size"] == 4 and out["op_counts"]["Conv"] == 2
    assert out["flops"] > out["mat_flops"] == 2 * 2 * 4 * 8 * 36 * 8 * 9


@pytest.mark.parametrize(
    "args,pattern",
    [
        (["timm:resnet5"], r"unknown timm model 'resnet5' \(did you mean: .*resnet50"),
        (["torchvision:resnett18"], r"did you mean: resnet18"),
        (["nonsense"], r"unknown model reference"),
        (["timm:resnet18", "--input-shape", "3,x"], r"bad input shape"),
        (
            ["timm:resnet18", "--input-shape", "2,32,32"],
            # the dynamo exporter's cause, not its advice ("This is step 1/3 ... Next steps:")
            r"export of timm:resnet18 failed; torchscript exporter: .*; dynamo exporter: RuntimeError: Given groups",
        ),
        (
            ["tests.graph.factories:broken", "--input-shape", "3"],
            r"export of tests.graph.factories:broken failed",
        ),
        (["tests.graph.factories:not_a_module", "--input-shape", "3"], r"not a torch.nn.Module"),
        (["zoo:resnet?width=abc"], r"width"),
        (["timm:resnet18", "--batch-size", "0"], r"--batch-size"),
        (["timm:resnet18", "--top", "-1"], r"--top must be at least 1"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, pattern):
    res = gnnperf("graph", *args, "--no-cache")
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert re.search(pattern, lines[0]), lines[0]


def test_unreadable_onnx_file(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00not an onnx model")
    res = gnnperf("graph", str(bad))
    assert res.returncode == 2 and res.stderr.startswith("gnnperf graph: error: cannot read ONNX file")
    missing = gnnperf("graph", str(tmp_path / "missing.onnx"))
    assert missing.returncode == 2 and "not found" in missing.stderr


def test_readme_documents_every_feature():
    readme = (ROOT / "README.md").read_text()
    for name, _ in NODE_FEATURES + EDGE_FEATURES + GRAPH_FEATURES:
        if not name.startswith(("op=", "dtype=")):
            assert f"`{name}`" in readme, name
    assert all(op in readme for op in OP_VOCAB)
