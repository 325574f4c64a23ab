"""Splits: disjoint, covering, grouped as named, reproducible from a seed and from a saved file."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from gnnperf.data.groups import model_groups
from gnnperf.data.split_files import load_split, save_split
from gnnperf.data.splits import PARTS, SPLITS, make_split, register_split
from gnnperf.errors import GnnperfError

FAMILIES = ["mlp", "resnet", "vgg", "vit"]
DEVICES = ["a100-sxm4-40gb", "cpu-intel-xeon-1t", "rtx-3090"]
KWARGS = {"holdout_column": {"column": "family", "values": ["vgg", "vit"]}}  # splits needing options


def table(families=FAMILIES, devices=DEVICES, models_per_family: int = 4) -> pd.DataFrame:
    rows = [
        {"model_ref": f"zoo:{f}?width={m}", "family": f, "batch_size": b, "hardware": d}
        for f in families
        for m in range(models_per_family)
        for b in (2, 8)
        for d in devices
    ]
    df = pd.DataFrame(rows)
    df["sample_id"] = [f"s{i:04d}" for i in range(len(df))]
    return df


def groups(df: pd.DataFrame, split: dict, column: str) -> dict[str, set]:
    return {p: set(df[column].to_numpy()[split[p]]) for p in PARTS}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_every_split_is_disjoint_covering_and_seeded(name: str) -> None:
    df = table()
    split = make_split(name, df, seed=3, fold=1, **KWARGS.get(name, {}))
    together = np.concatenate([split[p] for p in PARTS])
    assert all(len(split[p]) > 0 for p in PARTS)
    assert len(together) == len(df) and set(together) == set(range(len(df)))
    again = make_split(name, df, seed=3, fold=1, **KWARGS.get(name, {}))
    assert all(np.array_equal(split[p], again[p]) for p in PARTS)
    # The split depends on the content, not on the row order.
    shuffled = df.sample(frac=1.0, random_state=0).reset_index(drop=True)
    moved = make_split(name, shuffled, seed=3, fold=1, **KWARGS.get(name, {}))
    if name != "random":  # random permutes rows; the grouped splits permute sorted groups
        for p in PARTS:
            assert set(shuffled.sample_id[moved[p]]) == set(df.sample_id[split[p]])


@pytest.mark.parametrize("name", ["random", "holdout_model"])
def test_seed_and_fold_change_the_split(name: str) -> None:
    df = table()
    base = make_split(name, df, seed=0, fold=0)
    assert not np.array_equal(base["test"], make_split(name, df, seed=1, fold=0)["test"])
    tests = [make_split(name, df, seed=0, fold=f)["test"] for f in range(5)]
    assert len(np.unique(np.concatenate(tests))) == sum(len(t) for t in tests)  # folds test disjoint sets


def test_holdout_model_keeps_each_model_on_one_side() -> None:
    df = table()
    split = make_split("holdout_model", df, seed=0, val_frac=0.2, test_frac=0.25)
    models = groups(df, split, "model_ref")
    assert not (
        models["train"] & models["test"] or models["train"] & models["val"] or models["val"] & models["test"]
    )
    assert len(models["test"]) == 4 and len(models["val"]) == 2


@pytest.mark.parametrize("test_frac", [0.1, None])
def test_holdout_model_hash_order_keeps_the_parts_when_a_model_joins(test_frac: float | None) -> None:
    df = table(models_per_family=50)  # 200 models
    kw = dict(seed=0, fold=2, val_frac=0.1, test_frac=test_frac)
    joined = pd.concat([df, table(families=["newnet"], models_per_family=1)], ignore_index=True)
    joined["sample_id"] = [f"s{i:05d}" for i in range(len(joined))]
    before, after = make_split("holdout_model", df, **kw), make_split("holdout_model", joined, **kw)
    for p in ("test", "val"):
        was, now = groups(df, before, "model_ref")[p], groups(joined, after, "model_ref")[p]
        # the newcomer may take a place; at most one model crosses each boundary of the part
        assert len(was - now) <= 2 and len(now - was - {"zoo:newnet?width=0"}) <= 2


def test_holdout_model_permutation_order_is_the_draw_of_the_older_shipped_predictors() -> None:
    # the shipped v19 and earlier were split so (gnnperf-eval redoes their splits with it): these are the models the
    # code of 2026-12-04 drew before the hash order existed
    df = table(models_per_family=6)
    split = make_split("holdout_model", df, seed=0, fold=1, val_frac=0.2, test_frac=0.25, order="permutation")
    models = groups(df, split, "model_ref")
    assert models["test"] == {
        "zoo:mlp?width=3", "zoo:resnet?width=0", "zoo:resnet?width=2", "zoo:vit?width=2", "zoo:vit?width=4",
        "zoo:vit?width=5",
    }  # fmt: skip
    assert models["val"] == {"zoo:mlp?width=1", "zoo:resnet?width=1", "zoo:resnet?width=5", "zoo:vgg?width=4"}
    with pytest.raises(GnnperfError, match="bad order 'sorted'"):
        make_split("holdout_model", df, order="sorted")


def with_twins(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``graph_digest`` per (model, batch) and three references of other names for its networks:
    an alias of a resnet in its own family, and a vit under the family ``deit`` (its rows share the digests)."""
    df = df.assign(graph_digest=[f"g-{m}" for m in df["model_ref"]])
    alias = df[df.model_ref == "zoo:resnet?width=1"].assign(model_ref="zoo:resnet_alias?width=1")
    deit = df[df.model_ref == "zoo:vit?width=2"].assign(model_ref="zoo:deit_copy?width=2", family="deit")
    # a third name of the same vit, which shares a digest with the deit only (through it, the group)
    deit2 = deit.assign(model_ref="zoo:deit_copy_distilled?width=2")
    out = pd.concat([df, alias, deit, deit2], ignore_index=True)
    out["sample_id"] = [f"s{i:04d}" for i in range(len(out))]
    return out


def test_model_groups_join_references_that_export_the_same_network() -> None:
    df = with_twins(table())
    g = pd.Series(model_groups(df), index=df.model_ref)
    assert g["zoo:resnet_alias?width=1"].iloc[0] == g["zoo:resnet?width=1"].iloc[0] == "zoo:resnet?width=1"
    copies = {g["zoo:deit_copy?width=2"].iloc[0], g["zoo:deit_copy_distilled?width=2"].iloc[0]}
    assert copies == {g["zoo:vit?width=2"].iloc[0]} == {"zoo:deit_copy?width=2"}
    assert g["zoo:vit?width=3"].iloc[0] == "zoo:vit?width=3"
    assert len(set(g)) == len(FAMILIES) * 4  # 19 references, 16 networks
    # without digests (or with empty ones) every reference is its own group
    assert set(model_groups(df.drop(columns="graph_digest"))) == set(df.model_ref)
    assert set(model_groups(df.assign(graph_digest=""))) == set(df.model_ref)


@pytest.mark.parametrize("fold", range(5))
def test_holdout_model_keeps_the_names_of_one_network_on_one_side(fold: int) -> None:
    df = with_twins(table())
    split = make_split("holdout_model", df, seed=0, fold=fold, val_frac=0.2)
    digests = {p: set(df.graph_digest.to_numpy()[split[p]]) for p in PARTS}
    assert not (digests["train"] & digests["test"] or digests["train"] & digests["val"])
    assert not digests["val"] & digests["test"]


@pytest.mark.parametrize("val_by", ["model", "family"])
def test_holdout_family_leaves_out_another_familys_copy_of_a_tested_network(val_by: str) -> None:
    df = with_twins(table(families=[*FAMILIES, "deit"]))  # a deit of its own, beside the vit's twins
    fams = sorted(set(df.family))  # deit, mlp, resnet, vgg, vit
    fold = fams.index("vit")
    split = make_split(
        "holdout_family", df, seed=0, fold=fold, num_folds=len(fams), val_frac=0.25, val_by=val_by
    )
    assert groups(df, split, "family")["test"] == {"vit"}
    placed = np.concatenate([split[p] for p in PARTS])
    missing = set(range(len(df))) - set(placed)
    assert set(df.model_ref.to_numpy()[list(missing)]) == {
        "zoo:deit_copy?width=2",
        "zoo:deit_copy_distilled?width=2",
    }
    assert {f"zoo:deit?width={m}" for m in range(4)} <= set(
        df.model_ref.to_numpy()[placed]
    )  # deit's others stay
    # when deit is tested, the vit its copies are is in no part
    split = make_split(
        "holdout_family", df, seed=0, fold=fams.index("deit"), num_folds=len(fams), val_by=val_by
    )
    placed = np.concatenate([split[p] for p in PARTS])
    missing = set(range(len(df))) - set(placed)
    assert set(df.model_ref.to_numpy()[list(missing)]) == {"zoo:vit?width=2"}


def test_holdout_family_folds_test_each_family_once() -> None:
    df = table()
    seen = []
    for fold in range(2):
        split = make_split("holdout_family", df, seed=0, fold=fold, num_folds=2)
        fams = groups(df, split, "family")
        assert fams["test"] == set(FAMILIES[fold::2])
        assert not fams["test"] & (fams["train"] | fams["val"])
        models = groups(df, split, "model_ref")
        assert not models["train"] & models["val"]
        seen += sorted(fams["test"])
    assert sorted(seen) == FAMILIES


def test_holdout_family_can_validate_on_unseen_families() -> None:
    df = table()
    split = make_split("holdout_family", df, seed=0, fold=0, num_folds=2, val_frac=0.5, val_by="family")
    fams = groups(df, split, "family")
    assert fams["test"] == set(FAMILIES[0::2])
    assert len(fams["val"]) == 1 and fams["val"] < set(FAMILIES[1::2])
    assert not fams["train"] & fams["val"] and fams["train"] | fams["val"] == set(FAMILIES[1::2])
    with pytest.raises(GnnperfError, match="bad val_by 'modle'"):
        make_split("holdout_family", df, val_by="modle")


def test_holdout_hardware_leaves_one_device_out() -> None:
    df = table()
    for fold, device in enumerate(DEVICES):
        split = make_split("holdout_hardware", df, seed=0, fold=fold)
        devices = groups(df, split, "hardware")
        assert devices["test"] == {device} and device not in devices["train"] | devices["val"]
        models = groups(df, split, "model_ref")
        assert not models["train"] & models["val"]
    with pytest.raises(GnnperfError, match="only 3 device"):
        make_split("holdout_hardware", df, fold=3)


def test_holdout_group_tests_one_combination_and_trains_on_its_parts_elsewhere() -> None:
    df = table()
    pairs = sorted({(d, str(b)) for d in DEVICES for b in (2, 8)})
    for fold, (device, batch) in enumerate(pairs):
        split = make_split("holdout_group", df, seed=0, fold=fold, columns=["hardware", "batch_size"])
        test = df.iloc[split["test"]]
        assert set(test["hardware"]) == {device} and set(test["batch_size"].astype(str)) == {batch}
        trained = df.iloc[split["train"]]
        assert (trained["hardware"] == device).any() and (trained["batch_size"].astype(str) == batch).any()
        assert not ((trained["hardware"] == device) & (trained["batch_size"].astype(str) == batch)).any()
    with pytest.raises(GnnperfError, match=r"only 6 group\(s\) of \['hardware', 'batch_size'\]"):
        make_split("holdout_group", df, fold=6, columns=["hardware", "batch_size"])
    with pytest.raises(GnnperfError, match="no column 'hardwre'"):
        make_split("holdout_group", df, columns=["hardwre"])


def test_holdout_column_tests_the_named_values() -> None:
    df = table()
    split = make_split("holdout_column", df, seed=0, **KWARGS["holdout_column"])
    families = groups(df, split, "family")
    assert families["test"] == {"vgg", "vit"} and not families["train"] & {"vgg", "vit"}
    with pytest.raises(GnnperfError, match="no column 'famly'.*did you mean: family"):
        make_split("holdout_column", df, column="famly", values=["vgg"])
    with pytest.raises(GnnperfError, match="not in column 'family'"):
        make_split("holdout_column", df, column="family", values=["gpt"])
    # a number column, with the numbers a Hydra list gives (values: [2]) or as text
    for values in ([2], ["2"]):
        split = make_split("holdout_column", df, seed=0, column="batch_size", values=values)
        assert (
            groups(df, split, "batch_size")["test"] == {2}
            and 2 not in groups(df, split, "batch_size")["train"]
        )


def test_test_query_scores_some_held_out_rows_and_trains_on_none_of_the_others() -> None:
    df = table()
    df["source"] = np.where(df["batch_size"] == 2, "bench-a", "bench-b")
    kw = {"column": "hardware", "values": ["rtx-3090"]}
    full = make_split("holdout_column", df, seed=0, **kw)
    split = make_split("holdout_column", df, seed=0, test_query="source == 'bench-a'", **kw)
    assert set(df.source[split["test"]]) == {"bench-a"} and set(df.hardware[split["test"]]) == {"rtx-3090"}
    assert np.array_equal(split["train"], full["train"]) and np.array_equal(split["val"], full["val"])
    left_out = np.setdiff1d(np.arange(len(df)), np.concatenate([split[p] for p in PARTS]))
    assert len(left_out) == len(full["test"]) - len(split["test"]) > 0
    assert set(df.hardware[left_out]) == {"rtx-3090"} and set(df.source[left_out]) == {"bench-b"}
    with pytest.raises(GnnperfError, match="leaves test empty"):
        make_split("holdout_column", df, seed=0, test_query="source == 'bench-c'", **kw)
    with pytest.raises(GnnperfError, match="bad sample query"):
        make_split("holdout_column", df, seed=0, test_query="source ==", **kw)


def test_holdout_family_folds_can_come_from_one_table() -> None:
    df = pd.concat(
        [table().assign(source="bench"), table(families=["bert", "resnet"]).assign(source="other")]
    )
    df = df.reset_index(drop=True).assign(sample_id=[f"s{i:04d}" for i in range(len(df))])
    alone = make_split(
        "holdout_family", df[df.source == "bench"].reset_index(drop=True), seed=0, fold=1, num_folds=2
    )
    bench_query = "source == 'bench'"
    split = make_split(
        "holdout_family", df, seed=0, fold=1, num_folds=2, family_query=bench_query, test_query=bench_query
    )
    held_out = set(df.family[df.source == "bench"].to_numpy()[alone["test"]])
    assert set(df.family[split["test"]]) == held_out == {"resnet", "vit"} and set(
        df.source[split["test"]]
    ) == {"bench"}
    assert "bert" in set(df.family[split["train"]]) | set(df.family[split["val"]])  # never a test family here
    in_no_part = np.setdiff1d(np.arange(len(df)), np.concatenate([split[p] for p in PARTS]))
    assert set(df.family[in_no_part]) == {"resnet"} and set(df.source[in_no_part]) == {"other"}


@pytest.mark.parametrize("name", ["random", "holdout_model"])
def test_k_folds_partition_every_row_when_the_count_does_not_divide(name: str) -> None:
    df = table()  # 96 rows of 16 models: neither divides by 5
    tests = [make_split(name, df, fold=f, num_folds=5)["test"] for f in range(5)]
    assert sorted(np.concatenate(tests).tolist()) == list(range(len(df)))
    sizes = [len(t) for t in tests]
    assert max(sizes) - min(sizes) <= (1 if name == "random" else 2 * len(DEVICES))  # models carry 6 rows


def test_impossible_splits_raise_clear_errors() -> None:
    with pytest.raises(GnnperfError, match="families left to train"):
        make_split("holdout_family", table(families=["mlp"]))
    with pytest.raises(GnnperfError, match="train/val empty"):
        make_split("holdout_hardware", table(devices=["rtx-3090"]))
    with pytest.raises(GnnperfError, match="leaves train empty"):
        make_split("holdout_model", table(families=["mlp"], models_per_family=2), num_folds=2)
    with pytest.raises(GnnperfError, match="did you mean: holdout_model"):
        make_split("holdout_modle", table())
    with pytest.raises(GnnperfError, match="fold 9"):
        make_split("random", table(), fold=9)


def test_duplicate_split_name_raises() -> None:
    with pytest.raises(ValueError, match="already registered"):
        register_split("random")(lambda samples, seed, fold, num_folds: {})


def test_saved_split_reproduces_by_sample_id(tmp_path) -> None:
    df = table()
    split = make_split("holdout_family", df, seed=5, fold=1, num_folds=4)
    path = save_split(split, tmp_path / "splits" / "family.json", df, meta={"split": "holdout_family"})
    loaded = load_split(path, df)
    assert all(np.array_equal(split[p], loaded[p]) for p in PARTS)
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    moved = load_split(path, shuffled)
    assert all(set(shuffled.sample_id[moved[p]]) == set(df.sample_id[split[p]]) for p in PARTS)
    with pytest.raises(GnnperfError, match="not in the dataset"):
        load_split(path, df.iloc[1:])
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(GnnperfError, match="cannot read split file"):
        load_split(tmp_path / "bad.json", df)
