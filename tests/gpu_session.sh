#!/usr/bin/env bash
# One lent-GPU session in one call (docs/training.md "On GPUs"): the gpu tests, then `detect.bench train` with the data
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
G=tests/test_gpu.py
if [[ $STAGES == *tests* ]]; then
    timeout ${GPU_TEST_TIMEOUT:-200} python3 -m pytest -q -p no:cacheprovider -s --timeout 150 -rA \
        $G::test_device_painting_on_cuda_equals_the_cpu_painting $G::test_val_on_gpu_matches_cpu \
        $G::test_nccl_ddp_steps_with_amp_and_channels_last $G::test_resume_on_gpu_equals_uninterrupted_run \
        $G::test_sync_batchnorm_equals_one_process_over_the_global_batch \
        $G::test_short_coco_tiny_run_with_cache_ram_augments_on_the_gpu $G::test_default_job_under_torchrun_on_gpu \
        $G::test_batch_size_auto_finds_a_batch_that_fits tests/data/test_device_augment.py \
        > "$OUT/gpu_tests.log" 2>&1
    grep -E "^(PASSED|FAILED|ERROR)|passed|failed|amp |bf16,|rank |cpu 0|CUDA vs|^[0-9]+,|Timeout" "$OUT/gpu_tests.log" \
        | cut -c1-250
fi
if [[ $STAGES == *bench* ]]; then
    timeout ${GPU_BENCH_TIMEOUT:-230} python3 -m detect.bench train --cfg cfg/yolov3-tiny.cfg cfg/yolov3-spp.cfg \
        cfg/yolov4-csp.cfg --img-size 416 --batch-size 64 --workers 15 \
        --loaders ${GPU_LOADERS:-decode ram ram-device ram-device:6} --profile ${GPU_PROFILE:-5} \
        > "$OUT/bench_416.log" 2>&1
    grep -v -i "warn\|anchors" "$OUT/bench_416.log"
    timeout 100 python3 -m detect.bench train --cfg cfg/yolov3-spp.cfg --img-size 640 --batch-size 64 --workers 15 \
        --loaders ram ram-device:6 --profile ${GPU_PROFILE:-5} > "$OUT/bench_640.log" 2>&1
    grep -v -i "warn\|anchors" "$OUT/bench_640.log"
fi
