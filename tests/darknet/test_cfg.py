"""Cfg lexing (Darknet §1 rules) and the errors a user can cause, each naming file and line."""

import logging

import pytest
import torch

from detect import Darknet
from detect.darknet import CfgError
from detect.darknet.cfg import parse_cfg

NET = "[net]\nwidth=64\nheight=64\nchannels=3\n"
HEAD = """
[convolutional]
filters={filters}
size=1
activation=linear

[yolo]
mask=0,1
anchors=10,14, 23,27, 37,58
classes={classes}
num=3
"""


def _write(tmp_path, text, name="model.cfg"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_lexer_strips_all_whitespace_skips_comments_and_keeps_first_duplicate():
    text = "[net]\n wid th = 32\n# comment\n; also a comment\nheight=32\nheight=64\n\n [ conv ]\n filters = 4 \n"
    net, conv = parse_cfg(text, "x.cfg")
    assert conv.type == "convolutional" and conv.index == 0 and conv.line == 8
    assert net.get_int("width") == 32 and net.get_int("height") == 32
    assert conv.get_int("filters") == 4


def test_value_may_contain_equals_and_relative_and_absolute_refs_resolve():
    text = NET + "[convolutional]\nfilters=4\n[convolutional]\nfilters=4\n[route]\nlayers=-1,0\n"
    model = Darknet(text)
    assert model.layers[2].sources == [1, 0]
    assert parse_cfg("[net]\nkey=a=b\n")[0].get_str("key") == "a=b"


@pytest.mark.parametrize("text, line, fragment", [
    ("width=3\n[net]\n", 1, "before the first section"),
    ("[convolutional]\nfilters=2\n", 1, "first section must be [net]"),
    (NET + "[bogus]\n", 5, "unknown section type [bogus]"),
    (NET + "[region]\n", 5, "does not build"),
    (NET + "[convolutional]\nfilters=\n", 6, "empty value"),
    (NET + "[convolutional]\nfilters=abc\n", 6, "expected an integer"),
    (NET + "[convolutional]\nfilters=1.5\n", 6, "expected an integer"),
    (NET + "[convolutional]\nfilters\n", 6, "expected key=value"),
    (NET + "[convolutional]\nactivation=Leaky\n", 6, "unknown activation 'Leaky'"),
    (NET + "[route]\nlayers=-1\n", 6, "must name an earlier layer"),
    (NET + "[convolutional]\n[route]\nlayers=1\n", 7, "resolves to layer 1"),
    (NET + "[convolutional]\n[route]\nlayers=-5\n", 7, "resolves to layer -4"),
    (NET + "[convolutional]\n[route]\nlayers=-1,\n", 7, "empty list item"),
    (NET + "[convolutional]\nfilters=10\n[yolo]\nmask=0,3\nnum=3\nclasses=1\n", 8, "mask index 3"),
    (NET + HEAD.format(filters=20, classes=6), 7, "filters=(classes+5)*len(mask)=22"),
    (NET + "[convolutional]\n[shortcut]\nfrom=-1\nweights_type=per_feature\n", 6, "needs weights_normalization"),
    (NET + "[convolutional]\nsize=3\ndilation=2\n", 7, "dilation=2"),
    (NET + "[convolutional]\nfilters=4\n[route]\nlayers=0\ngroups=3\n", 9, "not divisible by groups=3"),
])
def test_errors_name_file_and_line(tmp_path, text, line, fragment):
    path = _write(tmp_path, text)
    with pytest.raises(CfgError) as info:
        Darknet(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert fragment in message, message
    assert isinstance(info.value, ValueError)


def test_yolo_filter_mismatch_points_at_the_conv_filters_line(tmp_path):
    path = _write(tmp_path, NET + HEAD.format(filters=21, classes=5))
    with pytest.raises(CfgError, match=rf"^{path}:7: layer 0 \[convolutional\]: feeds \[yolo\] \(line 11\)"):
        Darknet(path)


def test_unused_keys_warn_once_each_and_do_not_fail(tmp_path, caplog):
    path = _write(tmp_path, NET + "[convolutional]\nfilters=2\nbogus_key=1\n[maxpool]\nstride=2\nalso_unused=x\n")
    with caplog.at_level(logging.WARNING, logger="detect.darknet.cfg"):
        Darknet(path)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2
    assert warnings[0].startswith(f"{path}:7:") and "bogus_key = 1" in warnings[0]
    assert "also_unused" in warnings[1]


def test_defaults_follow_darknet():
    model = Darknet(NET + "[convolutional]\n[maxpool]\n[upsample]\n" + HEAD.format(filters=20, classes=5))
    conv = model.layers[0]
    assert conv.act.name == "logistic" and conv.conv.kernel_size == (1, 1) and conv.bn is None
    assert model.layer_shapes[1] == (1, 64, 64)  # maxpool default size=stride=1
    assert model.layer_shapes[2] == (1, 128, 128)  # upsample default stride 2
    head = model.heads[0]
    assert head.options["ignore_thresh"] == 0.5 and head.options["iou_normalizer"] == 0.75
    assert head.options["iou_loss"] == "mse" and head.options["max_delta"] == float("inf")
    assert head.options["label_smooth_eps"] == 0.0 and head.options["iou_thresh"] == 1.0
    assert head.anchors.tolist() == [[10, 14], [23, 27]] and head.num_anchors == 2
    assert model.net_options["batch"] == 1 and model.net_options["policy"] == "constant"


def test_num_classes_rewrites_heads_and_their_convs(tmp_path):
    path = _write(tmp_path, NET + HEAD.format(filters=20, classes=5))
    model = Darknet(path, num_classes=3)
    assert model.num_classes == 3 and model.heads[0].num_classes == 3
    assert model.layers[0].conv.out_channels == 16
    assert model.heads[0].options["classes"] == 3
    rebuilt = Darknet(model.cfg_text)  # the stored text rebuilds the rewritten model
    assert rebuilt.layers[0].conv.out_channels == 16 and rebuilt.num_classes == 3
    assert "classes=5" in model.source_cfg_text


def test_any_multiple_of_max_stride_works_and_others_are_refused():
    text = NET + "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\n" + HEAD.format(filters=20, classes=5)
    model = Darknet(text, img_size=(32, 96)).eval()
    assert model.max_stride == 2 and model.input_size == (32, 96)
    with torch.no_grad():
        assert model(torch.rand(1, 3, 32, 96)).shape == (1, 2 * 16 * 48, 10)
        assert model(torch.rand(1, 3, 64, 64)).shape == (1, 2 * 32 * 32, 10)  # not only the build size
    with pytest.raises(ValueError, match="not a multiple of the model's largest stride 2"):
        Darknet(text, img_size=33)


@pytest.mark.parametrize("body, line, fragment", [
    # a kernel of 10^16 weights per filter: torch's allocation failed with a RuntimeError traceback
    ("[convolutional]\nfilters=16\nsize=100000000\npad=1\n", 7,
     "layer 0 [convolutional]: filters=16 x 3 input channels x size=100000000x100000000 makes "
     "480,000,000,000,000,000 weights, more than the 1,073,741,824 (4 GiB of float32) a layer may have: is "
     "'size=100000000' a typo?"),
    ("[convolutional]\nfilters=100000000\nsize=1\n", 6, "'filters=100000000' is more than 65536 (a typo?)"),
    ("[connected]\noutput=60000\n", 6, "12288 inputs x output=60000 makes 737,280,000"),  # within the cap: passes
    ("[connected]\noutput=65536\n[connected]\noutput=65536\n", 8, "65536 inputs x output=65536 makes 4,294,967,296"),
    ("[convolutional]\nfilters=1" + "0" * 30 + "\n", 6, "out of range (an integer of at most 18 digits)"),
])
def test_layer_sizes_beyond_reason_are_refused_in_one_line(tmp_path, body, line, fragment):
    path = _write(tmp_path, NET + body)
    if "737,280,000" in fragment:  # a big but sane layer still builds
        assert Darknet(path).input_size == (64, 64)
        return
    with pytest.raises(CfgError) as info:
        Darknet(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:") and fragment in message, message
    assert "\n" not in message


def test_a_huge_value_is_quoted_by_its_start_and_length_not_whole(tmp_path, caplog):
    huge = "x" * 4_000_000
    path = _write(tmp_path, NET + f"[convolutional]\nfilters=2\nnote={huge}\n")
    with caplog.at_level(logging.WARNING, logger="detect.darknet.cfg"):
        Darknet(path)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == f"{path}:7: [convolutional]: unused key 'note = {'x' * 60}... (4,000,000 characters)' (ignored)"
    for text, fragment in ((f"[convolutional]\nfilters={huge}\n", "'filters=" + "x" * 60 + "... (4,000,000 "
                                                                  "characters)': expected an integer"),
                           (f"[convolutional]\nactivation={huge}\n", "unknown activation '" + "x" * 60 + "..."),
                           (f"[route]\nlayers=-1,{huge}\n", "... (4,000,003 characters)': '" + "x" * 60 + "...")):
        with pytest.raises(CfgError) as info:
            Darknet(_write(tmp_path, NET + text))
        assert fragment in str(info.value) and len(str(info.value)) < 1000, str(info.value)[:300]
