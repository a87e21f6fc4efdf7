"""The oneDNN-packed CPU path (detect.darknet.packed) gives the fused model's outputs within float rounding,
for every activation it fuses, any input size and batch, and on the official yolov3-tiny weights and real
images on predict's own canvases; a shape met before runs without reordering a weight (its packed weights are
kept)."""

import itertools

import cv2
import pytest
import torch

from detect import Darknet
from detect.darknet import packed as packing
from detect.darknet.activations import Activation
from detect.darknet.layers import ConvBlock
from detect.darknet.load import for_inference
from detect.darknet.packed import (
    FUSED_ACTIVATIONS,
    PackedConv,
    pack_convolutions,
    packing_available,
)
from detect.inference.predictor import InferenceSettings, model_input
from tests.conftest import ROOT, shared_path
from tests.support.cfg_texts import YOLO_CFG
from tests.support.darknet_helpers import letterbox, randomize_weights, relative_error

pytestmark = pytest.mark.skipif(not packing_available(), reason="this torch build has no oneDNN")


def _fused_block(activation: str, groups: int = 1, stride: int = 1, dilation: int = 1) -> ConvBlock:
    torch.manual_seed(0)
    block = ConvBlock(8, 12, 3, stride, 1, dilation, groups, True, Activation(activation)).eval()
    with torch.no_grad():
        block.bn.running_mean.uniform_(-1, 1)
        block.bn.running_var.uniform_(0.5, 2)
        block.bn.weight.uniform_(0.5, 1.5)
        block.bn.bias.uniform_(-1, 1)
    block.fuse()
    return block


@pytest.mark.parametrize("activation", [*FUSED_ACTIVATIONS, "mish"])
def test_packed_conv_equals_the_fused_block_for_each_activation(activation):
    block = _fused_block(activation)
    x = torch.randn(2, 8, 11, 9) * 2
    with torch.no_grad():
        expected = block(x)
        packed = PackedConv(block)
        actual = packed(x)
    assert (packed.after is None) == (activation != "mish")  # mish is applied after the kernel
    assert actual.shape == (2, 12, 11, 9)
    assert (actual - expected).abs().max().item() < 1e-4


@pytest.mark.parametrize("groups, stride, dilation", [(4, 1, 1), (1, 2, 1), (1, 1, 2)])
def test_packed_conv_keeps_groups_stride_and_dilation(groups, stride, dilation):
    block = _fused_block("leaky", groups, stride, dilation)
    x = torch.randn(1, 8, 13, 10)
    with torch.no_grad():
        assert (PackedConv(block)(x) - block(x)).abs().max().item() < 1e-4


def test_unfused_block_is_refused():
    block = ConvBlock(3, 4, 3, 1, 1, 1, 1, True, Activation("leaky"))
    with pytest.raises(ValueError, match="fused ConvBlock"):
        PackedConv(block)


def test_packed_model_matches_at_other_sizes_and_batches():
    model = Darknet(YOLO_CFG).eval()
    randomize_weights(model)
    fused = Darknet(YOLO_CFG).eval()
    fused.load_state_dict(model.state_dict())
    packed = for_inference(fused, torch.device("cpu"))
    assert sum(isinstance(m, PackedConv) for m in packed.layers) == 4
    # the build size, then other batches and rect canvases, then each again (its kept packed weights)
    shapes = [(1, 3, 48, 64), (3, 3, 64, 32), (2, 3, 32, 64), (1, 3, 64, 96), (2, 3, 48, 64)]
    for shape in shapes + shapes:
        x = torch.rand(shape)
        with torch.inference_mode():
            assert (packed(x) - model(x)).abs().max().item() < 1e-3


def _onednn_reorders(capfd, run) -> int:
    """How many oneDNN reorders `run()` executed (oneDNN's verbose lines, which it writes to stdout)."""
    capfd.readouterr()
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        run()
    return sum(",reorder," in line for line in capfd.readouterr().out.splitlines())


SHAPES = [(1, 416, 416), (1, 320, 448), (1, 448, 352), (2, 320, 448), (1, 224, 448)]  # [N, H, W]


def _packed_yolov3_tiny() -> tuple[Darknet, list[PackedConv]]:
    """yolov3-tiny (random weights: the layouts depend on the shapes only) packed for 416x416."""
    packed = for_inference(Darknet(ROOT / "cfg" / "yolov3-tiny.cfg", img_size=416), torch.device("cpu"))
    convs = [m for m in packed.layers if isinstance(m, PackedConv)]
    assert len(convs) == 13
    return packed, convs


def test_a_shape_met_before_runs_without_reordering_a_weight(capfd):
    # packed at 416x416, then predict's rect canvases and a batch of 2: before the packed weights were kept
    # per shape, 5 of the 13 weights were reordered on every pass at 320x448 on an AVX2 CPU
    packed, _ = _packed_yolov3_tiny()
    reorders = {}
    with torch.inference_mode():
        for batch, height, width in SHAPES:
            x = torch.rand(batch, 3, height, width)
            packed(x)  # the first pass at a shape packs the weights it needs
            reorders[f"{batch}x{height}x{width}"] = _onednn_reorders(capfd, lambda x=x: packed(x))
    assert set(reorders.values()) == {0}, reorders


def test_each_shape_is_packed_once_and_equal_layouts_are_shared():
    packed, convs = _packed_yolov3_tiny()
    assert [conv.packings for conv in convs] == [1] * 13
    with torch.inference_mode():
        for count, (batch, height, width) in enumerate(SHAPES[1:], start=2):
            x = torch.rand(batch, 3, height, width)
            packed(x)
            packed(x)
            assert [conv.packings for conv in convs] == [count] * 13
    for conv in convs:  # no two kept weights hold the same bytes: equal layouts are one tensor
        assert 1 <= conv.layout_count <= len(SHAPES)
        assert not any(packing._same_bytes(a, b) for a, b in itertools.combinations(conv._layouts(), 2))
    assert sum(conv.layout_count for conv in convs) < 13 * len(SHAPES)


def test_kept_shapes_are_bounded_least_recently_used_first():
    packed = PackedConv(_fused_block("leaky"), [1, 8, 11, 9], max_shapes=2)
    assert packed.packings == 1

    def run(*shape):
        with torch.no_grad():
            packed(torch.randn(shape))
        return packed.packings
    assert run(1, 8, 11, 9) == 1  # the shape it was built for
    assert run(2, 8, 11, 9) == 2
    assert run(2, 8, 11, 9) == 2  # kept
    assert run(1, 8, 30, 40) == 3  # a third shape: 1x11x9, the least recently used, is forgotten
    assert run(2, 8, 11, 9) == 3
    assert run(1, 8, 11, 9) == 4
    assert packed.layout_count <= 3  # the built weight and those of the 2 kept shapes, equal ones shared


def test_for_inference_without_packing_keeps_plain_convolutions():
    model = for_inference(Darknet(YOLO_CFG), torch.device("cpu"), pack=False)
    assert sum(isinstance(m, ConvBlock) for m in model.layers) == 4
    assert pack_convolutions(Darknet(YOLO_CFG)) == 2  # BatchNorm convs stay: only fused ones are packed


def test_yolov3_tiny_packed_keeps_the_outputs_on_a_real_image(shared):
    image = cv2.imread(str(shared_path("data", "coco-tiny", "val2017", "000000359937.jpg")))
    x, _, _ = letterbox(image, 416)
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416).eval()
    model.load_darknet_weights(shared_path("weights", "yolov3-tiny.weights"))
    with torch.inference_mode():
        expected = model(x)
        packed = for_inference(model, torch.device("cpu"))
        actual = packed(x)
    assert sum(isinstance(m, PackedConv) for m in packed.layers) == 13
    _assert_rows_close(actual, expected)


def _assert_rows_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    boxes, scores = (actual - expected)[..., :4].abs(), (actual - expected)[..., 4:].abs()
    assert boxes.max().item() < 0.01  # input pixels, on boxes up to 448
    assert scores.max().item() < 1e-4
    assert relative_error(actual, expected) < 1e-4  # as fusing alone (test_real_detections)


def test_yolov3_tiny_packed_keeps_the_outputs_on_predicts_rect_canvases(shared):
    # predict's own inputs: each image on its rect canvas (320x448 for these two, 448x352 for the third),
    # one at a time and the two that share a canvas as one batch
    names = ["000000010764.jpg", "000000020992.jpg", "000000166918.jpg"]
    images = [cv2.imread(str(shared_path("data", "coco-tiny", "val2017", name))) for name in names]
    inputs = [torch.from_numpy(model_input(image, InferenceSettings(img_size=416), 32)[0])[None].float() / 255
              for image in images]
    assert [tuple(x.shape[2:]) for x in inputs] == [(320, 448), (320, 448), (448, 352)]
    model = Darknet(shared_path("darknet-cfg", "yolov3-tiny.cfg"), img_size=416).eval()
    model.load_darknet_weights(shared_path("weights", "yolov3-tiny.weights"))
    with torch.inference_mode():
        batches = [*inputs, torch.cat(inputs[:2])]
        expected = [model(x) for x in batches]
        packed = for_inference(model, torch.device("cpu"))
        for _ in range(2):  # the first pass at each shape packs its weights, the second runs on them
            for x, rows in zip(batches, expected):
                _assert_rows_close(packed(x), rows)


@pytest.mark.parametrize("size,stride_y,stride_x,padding", [(2, 2, 2, 0), (2, 1, 1, 1), (3, 2, 2, 2), (5, 1, 1, 4),
                                                             (13, 1, 1, 12), (3, 1, 2, 0), (1, 1, 1, 0)])
@pytest.mark.parametrize("channels_last", [False, True])
def test_view_max_pool_equals_max_pool2d_in_the_input_layout(size, stride_y, stride_x, padding, channels_last):
    """The CPU inference max-pool (running maxima of views) gives max_pool2d's exact values, Darknet's padding
    included, keeps NHWC activations NHWC, and is used only without a gradient."""
    from detect.darknet.resample import MaxPool

    pool = MaxPool(size, stride_y, stride_x, padding)
    x = torch.randn(2, 24, 13, 17)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    expected = pool(x)
    pool.by_views = True
    with torch.no_grad():
        got = pool(x)
    assert torch.equal(got, expected)
    assert got.is_contiguous(memory_format=torch.channels_last) == channels_last
    trained = pool(x.clone().requires_grad_())
    assert trained.grad_fn is not None and "MaxPool" in type(trained.grad_fn).__name__


def test_for_inference_on_the_cpu_pools_by_views_with_the_same_outputs():
    from detect.darknet.resample import MaxPool
    from tests.support.cfg_texts import GRAPH_CFG

    torch.manual_seed(0)
    model = Darknet(GRAPH_CFG)
    randomize_weights(model)
    model.eval()
    x = torch.rand(2, model.net_options["channels"], *model.input_size)
    with torch.no_grad():
        expected = model(x)
        inference = for_inference(model, torch.device("cpu"))
        pools = [layer for layer in inference.layers if isinstance(layer, MaxPool)]
        assert len(pools) >= 4 and all(pool.by_views for pool in pools)
        assert relative_error(inference(x), expected) < 1e-4
