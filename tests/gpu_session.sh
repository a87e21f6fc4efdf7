#!/usr/bin/env bash
# One lent-GPU session in one call (docs/training.md "On GPUs"): `detect.bench train` with the data excluded and
# included (--cache ram) and the profiler's split, then the gpu tests (docs/benchmarks.md has the figures).
#
# The device machine has its own python3 with torch and no registry: the wheels it lacks come in .whl/, and
# ../shared's coco-tiny, yolov3-tiny.weights and yolov3-tiny.cfg in .devdata/shared/ (both git-ignored, carried):
#   mkdir -p .devdata/shared/{data,weights,darknet-cfg}; cp -r ../shared/data/coco-tiny .devdata/shared/data/
#   cp ../shared/weights/yolov3-tiny.weights .devdata/shared/weights/; cp ../shared/darknet-cfg/yolov3-tiny.cfg ...
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 ... -d .whl pycocotools faster-coco-eval
# Stages: GPU_STAGES="bench before tests wide" (default all): the 416 rows with --cache ram and the split; the same
# data-excluded rows of this tree with the files in .before/ laid over it (an earlier commit's versions of the changed
# files, carried; the tree is assembled in /tmp/before) on the same machine; the gpu tests; yolov3-spp at 640 and compiled at 416. OUT is where the logs go.
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
if [ -d .before ]; then  # this tree with the earlier files laid over it, and ../shared as it sees it
    rm -rf /tmp/before && mkdir -p /tmp/before && cp -r detect cfg data /tmp/before/ && cp -r .before/. /tmp/before/
    rm -f /tmp/before/detect/engine/step_flags.py; [ -e /tmp/shared ] || ln -s "$PWD/.devdata/shared" /tmp/shared
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
nproc
python3 -c "import torch, cv2, numpy; print('torch', torch.__version__, 'cv2', cv2.__version__, 'numpy', numpy.__version__)"
STAGES=${GPU_STAGES:-bench before tests wide}
BENCH="python3 -m detect.bench train --img-size 416 --batch-size 64 --workers 15"
show() { grep -v -i "warn\|anchors" "$1" | cut -c1-400; }
if [[ $STAGES == *bench* ]]; then
    echo "== bench 416, ram"
    timeout 200 $BENCH --cfg cfg/yolov3-tiny.cfg cfg/yolov3-spp.cfg cfg/yolov4-csp.cfg --loaders ram --profile 3 \
        > "$OUT/bench_416.log" 2>&1
    show "$OUT/bench_416.log"
    echo "== bench 416, yolov3-tiny with 6 workers"
    timeout 40 $BENCH --cfg cfg/yolov3-tiny.cfg --loaders ram:6 > "$OUT/bench_tiny6.log" 2>&1
    show "$OUT/bench_tiny6.log"
fi
if [[ $STAGES == *before* && -d .before ]]; then
    echo "== before (.before laid over this tree), data excluded"
    (cd /tmp/before && PYTHONPATH=/tmp/site:$PWD timeout 65 $BENCH --cfg cfg/yolov3-tiny.cfg cfg/yolov3-spp.cfg \
        --no-data --profile 3 > "$OUT/bench_before.log" 2>&1)
    show "$OUT/bench_before.log"
fi
G=tests/test_gpu.py
if [[ $STAGES == *tests* ]]; then
    echo "== gpu tests"
    timeout ${GPU_TEST_TIMEOUT:-140} python3 -m pytest -q -p no:cacheprovider -s --timeout 150 -rA \
        $G::test_nccl_ddp_steps_with_amp_and_channels_last $G::test_resume_on_gpu_equals_uninterrupted_run \
        $G::test_batch_size_auto_finds_a_batch_that_fits $G::test_short_coco_tiny_run_with_cache_ram_augments_on_the_gpu \
        $G::test_val_on_gpu_matches_cpu $G::test_sync_batchnorm_equals_one_process_over_the_global_batch \
        $G::test_default_job_under_torchrun_on_gpu $G::test_device_painting_on_cuda_equals_the_cpu_painting \
        tests/data/test_device_augment.py tests/engine/test_trainer.py > "$OUT/gpu_tests.log" 2>&1
    grep -E "^(PASSED|FAILED|ERROR)|passed|failed|amp |bf16,|rank |cpu 0|CUDA vs|^[0-9]+,|Timeout|Error" \
        "$OUT/gpu_tests.log" | cut -c1-250
fi
if [[ $STAGES == *wide* ]]; then
    echo "== bench 640, ram"
    timeout 50 python3 -m detect.bench train --cfg cfg/yolov3-spp.cfg --img-size 640 --batch-size 64 --workers 15 \
        --loaders ram > "$OUT/bench_640.log" 2>&1
    show "$OUT/bench_640.log"
    echo "== bench 416, compiled"
    timeout 95 $BENCH --cfg cfg/yolov3-spp.cfg --variants bf16-compile --no-data > "$OUT/bench_compile.log" 2>&1
    show "$OUT/bench_compile.log"
fi
