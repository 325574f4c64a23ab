"""``zoo:`` references: canonical form, user errors, the registry's duplicate check, the ``zoo`` command."""

from __future__ import annotations

import pytest
import torch

from gnnperf.cli import main
from gnnperf.errors import GnnperfError
from gnnperf.zoo.cli import sample_refs
from gnnperf.zoo.registry import get_family, list_families, register_family
from gnnperf.zoo.resolve import resolve


def test_query_order_does_not_change_the_canonical_ref() -> None:
    a = resolve("zoo:resnet?depths=1,1,1,1&width=16")
    b = resolve("zoo:resnet?width=16&depths=1,1,1,1")
    assert a.ref == b.ref
    assert a.ref.startswith("zoo:resnet?block=basic&depths=1,1,1,1&")  # completed with defaults, sorted
    assert "&width=16&" in a.ref
    assert resolve(a.ref).ref == a.ref  # canonical refs are fixed points
    assert a.family == "resnet" and a.input_kind == "image"
    assert a.default_input_shape == (3, 224, 224)


def test_canonical_ref_builds_the_requested_model() -> None:
    spec = resolve("zoo:resnet?depths=1,1,1,1&width=16&image_size=32&stem=cifar&num_classes=7")
    model = spec.build()
    assert model.stem[0][0].out_channels == 16 and len(model.stages) == 4
    assert model(*spec.make_inputs(2)).shape == (2, 7)


def test_tokens_family_spec() -> None:
    spec = resolve("zoo:gpt?vocab_size=40&seq_len=12&d_model=16&heads=2&layers=1")
    assert spec.input_kind == "tokens" and spec.vocab_size == 40
    assert spec.default_input_shape == (12,)
    (ids,) = spec.make_inputs(3)
    assert ids.dtype == torch.int64 and ids.shape == (3, 12) and int(ids.max()) < 40
    assert spec.build()(ids).shape == (3, 12, 40)


def test_sequence_and_vector_families_spec() -> None:
    assert resolve("zoo:lstm?seq_len=10&input_size=6").default_input_shape == (10, 6)
    assert resolve("zoo:mlp?in_features=33").default_input_shape == (33,)


def test_gpt_accepts_shorter_sequences_than_its_seq_len() -> None:
    spec = resolve("zoo:gpt?vocab_size=40&seq_len=12&d_model=16&heads=2&layers=1")
    assert spec.build()(*spec.make_inputs(2, (5,))).shape == (2, 5, 40)


def test_unknown_family_suggests_a_name() -> None:
    with pytest.raises(GnnperfError, match="did you mean: resnet"):
        resolve("zoo:resnt?width=16")


def test_unknown_key_suggests_a_name() -> None:
    with pytest.raises(GnnperfError, match=r"no parameter 'widht'.*did you mean: width"):
        resolve("zoo:resnet?widht=16")


@pytest.mark.parametrize(
    "query",
    ["width=abc", "depths=1,x,1", "batch_norm=maybe", "dropout=high"],
    ids=["int", "list", "bool", "float"],
)
def test_bad_value_type_is_a_user_error(query: str) -> None:
    family = "resnet" if query.startswith(("width", "depths")) else "vgg"
    with pytest.raises(GnnperfError, match=rf"zoo:{family} parameter '{query.split('=')[0]}'"):
        resolve(f"zoo:{family}?{query}")


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("zoo:resnet?block=bottlenek", "did you mean: bottleneck"),
        ("zoo:resnet?groups=4", "use block=bottleneck"),
        ("zoo:gpt?d_model=30&heads=4", "not divisible by heads"),
        ("zoo:vit?image_size=30&patch_size=16", "not a multiple of patch_size"),
        ("zoo:mobilenet?act=swish", "act must be one of"),
        ("zoo:vgg?image_size=16", "too small"),
    ],
)
def test_invalid_combinations_fail_at_build_with_a_user_error(ref: str, message: str) -> None:
    with pytest.raises(GnnperfError, match=message):
        resolve(ref).build()


def test_duplicate_family_name_raises() -> None:
    family = get_family("mlp")
    with pytest.raises(ValueError, match="registered twice"):
        register_family(family)
    assert get_family("mlp") is family


def test_sample_refs_are_canonical_and_reproducible() -> None:
    refs = sample_refs("vit", 4, seed=11)
    assert refs == sample_refs("vit", 4, seed=11)
    assert refs != sample_refs("vit", 4, seed=12)
    assert all(resolve(ref).ref == ref for ref in refs)


def test_zoo_sample_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "sample", "lstm", "-n", "3", "--seed", "5"]) == 0
    lines = capsys.readouterr().out.split()
    assert lines == sample_refs("lstm", 3, seed=5)


def test_zoo_sample_command_reports_user_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "sample", "resnt"]) == 2
    assert "did you mean: resnet" in capsys.readouterr().err
    assert main(["zoo", "sample", "gpt", "-n", "0"]) == 2


def test_zoo_list_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    for name in list_families():
        assert name in out
    assert "growth_rate=32" in out  # parameters are listed with their defaults
    assert "layer_scale=1e-06" in out and "block_config=6,12,24,16" in out  # piped: not folded mid-value
    assert {"image", "tokens", "sequence", "vector"} <= set(out.split())


def test_torchvision_segmentation_builds_without_fetching_backbone_weights(monkeypatch) -> None:
    def no_download(*args, **kwargs):
        raise AssertionError("tried to download weights")

    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", no_download)
    model = resolve(
        "torchvision:lraspp_mobilenet_v3_large"
    ).build()  # its backbone defaults to ImageNet weights
    assert sum(p.numel() for p in model.parameters()) > 0


@pytest.mark.parametrize(
    "ref, says",
    [
        ("zoo:resnet?in_chans=0", "'in_chans': expected at least 1"),
        ("zoo:mlp?in_features=0", "'in_features': expected at least 1"),
        ("zoo:gpt?ffn_ratio=0", "'ffn_ratio': expected at least 1"),
        ("zoo:vit?mlp_ratio=0", "'mlp_ratio': expected a ratio above 0"),
        ("zoo:convnext?layer_scale=nan", "'layer_scale': nan is not a finite number"),
        ("zoo:mobilenet?stem_width=-1", "'stem_width': expected at least 1"),
    ],
)
def test_degenerate_sizes_are_user_errors(ref, says) -> None:
    with pytest.raises(GnnperfError, match=says):
        resolve(ref)


def test_sizes_whose_zero_means_no_layer_stay_valid() -> None:
    assert "fc_width=0" in resolve("zoo:vgg?fc_width=0").ref  # one linear classifier
    assert "head_width=0" in resolve("zoo:mobilenet?head_width=0").ref  # no 1x1 head


@pytest.mark.parametrize(
    ("name", "size"),
    [
        ("resnet50", 224),
        ("efficientnet_b3", 300),
        ("inception_v3", 299),
        ("swin_v2_t", 256),
        ("fcn_resnet50", 224),
    ],
)
def test_torchvision_images_are_at_their_weights_crop_size(name: str, size: int) -> None:
    assert resolve(f"torchvision:{name}").default_input_shape == (3, size, size)


def test_torchvision_video_models_take_clips_at_their_weights_crop_size() -> None:
    r3d, mvit = resolve("torchvision:r3d_18"), resolve("torchvision:mvit_v1_b")
    assert (r3d.input_kind, r3d.default_input_shape) == ("video", (3, 16, 112, 112))
    assert mvit.default_input_shape == (3, 16, 224, 224)
    assert r3d.input_shape((3, 8, 64, 64)) == (3, 8, 64, 64)
    with pytest.raises(
        GnnperfError,
        match=r"takes video clips: its input shape is 4 dims \(channels, frames, height, width\) such as 3,16,112,112",
    ):
        r3d.input_shape((3, 112, 112))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("fasterrcnn_resnet50_fpn", "is a detection model: its training step takes target boxes"),
        ("raft_small", "is an optical-flow model: it takes two images"),
    ],
)
def test_torchvision_tasks_of_more_than_one_input_are_refused_by_name(name: str, says: str) -> None:
    with pytest.raises(GnnperfError, match=says):
        resolve(f"torchvision:{name}")


def test_a_model_whose_input_size_is_fixed_at_build_is_built_for_the_shape_asked() -> None:
    vit = resolve("timm:deit_tiny_patch16_224")
    with torch.no_grad():
        assert vit.build(input_shape=(3, 384, 384))(torch.randn(1, 3, 384, 384)).shape == (1, 1000)
        with pytest.raises(AssertionError, match="384"):  # the default build keeps its 224 position table
            vit.build()(torch.randn(1, 3, 384, 384))
    assert resolve("timm:resnet50").sized_builder is None  # a convnet takes any size as built
    tv = resolve("torchvision:vit_b_32")
    assert tv.build(input_shape=(3, 256, 256)).image_size == 256
    with pytest.raises(GnnperfError, match="takes square images"):
        tv.build(input_shape=(3, 256, 224))
