"""gnnperf-generate: composition, resumability (SIGKILL mid-run), sweeps through the submitit local launcher."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir

from gnnperf.apps import CONF_DIR
from gnnperf.apps.generate import generate, save_hardware_record
from gnnperf.data.generate import plan_samples
from gnnperf.data.store import SampleStore
from gnnperf.errors import GnnperfError
from gnnperf.hardware.probe import probe
from gnnperf.hardware.table import spec_to_dict
from gnnperf.measure.harness import library_versions
from gnnperf.measure.workload import MeasureSettings

ROOT = Path(CONF_DIR).parent
FAST = [
    "zoo=smoke",
    "zoo.families=[mlp]",
    "zoo.samples_per_family=2",
    "+zoo.overrides.mlp={width: 32, depth: 2, in_features: 16}",
    "workload.batch_sizes=[2,4]",
    "measure.settings.warmup=1",
    "measure.settings.min_iters=3",
    "measure.settings.max_iters=5",
    "build_graphs=false",
]


def cfg(*overrides: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
        return compose(config_name="generate", overrides=list(overrides))


def test_plan_is_seeded_and_stable():
    c = cfg("zoo=cpu_small", "zoo.samples_per_family=3")
    a = list(plan_samples(c.zoo, c.workload))
    b = list(plan_samples(c.zoo, c.workload))
    assert a == b
    assert len(a) == len(c.zoo.families) * 3 * len(c.workload.batch_sizes)
    assert len({p.family for p in a}) == len(c.zoo.families)


def test_named_models_can_carry_their_own_batch_sizes():
    c = cfg("zoo=timm_rtx3090_train", "workload=timm_train")
    plan = list(plan_samples(c.zoo, c.workload))
    assert len(plan) == len(c.zoo.models) == 58  # one batch size each, the RTX 3090 table's
    first = plan[0]
    assert (first.model_ref, first.workload.batch_size) == ("timm:levit_192", 512)
    assert {(p.workload.precision, p.workload.optimizer, p.workload.timed) for p in plan} == {
        ("amp_fp16", "sgd", "fwd+bwd+opt")
    }
    mixed = {"models": ["timm:resnet18", {"ref": "timm:resnet18", "batch_sizes": [3, 5]}]}
    batches = [p.workload.batch_size for p in plan_samples(mixed, {"batch_sizes": [7]})]
    assert batches == [7, 3, 5]


def test_optimizer_draw_each_times_every_optimizer_on_the_same_step():
    c = cfg("zoo=cpu_optimizers", "workload=cpu_train_optimizers")
    plan = list(plan_samples(c.zoo, c.workload))
    steps: dict[tuple, list] = {}
    for p in plan:
        steps.setdefault((p.model_ref, p.workload.batch_size), []).append(p.workload)
    assert len(steps) == len(c.zoo.families) * 3 + len(c.zoo.models)
    for workloads in steps.values():
        assert [(w.optimizer, w.timed) for w in workloads] == [
            ("none", "fwd+bwd"), ("sgd", "fwd+bwd+opt"), ("adam", "fwd+bwd+opt"), ("adamw", "fwd+bwd+opt")
        ]  # fmt: skip
        assert len({replace(w, optimizer="none", timed="fwd+bwd") for w in workloads}) == 1
    # the GPU plan of experiments/optimizer_step/measure_gpu.sh
    gpu = cfg("zoo=gpu_optimizers", "workload=gpu_train_optimizers")
    assert len(list(plan_samples(gpu.zoo, gpu.workload))) == 8 * 4
    # the committed CPU store's first configurations of each family, so the two stores share models
    small = cfg("zoo=cpu_small", "zoo.samples_per_family=3")
    assert {p.model_ref for p in plan_samples(small.zoo, small.workload)} <= set(r for r, _ in steps)


@pytest.mark.parametrize(
    "workload, says",
    [
        ({"optimizer_draw": "all"}, "bad workload.optimizer_draw 'all'"),
        ({"optimizer_draw": "each", "timed": "fwd+bwd"}, "it needs mode train and timed"),
    ],
)
def test_bad_optimizer_draw_is_a_user_error(workload, says):
    with pytest.raises(GnnperfError, match=says):
        list(plan_samples({"models": ["timm:resnet18"]}, {"batch_sizes": [2], **workload}))


@pytest.mark.parametrize(
    "entry",
    [
        {"ref": "timm:resnet18", "batch": [3]},
        {"batch_sizes": [3]},
        {"ref": "timm:resnet18", "batch_sizes": []},
    ],
)
def test_bad_named_model_entry_is_a_user_error(entry):
    with pytest.raises(GnnperfError, match="bad zoo.models entry"):
        list(plan_samples({"models": [entry]}, {"batch_sizes": [2]}))


def test_generate_then_rerun_skips_everything(tmp_path):
    out = tmp_path / "store"
    first = generate(cfg(*FAST, f"out_dir={out}"))
    assert first["ok"] == 4 and first["stored"] == 4
    # the model libraries' versions are kept with each row, outside its identity
    assert set(SampleStore(out).read()["libraries"]) == {library_versions()}
    assert library_versions().startswith("timm=")
    second = generate(cfg(*FAST, f"out_dir={out}"))
    assert second["skipped"] == 4 and second.get("ok", 0) == 0 and second["stored"] == 4


def test_unknown_family_and_unwritable_dir_are_user_errors(tmp_path):
    with pytest.raises(GnnperfError, match="unknown zoo family"):
        generate(cfg(*FAST, "zoo.families=[nosuch]", f"out_dir={tmp_path}"))
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(GnnperfError, match="not writable"):
        generate(cfg(*FAST, f"out_dir={blocker}/sub"))


def test_an_unknown_hardware_name_fails_a_dry_run_too():
    with pytest.raises(GnnperfError, match="unknown hardware 'nonexistent-gpu'"):
        generate(cfg(*FAST, "dry_run=true", "hardware.name=nonexistent-gpu"))


@pytest.mark.parametrize(
    "override, says",
    [
        (
            "hardware.name=a100-sxm4-40gb",
            "is a gpu, but the measurements run on the cpu",
        ),  # rows would be mislabelled
        ("limit=-1", "limit: expected an integer of at least 1"),
        ("limit=abc", "limit: expected an integer"),
        ("zoo.seed=abc", "zoo.seed: expected an integer"),
        ("zoo.samples_per_family=abc", "zoo.samples_per_family: expected an integer"),
        ("zoo.samples_per_family=2.5", "zoo.samples_per_family: expected an integer, got 2.5"),
        ("zoo.samples_per_family=-3", "zoo.samples_per_family: expected an integer of at least 0"),
        ("workload.batch_sizes=[2,abc]", "workload.batch_sizes: expected an integer"),
        ("measure.timeout_s=-1", "measure.timeout_s: expected a number of at least 1"),
        ("shard_every=0", "shard_every: expected an integer of at least 1"),
        ("workload.precisions=[fp32,tf32]", "tf32 is a CUDA tensor-core mode"),  # drawn for a later sample
        ("hardware.tag=Host", "lower-case letters"),
    ],
)
def test_bad_generate_values_measure_nothing(tmp_path, override, says):
    out = tmp_path / "store"
    with pytest.raises(GnnperfError, match=says):
        generate(cfg(*FAST, f"out_dir={out}", override))
    assert not out.exists() or not SampleStore(out, readonly=True).shards()


def test_a_named_cpu_entry_at_another_thread_count_is_refused():
    record = ROOT / "datasets" / "cpu" / "hardware" / "cpu-intel-xeon-1t.json"  # a committed probe record
    args = (*FAST, "dry_run=true", "hardware.name=cpu-intel-xeon-1t", f"hardware.file={record}")
    assert generate(cfg(*args, "measure.settings.threads=1")) == {"planned": 4}
    with pytest.raises(GnnperfError, match="is 1 thread.*measure.settings.threads=2"):
        generate(cfg(*args, "measure.settings.threads=2"))


def test_a_stored_record_of_another_machine_under_this_name_is_refused(tmp_path):
    spec = probe("cpu", threads=1, measure=False)
    save_hardware_record(tmp_path, spec)
    save_hardware_record(tmp_path, replace(spec, peak_fp32_tflops=1.0))  # a measured figure: the same machine
    other = replace(spec, l2_cache_mb=(spec.l2_cache_mb or 0) + 1)  # another host CPU, one brand string
    with pytest.raises(
        GnnperfError, match=r"another machine than this one \(l2_cache_mb .* hardware.tag=NAME"
    ):
        save_hardware_record(tmp_path, other)
    stored = json.loads((tmp_path / "hardware" / f"{spec.name}.json").read_text())
    assert stored == spec_to_dict(spec)


def test_a_stored_record_probed_at_other_rates_is_warned_about(tmp_path, caplog):
    spec = replace(probe("cpu", threads=1, measure=False), peak_fp32_tflops=0.118)
    save_hardware_record(tmp_path, spec)
    save_hardware_record(tmp_path, replace(spec, peak_fp32_tflops=0.13))  # the same machine, probed again
    assert not caplog.records
    save_hardware_record(tmp_path, replace(spec, peak_fp32_tflops=0.156))  # a loaded machine, or another host
    assert "measured peak_fp32_tflops 0.118 vs 0.156" in caplog.text and "hardware.tag=NAME" in caplog.text


def test_run_plan_measures_a_repeated_entry_once_and_retries_failures_when_asked(tmp_path, monkeypatch):
    from gnnperf.data.generate import run_plan
    from gnnperf.measure import runner
    from gnnperf.measure.timing import result

    outcome = {"status": "error"}

    def fake(ref, workload, settings, timeout_s):
        return result("error", "boom") if outcome["status"] == "error" else result("ok", None, [10**6] * 3)

    monkeypatch.setattr(runner, "run_measurement", fake)
    ref = "zoo:mlp?depth=2&in_features=16&width=32"
    plan = list(
        plan_samples({"models": [ref, ref, ref.replace("width=32", "width=64")]}, {"batch_sizes": [2]})
    )
    store, settings = SampleStore(tmp_path), MeasureSettings()
    run = lambda **kw: run_plan(plan, store, settings, "cpu-x-1t", "sw", progress=False, **kw)  # noqa: E731
    assert run(limit=1) == {"skipped": 0, "repeated": 1, "left": 1, "error": 1}
    assert run() == {"skipped": 2, "error": 1}  # a failure stays stored as measured
    outcome["status"] = "ok"
    assert run(retry_failed=True) == {"skipped": 0, "repeated": 1, "ok": 2}
    assert list(store.read()["status"]) == ["ok", "ok"]


def test_a_dry_run_writes_nothing(tmp_path, capsys):
    assert generate(cfg(*FAST, f"out_dir={tmp_path / 'store'}", "dry_run=true")) == {"planned": 4}
    assert not (tmp_path / "store").exists() and "zoo:mlp?" in capsys.readouterr().out


def _cli(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gnnperf.apps.generate", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def test_invalid_config_key_exits_nonzero(tmp_path):
    proc = _cli("zoo.nokey=3", f"out_dir={tmp_path}")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and err.startswith("gnnperf-generate: error:") and "nokey" in err, err
    assert len(err.strip().splitlines()) == 1 and not any(tmp_path.iterdir())


def test_sigkill_mid_run_then_rerun_keeps_each_sample_once(tmp_path):
    out = tmp_path / "store"
    args = [*FAST, "zoo.samples_per_family=4", "shard_every=1", f"out_dir={out}"]
    # Each sample in its own process (seconds each), so the kill lands mid-run even when this machine is busy
    # and the in-process run would finish its 8 tiny samples before the poll below sees them.
    proc = _cli(*args, "measure.settings.isolate=true", start_new_session=True)
    store = SampleStore(out) if out.exists() else None
    deadline = time.time() + 180
    while time.time() < deadline:  # kill once some, not all, samples are stored
        if out.exists():
            store = SampleStore(out)
            if len(store.shards()) >= 2:
                break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    kept = set(SampleStore(out).read()["sample_id"])
    assert 2 <= len(kept) < 8
    rerun = _cli(*args)
    _, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    df = SampleStore(out).read(dedup=False)
    assert len(df) == 8 and df["sample_id"].is_unique
    assert kept <= set(df["sample_id"])


def test_sigterm_mid_run_flushes_what_was_measured(tmp_path):
    out, run_dir = tmp_path / "store", tmp_path / "run"
    args = [
        *FAST,
        "zoo.samples_per_family=4",
        "shard_every=100",
        f"out_dir={out}",
        f"hydra.run.dir={run_dir}",
    ]
    proc = _cli(*args, "measure.settings.isolate=true", start_new_session=True)  # seconds per sample
    deadline = time.time() + 180
    while time.time() < deadline:  # terminate once one sample is measured, none flushed (shard_every=100)
        logs = list(run_dir.glob("*.log"))
        if logs and " ok " in logs[0].read_text():
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted; samples measured so far are in" in err, err
    assert 1 <= len(SampleStore(out).read()) < 8


def test_sweep_through_submitit_local_launcher(tmp_path):
    out = tmp_path / "store"
    proc = _cli(
        "-m",
        "hydra/launcher=local_submitit",
        f"hydra.sweep.dir={tmp_path}/sweep",
        *FAST,
        "zoo.samples_per_family=1",
        "measure.settings.threads=1,2",
        f"out_dir={out}",
    )
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    df = SampleStore(out).read()
    assert set(df["hardware"].str[-2:]) == {"1t", "2t"} and len(df) == 4
