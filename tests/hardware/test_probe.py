from types import SimpleNamespace

import numpy as np
import pytest
import torch

from gnnperf.errors import GnnperfError
from gnnperf.hardware.probe import probe, slugify
from gnnperf.hardware.table import get_spec, spec_from_dict, spec_to_dict
from gnnperf.hardware.vector import hardware_vector


def test_cpu_probe_names_carry_the_thread_count():
    one = probe("cpu", threads=1, measure=False)
    two = probe("cpu", threads=2, measure=False)
    assert one.name.startswith("cpu-") and one.name.endswith("-1t") and two.name.endswith("-2t")
    assert one.name[:-3] == two.name[:-3]
    assert one.kind == "cpu" and one.threads == 1 and one.sm_count >= 1
    assert one.peak_fp32_tflops is None and "not measured" in one.source
    assert hardware_vector(one).shape == hardware_vector(get_spec("rtx-3090")).shape


def test_a_tag_names_one_host_apart_from_another_of_its_brand_string():
    plain, tagged = (probe("cpu", threads=1, measure=False, tag=t) for t in (None, "host-b"))
    assert tagged.name == plain.name[:-3] + "-host-b-1t"
    # its display name, which the table looks names up by too, is its own
    assert tagged.display_name == plain.display_name.replace("(1 thread)", "(host-b, 1 thread)")
    with pytest.raises(GnnperfError, match="lower-case letters"):
        probe("cpu", threads=1, measure=False, tag="Host B")


def test_cpu_probe_default_threads_follow_torch():
    assert probe(measure=False).threads == torch.get_num_threads()


def test_cpu_probe_measures_and_restores_threads():
    before = torch.get_num_threads()
    spec = probe("cpu", threads=1, measure=True)
    assert torch.get_num_threads() == before
    assert spec.peak_fp32_tflops > 0 and spec.mem_bandwidth_gbs > 0
    assert "measured matmul" in spec.source
    vec = hardware_vector(spec)
    assert not np.isnan(vec).any()
    # A probe record survives JSON and gives the same vector.
    assert np.array_equal(hardware_vector(spec_from_dict(spec_to_dict(spec))), vec)


def test_bad_device_and_threads():
    with pytest.raises(GnnperfError, match="unknown device"):
        probe("tpu", measure=False)
    with pytest.raises(GnnperfError, match="threads"):
        probe("cpu", threads=0, measure=False)


def test_a_bad_spec_file_is_an_error_on_a_cpu_too(tmp_path):
    (tmp_path / "broken.json").write_text("{not json")
    for extra in (tmp_path / "broken.json", tmp_path / "missing.json"):
        with pytest.raises(GnnperfError, match="broken.json: cannot read|missing.json not found"):
            probe("cpu", threads=1, measure=False, extra=extra)


def test_slugify():
    assert slugify("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz") == "intel-xeon-gold-6248"
    assert slugify("AMD EPYC 7763 64-Core Processor") == "amd-epyc-7763-64-core"


def _fake_cuda(monkeypatch, name):
    props = SimpleNamespace(
        name=name,
        multi_processor_count=108,
        total_memory=40 * 10**9,
        L2_cache_size=40 * 2**20,
        major=8,
        minor=0,
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: props)


def test_cuda_probe_matches_the_table(monkeypatch):
    _fake_cuda(monkeypatch, "NVIDIA A100-SXM4-40GB")
    spec = probe("cuda", measure=False)
    table = get_spec("a100-sxm4-40gb")
    assert spec.name == table.name and "matched 'NVIDIA A100-SXM4-40GB'" in spec.source
    assert np.array_equal(hardware_vector(spec), hardware_vector(table))


def test_cuda_probe_of_an_unknown_gpu(monkeypatch):
    _fake_cuda(monkeypatch, "NVIDIA Future GPU X")
    spec = probe("cuda:0", measure=False)
    assert spec.name == "cuda-nvidia-future-gpu-x" and spec.sm_count == 108 and spec.l2_cache_mb == 40
    assert spec.peak_fp32_tflops is None and not np.isnan(hardware_vector(spec)).any()


def test_rates_are_timed_for_at_least_min_seconds(monkeypatch):
    from gnnperf.hardware import probe as probe_module

    clock = iter(range(1000))  # every perf_counter() call advances one second
    monkeypatch.setattr(probe_module.time, "perf_counter", lambda: float(next(clock)))
    calls = []
    rate = probe_module._median_rate(lambda: calls.append(1), work=2.0, reps=2, min_seconds=9.0)
    assert rate == 2.0  # each timed call spans one tick: 2 units of work per second
    # one warm-up; then timed calls (start at t=0, calls at t=1-2, 3-4, 6-7, 9-10) until nine seconds have passed
    assert len(calls) == 1 + 4
    assert probe_module._median_rate(lambda: calls.append(1), work=2.0, reps=2) == 2.0
    assert len(calls) == 5 + 1 + 2  # without min_seconds: the reps only
