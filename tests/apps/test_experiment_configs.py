"""Every experiment config composes into a training config; derived experiments change only what they say."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from gnnperf.apps import CONF_DIR
from gnnperf.data.sources.torchvision_bench import CODE_2018, SOFTWARE
from gnnperf.data.store import select_samples, selection

EXPERIMENTS = sorted(p.stem for p in (Path(CONF_DIR) / "experiment").glob("*.yaml"))


def composed(experiment: str):
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="test"):
        return compose(config_name="train", overrides=[f"experiment={experiment}"])


def train_config(experiment: str) -> dict:
    return OmegaConf.to_container(composed(experiment), resolve=False)


def used(experiment: str) -> str | None:
    """The selection the experiment's dataset applies: ``data.query`` without the rows ``data.exclude`` names."""
    data = OmegaConf.to_container(composed(experiment).data, resolve=False)
    return selection(data["query"], data["exclude"])


def with_store(store: str) -> list[str]:
    return [e for e in EXPERIMENTS if f".cache/stores/{store}" in composed(e).data.stores]


def split_kwargs(experiment: str) -> dict:
    """The experiment's split options as the split receives them (``test_query`` may follow ``family_query``)."""
    return OmegaConf.to_container(composed(experiment).split.kwargs, resolve=True)


def without(cfg: dict, *paths: str) -> dict:
    """``cfg`` with the dotted ``paths`` deleted (in place)."""
    for path in paths:
        *parents, leaf = path.split(".")
        node = cfg
        for key in parents:
            node = node[key]
        del node[leaf]
    return cfg


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_experiment_config_composes(experiment: str) -> None:
    cfg = train_config(experiment)
    assert cfg["task_name"] in (experiment, "train")  # quick keeps train's name
    assert cfg["data"]["stores"] and cfg["split"]["name"] and cfg["model"]["readout"]


def test_releases_experiment_is_the_every_table_one_with_the_older_release_in_training_only() -> None:
    base, releases = train_config("timm_train_family_all"), train_config("timm_train_family_releases")
    assert releases["data"]["stores"] == [
        ".cache/stores/timm",
        ".cache/stores/timm_pt111",
        *(s for s in base["data"]["stores"] if s != ".cache/stores/timm"),
    ]
    scored = "software == 'torch=1.12+cu113'"
    base_kw, releases_kw = split_kwargs("timm_train_family_all"), split_kwargs("timm_train_family_releases")
    for key in ("family_query", "test_query"):  # the folds and the scored rows of timm_train_family_all
        assert releases_kw[key] == f"{base_kw[key]} and {scored}"
    assert releases["model"]["readout"] == "roofline_scaled"
    assert (
        releases["data"]["pool_software"] and not base["data"]["pool_software"]
    )  # 1.11 and 1.12 rows of one input
    changed = ("task_name", "data.stores", "data.root", "data.pool_software", "split.kwargs.family_query")
    assert without(releases, *changed, "model.readout") == without(base, *changed, "model.readout")


def test_releases_infer_experiment_changes_only_the_inference_rows() -> None:
    releases = train_config("timm_train_family_releases")
    infer = train_config("timm_train_family_releases_infer")
    stores = releases["data"]["stores"]
    assert infer["data"]["stores"] == [*stores[:2], ".cache/stores/timm_pt112infer", *stores[2:]]
    rows = pd.DataFrame(  # (source, mode, software, hardware, memory_format, precision, selected)
        [
            ("timm-benchmark", "train", "torch=1.12+cu113", "rtx-3090", "channels_last", "amp_fp16", True),
            ("timm-benchmark", "train", "torch=1.11+cu113", "rtx-3090", "contiguous", "amp_fp16", True),
            ("timm-benchmark", "infer", "torch=1.12+cu113", "rtx-3090", "channels_last", "amp_fp16", True),
            ("timm-benchmark", "infer", "torch=1.12+cu113", "rtx-3090", "contiguous", "amp_fp16", True),
            ("timm-benchmark", "infer", "torch=2.4.0+cu124", "rtx-3090", "contiguous", "amp_fp16", False),
            ("timm-benchmark", "infer", "torch=1.13+cu117", "rtx-3090", "contiguous", "amp_fp16", False),
            ("timm-benchmark", "infer", "torch=2.4.0+cu124", "rtx-4090", "contiguous", "amp_fp16", True),
            ("timm-benchmark", "infer", "torch=2.4.0+cu124", "rtx-4090", "channels_last", "amp_fp16", False),
            (
                "pytorch-gpu-benchmark",
                "train",
                SOFTWARE["2080ti(2)"],
                "rtx-2080-ti",
                "contiguous",
                "fp16",
                True,
            ),
            (
                "pytorch-gpu-benchmark",
                "train",
                SOFTWARE["2080ti(2)"],
                "rtx-2080-ti",
                "contiguous",
                "fp64",
                False,
            ),
            ("neusight", "train", "torch=2.1.0+transformers=4.38.1", "t4", "contiguous", "fp32", True),
            (
                "neusight",
                "infer",
                "torch=2.1.0+transformers=4.38.1+compile",
                "l4",
                "contiguous",
                "fp32",
                False,
            ),
        ],
        columns=["source", "mode", "software", "hardware", "memory_format", "precision", "selected"],
    )
    selected = select_samples(rows, used("timm_train_family_releases_infer"))
    assert selected.index.tolist() == rows.index[rows["selected"]].tolist()
    changed = ("task_name", "data.stores", "data.root", "data.query")
    assert without(infer, *changed) == without(releases, *changed)


def test_nhwc112_experiment_adds_one_exclusion_to_the_releases_one() -> None:
    releases = train_config("timm_train_family_releases")
    nhwc112 = train_config("timm_train_family_releases_nhwc112")
    added = nhwc112["data"]["exclude"].pop("torch111_channels_last")
    assert "torch=1.11+cu113" in added and "channels_last" in added
    changed = ("task_name", "data.root")
    assert without(nhwc112, *changed) == without(releases, *changed)


def test_selection_leaves_out_every_named_exclusion_that_is_set() -> None:
    rows = pd.DataFrame({"a": [1, 2, 3, 4]})
    assert selection(None) is None and selection("a > 1", {"off": None}) == "a > 1"
    assert select_samples(rows, selection("a > 1", {"three": "a == 3", "off": None}))["a"].tolist() == [2, 4]
    assert select_samples(rows, selection(None, {"one": "a == 1", "two": "a == 2"}))["a"].tolist() == [3, 4]


@pytest.mark.parametrize("experiment", with_store("neusight"))
def test_neusight_rows_are_the_eager_single_gpu_runs_only(experiment: str) -> None:
    """No feature tells NeuSight's torch.compile rows or its Megatron 4-GPU runs (data, tensor or pipeline parallel,
    452-1,598 ms for one workload) from its eager rows of the same model, batch and device: they stay out."""
    rows = pd.DataFrame(
        {
            "software": [
                "torch=2.1.0+transformers=4.38.1",
                "torch=2.1.0+transformers=4.38.1+compile",
                "torch=2.1.0+megatron+dp4",
                "torch=2.1.0+megatron+pp4_1",
            ],
            "num_devices": [1, 1, 4, 4],
        }
    ).assign(
        source="neusight",
        mode="train",
        precision="fp32",
        memory_format="contiguous",
        hardware="a100-sxm4-40gb",
    )
    selected = select_samples(rows, used(experiment))
    assert selected["software"].tolist() == ["torch=2.1.0+transformers=4.38.1"]


def test_every_experiment_keeps_one_run_of_the_rtx_2080_ti() -> None:
    """The torchvision benchmark's RTX 2080 Ti folder holds four runs of one workload that only ``software`` tells
    apart (torch 1.4, an unrecorded older set-up, the 2018 code on two cards): every experiment that selects the
    benchmark's rows keeps the torch 1.4 run, the full grid the other GPUs have."""
    card = [f"+gpu{k}" for k in (1, 2)]
    runs = [SOFTWARE["2080ti(2)"], SOFTWARE["2080TI"], *(SOFTWARE["2080TI"] + CODE_2018 + c for c in card)]
    rows = pd.DataFrame({"software": [*runs, SOFTWARE["TitanRTX"]]}).assign(
        source="pytorch-gpu-benchmark",
        mode="train",
        precision="fp32",
        memory_format="contiguous",
        num_devices=1,
        hardware=["rtx-2080-ti"] * len(runs) + ["titan-rtx"],
    )
    selecting = with_store("torchvision")
    for experiment in selecting:
        selected = select_samples(rows, used(experiment))
        assert selected["software"].tolist() == [SOFTWARE["2080ti(2)"], SOFTWARE["TitanRTX"]], experiment
    assert len(selecting) >= 10


def test_releases_pt110_experiment_adds_only_the_torch_1_10_store() -> None:
    releases = train_config("timm_train_family_releases")
    pt110 = train_config("timm_train_family_releases_pt110")
    stores = releases["data"]["stores"]
    assert pt110["data"]["stores"] == [*stores[:2], ".cache/stores/timm_pt110", *stores[2:]]
    changed = ("task_name", "data.stores", "data.root")
    assert without(pt110, *changed) == without(releases, *changed)


def test_a_user_error_hydra_wrapped_is_one_line_and_exit_2(capsys):
    from hydra.errors import InstantiationException

    from gnnperf.apps import user_errors
    from gnnperf.errors import GnnperfError

    with pytest.raises(SystemExit) as ended, user_errors("gnnperf-train"):
        try:  # what hydra.utils.instantiate does with what a target raises
            raise GnnperfError("unknown backbone 'bogus'")
        except GnnperfError as e:
            raise InstantiationException("Error in call to target 'PerfModule':\n...") from e
    assert ended.value.code == 2
    assert capsys.readouterr().err == "gnnperf-train: error: unknown backbone 'bogus'\n"
    with pytest.raises(ValueError), user_errors("gnnperf-train"):  # a bug still raises
        raise ValueError("a bug")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("split.fold=abc", "fold: expected an integer, got 'abc'"),
        ("seed=x", "seed: expected an integer, got 'x'"),
        ("data.batch_size=big", "data.batch_size: expected an integer, got 'big'"),
        ("interval=1.5", "interval: expected a coverage between 0 and 1, got 1.5"),
    ],
)
def test_a_mistyped_number_on_the_command_line_is_one_line_before_any_work(override, message, capsys):
    from gnnperf.apps import user_errors
    from gnnperf.apps.train import train

    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="test"):
        cfg = compose(config_name="train", overrides=[override, "data.root=/nonexistent/never-created"])
    with pytest.raises(SystemExit) as ended, user_errors("gnnperf-train"):
        train(cfg)
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"gnnperf-train: error: {message}\n"
    assert not Path("/nonexistent/never-created").exists()


def test_entry_points_drop_lightnings_logger_advertisement_and_keep_its_other_lines(caplog):
    import logging

    from gnnperf.errors import quiet_library_warnings

    quiet_library_warnings()
    rank_zero = logging.getLogger("pytorch_lightning.utilities.rank_zero")
    with caplog.at_level(logging.INFO, logger=rank_zero.name):
        rank_zero.info(
            "💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger]"
        )
        rank_zero.info("GPU available: False, used: False")
    assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["model=foo"],
            "In 'train': Could not find 'model/foo'; Available options in 'model': gatv2, gine, gps, transformer",
        ),
        (
            ["foo.bar=1"],
            "Could not override 'foo.bar'; To append to your config use +foo.bar=1; Key 'foo' is not in struct",
        ),
        (
            ["logger=null"],
            "Config group override must be a string or a list. Got NoneType",
        ),  # a traceback from Hydra
        (["split.fold=0,1"], "Ambiguous value for argument 'split.fold=0,1'"),
        (
            ["-m", "split.fold=0,1", "model=gine,foo"],
            "Could not find 'model/foo'",
        ),  # a later value of a sweep
        (["-m", "split.fold=0,9"], "holdout_family fold 9 is not below num_folds 5"),  # before fold 0 trains
        (["-m", "interval=0.9,1.5"], "interval: expected a coverage between 0 and 1, got 1.5"),
    ],
)
def test_a_bad_hydra_command_line_is_one_line_and_exit_2_before_hydra_runs(argv, message, capsys):
    from gnnperf.apps import check_command_line
    from gnnperf.apps.train import check_before_fit

    with pytest.raises(SystemExit) as ended:
        check_command_line("gnnperf-train", "train", argv, check=check_before_fit)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("gnnperf-train: error: ") and message in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    "argv",
    [
        ["experiment=torchvision_lodo", "model.readout=opcost", "hydra.run.dir=/tmp/x"],
        ["-m", "experiment=torchvision_lodo", "split.fold=0,1,2,3", "seed=range(0,3)", "model=glob(g*)"],
        ["--help"],
    ],
)
def test_a_good_hydra_command_line_passes_the_check(argv, capsys):
    from gnnperf.apps import check_command_line
    from gnnperf.apps.train import check_before_fit

    check_command_line("gnnperf-train", "train", argv, check=check_before_fit)
    assert capsys.readouterr().err == ""


def test_gnnperf_eval_without_a_checkpoint_is_one_line(capsys):
    from gnnperf.apps import check_command_line

    with pytest.raises(SystemExit) as ended:
        check_command_line("gnnperf-eval", "eval", ["split.fold=1"])
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err == "gnnperf-eval: error: checkpoint must be given (checkpoint=...)\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-m", "checkpoint=SHIPPED", "split.fold=0,9"], "holdout_family fold 9 is not below num_folds 5"),
        (["checkpoint=/nonexistent/predictor.ckpt"], "checkpoint not found: /nonexistent/predictor.ckpt"),
        (["checkpoint=SHIPPED", "baselines=[flops,flop]"], "unknown baseline 'flop'"),
    ],
)
def test_gnnperf_eval_checks_what_needs_no_data_before_hydra_runs(argv, message, capsys):
    from gnnperf.apps import check_command_line
    from gnnperf.apps.evaluate import check_before_eval
    from gnnperf.predict import SHIPPED_CHECKPOINT

    argv = [a.replace("SHIPPED", str(SHIPPED_CHECKPOINT)) for a in argv]
    with pytest.raises(SystemExit) as ended:
        check_command_line("gnnperf-eval", "eval", argv, check=check_before_eval)
    err = capsys.readouterr().err
    assert ended.value.code == 2 and err.startswith("gnnperf-eval: error: ") and message in err, err


def test_training_runs_deterministic_algorithms_on_the_cpu_and_warns_on_a_gpu() -> None:
    """At two threads a gather's backward (``gamma[batch]``) adds with atomics in a varying order without it."""
    with initialize_config_dir(config_dir=CONF_DIR, version_base="1.3", job_name="test"):
        cpu = compose(config_name="train", overrides=["experiment=all_sources"])
        gpu = compose(config_name="train", overrides=["experiment=all_sources", "trainer=gpu"])
    assert cpu.trainer.deterministic is True
    # torch would refuse the few CUDA ops without a deterministic kernel: warn instead
    assert gpu.trainer.deterministic == "warn"
