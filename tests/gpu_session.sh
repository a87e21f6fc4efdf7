#!/usr/bin/env bash
# One lent-GPU session in one call (README "On GPUs"): the gpu tests, then `detect.bench train` with the data
# excluded and included (decode, --cache ram, --cache ram + augmentation on the device) and the profiler's split.
#
# The device machine has its own python3 with torch and no registry: the wheels it lacks come in .whl/, and
# ../shared's coco-tiny, yolov3-tiny.weights and yolov3-tiny.cfg in .devdata/shared/ (both git-ignored, carried):
#   mkdir -p .devdata/shared/{data,weights,darknet-cfg}; cp -r ../shared/data/coco-tiny .devdata/shared/data/
#   cp ../shared/weights/yolov3-tiny.weights .devdata/shared/weights/; cp ../shared/darknet-cfg/yolov3-tiny.cfg ...
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl pycocotools faster-coco-eval
# Stages: GPU_STAGES="tests bench" (default both); OUT is where the logs go.
set -uo pipefail
OUT=${OUT:-/tmp/gpu-session}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=4
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH=/tmp/site:$PWD
fi
[ -e ../shared ] || ln -s "$PWD/.devdata/shared" ../shared
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
python3 -c "import torch, cv2, numpy; print('torch', torch.__version__, 'cv2', cv2.__version__, 'numpy', numpy.__version__)"
STAGES=${GPU_STAGES:-tests bench}
if [[ $STAGES == *tests* ]]; then
    timeout 330 python3 -m pytest -q -p no:cacheprovider -m gpu -s -x --timeout 300 tests/test_gpu.py \
        2>&1 | tee "$OUT/gpu_tests.log" | grep -E "passed|failed|error|Error|amp |bf16,|rank |cpu |CUDA vs|^[0-9]+,|epoch," \
        | cut -c1-300
    python3 -m pytest -q -p no:cacheprovider tests/data/test_device_augment.py 2>&1 | tail -1
fi
if [[ $STAGES == *bench* ]]; then
    timeout 330 python3 -m detect.bench train --cfg cfg/yolov3-tiny.cfg cfg/yolov3-spp.cfg cfg/yolov4-csp.cfg \
        --img-size 416 --batch-size 64 --workers 15 --loaders ${GPU_LOADERS:-decode ram ram-device} \
        --profile ${GPU_PROFILE:-10} 2>&1 | tee "$OUT/bench_416.log" | grep -v Warning
    timeout 150 python3 -m detect.bench train --cfg cfg/yolov3-spp.cfg --img-size 640 --batch-size 64 --workers 15 \
        --loaders ram ram-device --profile ${GPU_PROFILE:-10} 2>&1 | tee "$OUT/bench_640.log" | grep -v Warning
fi
