"""Stand-in per-model jobs for the prebuild tests (top-level, so spawned workers can import them)."""

from __future__ import annotations

import os
import signal
from typing import Any

KILLED = "zoo:killed"  # the model whose worker the system kills, as the OOM killer would


def fake_build(job: tuple[str, str, str, int]) -> dict[str, Any]:
    ref, shape = job[0], job[1]
    if ref == KILLED:
        os.kill(os.getpid(), signal.SIGKILL)
    return {"model_ref": ref, "input_shape": shape, "ok": True, "seconds": 0.0}
