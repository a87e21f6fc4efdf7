"""Small Darknet cfgs that several tests build models from."""

GRAPH_CFG = """[net]
width=22
height=18
channels=3

# 0
[convolutional]
batch_normalize=1
filters=8
size=3
pad=1
activation=leaky

# 1-4: maxpool 2/2 on an even map, then odd 9x11 maps: 2/1, SPP 5/1, 3/2 with the default padding
[maxpool]
size=2
stride=2

[maxpool]
size=2
stride=1

[maxpool]
size=5
stride=1

[maxpool]
size=3
stride=2

# 5-7: routes, plain and grouped (one and several inputs)
[route]
layers=2,3

[route]
layers=-1
groups=2
group_id=1

[route]
layers=5,6,2
groups=4
group_id=3

# 8-11: shortcuts: fewer-channel add with activation; weighted multi-from; per-channel softmax
[convolutional]
batch_normalize=1
filters=16
size=3
pad=1
activation=linear

[shortcut]
from=-3
activation=leaky

[shortcut]
from=2,7
weights_type=per_feature
weights_normalization=relu

[shortcut]
from=8
weights_type=per_channel
weights_normalization=softmax
activation=swish

# 12-13
[convolutional]
filters=32
size=1
activation=linear

[shortcut]
from=11
weights_type=per_channel
weights_normalization=avg_relu

# 14-18: depth maxpool (32 channels into 5), upsample x2, sum-downsample with scale, scale only, local_avgpool
[maxpool]
maxpool_depth=1
out_channels=5

[upsample]
stride=2

[upsample]
stride=-2
scale=0.5

[upsample]
stride=1
scale=2

[local_avgpool]
size=3
stride=2

# 19-23: reorg3d and the legacy reorg on layer 0
[route]
layers=0

[reorg3d]
stride=2

[route]
layers=0

[reorg]
stride=2

[convolutional]
filters=1
size=1
activation=logistic

# 24-27: scale_channels both ways, sam
[scale_channels]
from=22
scale_wh=1

[avgpool]

[scale_channels]
from=20
activation=leaky

[convolutional]
filters=32
size=3
pad=1
activation=logistic

[sam]
from=26

# 29-36: dropout, batchnorm, activation, empty, maxpool, connected (BN and bias), softmax
[dropout]
probability=0.3

[batchnorm]

[activation]
activation=tanh

[empty]

[maxpool]
size=2
stride=2

[connected]
output=20
batch_normalize=1
activation=leaky

[connected]
output=12
activation=linear

[softmax]
groups=3
temperature=2
"""

YOLO_CFG = """[net]
width=64
height=48
channels=3

[convolutional]
batch_normalize=1
filters=8
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=21
size=1
activation=linear

[yolo]
mask=0,1,2
anchors=4,6, 9,12, 14,10, 20,18, 30,24, 40,44
classes=2
num=6
scale_x_y=1.1

[route]
layers=-3

[convolutional]
batch_normalize=1
filters=16
size=3
stride=2
pad=1
activation=leaky

[convolutional]
filters=21
size=1
activation=logistic

[yolo]
mask=3,4,5
anchors=4,6, 9,12, 14,10, 20,18, 30,24, 40,44
classes=2
num=6
scale_x_y=2.0
new_coords=1
"""
