"""``make demo``: the graph front end on a few real models (op tables), until the predictor lands."""

from __future__ import annotations

import sys

from gnnperf.cli import main as cli_main

MODELS = [
    ("timm:resnet50", ["--batch-size", "32"]),
    ("timm:vit_base_patch16_224", ["--batch-size", "32"]),
    ("torchvision:mobilenet_v2", ["--batch-size", "64"]),
    ("zoo:gpt?layers=4&d_model=256&heads=4&seq_len=128", ["--batch-size", "8", "--top", "8"]),
]


def main() -> int:
    for ref, extra in MODELS:
        rc = cli_main(["graph", ref, "--top", "8", *extra])
        if rc:
            return rc
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
