"""Running a measurement from a model reference, in-process or in a fresh subprocess.

:func:`run_isolated` starts ``python -m gnnperf.measure.runner``, sends the request as JSON on stdin and reads
the result as JSON from the child's original stdout (anything the model prints goes to stderr instead). A
segfault, a kill (e.g. by the out-of-memory killer) or a hang then costs one sample, reported as status
``error``, and leaves no state (allocator caches, thread pools, leaked tensors) behind for the next one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from typing import Any

from gnnperf.measure.workload import MeasureSettings, Workload

_STDERR_TAIL_CHARS = 300


def measure_ref(ref: str, workload: Workload, settings: MeasureSettings) -> dict[str, Any]:
    """Resolve and build ``ref`` (random weights) in this process and measure it.

    A reference that does not resolve or a model that fails to build is status ``error``; only a request the
    machine cannot serve at all raises :class:`gnnperf.errors.GnnperfError` (see ``check_supported``).
    """
    from gnnperf.measure.harness import build_model, check_supported, classify_error, measure, result
    from gnnperf.zoo.resolve import resolve

    check_supported(workload, settings)
    try:
        spec = resolve(ref)
        model = build_model(spec, workload)
    except Exception as e:  # noqa: BLE001 - a bad model costs one sample
        return result(*classify_error(e))
    return measure(spec, workload, settings, model=model)


def run_measurement(
    ref: str, workload: Workload, settings: MeasureSettings, timeout_s: float = 600.0
) -> dict[str, Any]:
    """:func:`run_isolated` when ``settings.isolate`` is set, else :func:`measure_ref`."""
    if settings.isolate:
        return run_isolated(ref, workload, settings, timeout_s)
    return measure_ref(ref, workload, settings)


def run_isolated(ref: str, workload: Workload, settings: MeasureSettings, timeout_s: float) -> dict[str, Any]:
    """Measure ``ref`` in a fresh Python process; a crash, kill or timeout becomes status ``error``.

    The child sees the same ``sys.path`` as this process, so ``package.module:factory`` references that
    import here import there.
    """
    from gnnperf.measure.harness import check_supported, result

    check_supported(workload, settings)  # a user error raises here, not once per sample in a child
    request = json.dumps({"ref": ref, "workload": workload.to_dict(), "settings": settings.to_dict()})
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([p for p in sys.path if p] + [os.getcwd()])
    env["PYTHONUNBUFFERED"] = "1"
    # Own session: on timeout the whole process group (with any workers it started) is killed.
    proc = subprocess.Popen(
        [sys.executable, "-m", "gnnperf.measure.runner"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(request.encode(), timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        return result("error", f"timeout after {timeout_s:g} s")
    finally:
        if proc.poll() is None:  # e.g. KeyboardInterrupt while waiting
            _kill_group(proc)
            proc.wait()
    if proc.returncode != 0:
        return result("error", f"{_describe_exit(proc.returncode)}{_tail(err)}")
    try:
        res = json.loads(out.decode().strip().splitlines()[-1])
    except (IndexError, ValueError, UnicodeDecodeError):
        return result("error", f"measurement process wrote no result{_tail(err)}")
    if res.get("user_error"):
        from gnnperf.errors import GnnperfError

        raise GnnperfError(res["user_error"])
    return res


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (possibly the out-of-memory killer)" if -code == signal.SIGKILL else ""
        return f"measurement process killed by {name}{hint}"
    return f"measurement process exited with code {code}"


def _tail(err: bytes) -> str:
    lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
    return f": {lines[-1].strip()[-_STDERR_TAIL_CHARS:]}" if lines else ""


def _child() -> None:
    """Child side: request on stdin, result as one JSON line on the original stdout."""
    from gnnperf.errors import GnnperfError

    result_fd = os.dup(1)
    os.dup2(2, 1)  # whatever the model prints must not corrupt the result line
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.read())
    try:
        workload = Workload.from_dict(request["workload"])
        settings = MeasureSettings.from_dict(request["settings"])
        res = measure_ref(request["ref"], workload, settings)
    except GnnperfError as e:
        res = {"user_error": str(e)}
    with os.fdopen(result_fd, "w") as f:
        f.write(json.dumps(res) + "\n")
    sys.stderr.flush()
    # Skip interpreter teardown: some native libraries crash in their destructors, which would turn a
    # finished measurement into a failed one; the process is about to end anyway.
    os._exit(0)


if __name__ == "__main__":
    _child()
