"""timm and torch_geometric load without wandb and transformers, which stay importable afterwards."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from gnnperf.imports import import_pyg, import_timm
import_timm(); import_pyg()
print(sorted({m.split('.')[0] for m in sys.modules} & {'wandb', 'transformers'}))
import transformers, wandb
print(sys.modules['transformers'] is not None and sys.modules['wandb'] is not None)
"""


def test_timm_and_pyg_load_without_their_optional_imports_which_still_work_after():
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split("\n")[:2] == ["[]", "True"]
