"""`python -m detect.predict`: detect objects in images, folders, globs, videos or streams and save what was found.

    python -m detect.predict --cfg cfg/yolov3-tiny.cfg --weights weights/yolov3-tiny.weights \\
        --source photos/ --names cfg/coco.names
    python -m detect.predict ... --source rtsp://camera/live     # or 0 (a webcam), http(s):// video or MJPEG

Writes to runs/predict/<name>: per image an annotated copy under the image's own file name, labels/<stem>.txt
(YOLO labels: class cx cy w h, normalised to the image, as train.py reads them; --save-conf appends the
confidence) and json/<stem>.json (boxes in pixels); per
video an annotated <stem>.mp4 and, per frame, labels/<stem>_<frame>.txt and json/<stem>_<frame>.json.
Output names are unique per input: inputs that would share them (a.jpg and a.png; an image clip_3.jpg and the
frame 3 of a video clip.mp4) are each named by their whole file name instead (labels/a.jpg.txt,
labels/a.png.txt; labels/clip_3.jpg.txt, clip.mp4.mp4, labels/clip.mp4_3.txt). A folder's sub-folders are
searched with --recursive only; outputs mirror the path below --source (x/a.jpg -> x/a.jpg, labels/x/a.txt,
json/x/a.json), and for a glob the path below its last folder without a wildcard.
A stream (a webcam index, rtsp://, http(s):// ...) is written like a video named webcam<N> or by the URL's last
path stem; frame numbers count the source's frames, so frames dropped while the model was busy leave gaps.
Ctrl-C stops cleanly: every frame or image is written whole or not at all, and the video is closed playable.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from pathlib import Path

import detect.runtime.cpu_threads  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch loads; docs/inference.md "CPU engines")

# isort: split
import cv2
import numpy as np

from detect.data.formats.spec import read_class_names
from detect.data.records.images import BadImage, read_image
from detect.inference.cli_flags import (
    add_inference_flags,
    add_model_flags,
    add_run_folder_flags,
    add_workers_flag,
    check_inference_args,
    inference_options,
)
from detect.inference.handle import ModelHandle
from detect.inference.loading import class_names
from detect.inference.options import PREDICT, InferenceOptions, build_settings, load_handle
from detect.inference.predictor import InferenceSettings, Predictor
from detect.predict.inputs import Input, UnreadableSource, list_sources
from detect.predict.outputs import draw, open_writer, save_results, summary, write_image
from detect.predict.tracks import Tracking, add_track_flags
from detect.runtime import dist
from detect.runtime.commands import run_command
from detect.runtime.interrupts import deferred_interrupt
from detect.runtime.log import setup_logging
from detect.runtime.runs import next_run_dir
from detect.streams.reader import (
    DEFAULT_RETRIES,
    DEFAULT_RETRY_WAIT_S,
    FrameReader,
    is_stream,
    open_stream,
    source_stem,
)
from detect.tracking.config import TrackerConfig
from detect.tracking.frames import source_frames
from detect.tracking.settings import tracking_detector

log = logging.getLogger("detect.predict")  # not __name__: under `python -m` that is __main__, outside `detect`


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m detect.predict", description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n\n", 2)[2],  # what is written, and the output names
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_flags(p)
    p.add_argument("--source", required=True,
                   help="an image, a folder, a glob pattern, a video file, a webcam index (0) or a stream URL as "
                        "OpenCV opens it (rtsp://, http(s):// video or MJPEG); a live stream is read on a thread "
                        "and the newest frame wins (frames that arrive while the model is busy are dropped and "
                        "counted), a file's frames are all processed")
    p.add_argument("--recursive", action="store_true",
                   help="search a --source folder's sub-folders too (default off: only the files directly in "
                        "it; the sub-folders left out are counted in the log); outputs mirror the sub-paths")
    p.add_argument("--save-txt", action="store_true",
                   help="labels/*.txt (YOLO labels, as train.py reads them) are always written; the flag is "
                        "accepted for the spelling other YOLO tools use")
    p.add_argument("--save-conf", action="store_true",
                   help="append each box's confidence to its labels/*.txt line (train.py reads such pseudo-labels, "
                        "the 6th column ignored and counted)")
    p.add_argument("--names", help="class names: a .names file (one per line), a data spec (.yaml) or a Darknet "
                   "obj.data; default: the names a .pt carries, else COCO's for an 80-class model, else the class ids")
    p.add_argument("--data", help="a dataset spec (data/*.yaml) or Darknet obj.data whose class names label the "
                   "detections (as Darknet's `detector test obj.data ...`); the same as --names with that file")
    add_inference_flags(p, PREDICT,
                        batch_help="images per forward pass (images of one canvas shape are batched; video: 1 frame)")
    p.add_argument("--retries", type=int, default=DEFAULT_RETRIES,
                   help=f"a live stream that stops is reopened this many times before it ends (default "
                        f"{DEFAULT_RETRIES}; a frame read resets the count)")
    p.add_argument("--retry-wait", type=float, default=DEFAULT_RETRY_WAIT_S, metavar="SECONDS",
                   help=f"seconds between reconnection tries (default {DEFAULT_RETRY_WAIT_S:g})")
    add_track_flags(p)
    add_workers_flag(p, "threads that read and decode image files ahead of the model, at most 2 per thread "
                        "waiting (0: each image is read when its turn comes, in the main thread); video frames are "
                        "read in the main thread")
    add_run_folder_flags(p, "runs/predict")
    args = p.parse_args(argv)
    check_inference_args(p, args)
    if args.names and args.data:
        p.error(f"--names {args.names} and --data {args.data} both give the class names; give one of them")
    if args.save_mot and not args.track:
        p.error("--save-mot writes tracks: add --track")
    if args.retries < 0 or args.retry_wait < 0:
        p.error(f"--retries and --retry-wait must be 0 or more, got {args.retries} and {args.retry_wait}")
    return args


def decode_ahead(paths: list[Path], workers: int):
    """(path, BGR image or the BadImage it raised) per path, in order: read and decoded on `workers` threads,
    at most 2 per thread ahead of the consumer (OpenCV's decoders release the GIL); 0 workers: in this thread."""
    if workers == 0:
        yield from ((path, _read_or_bad_image(path)) for path in paths)
        return
    remaining = iter(paths)
    with ThreadPoolExecutor(workers, thread_name_prefix="predict-decode") as pool:
        pending = deque((path, pool.submit(_read_or_bad_image, path)) for path in islice(remaining, 2 * workers))
        while pending:
            path, future = pending.popleft()
            following = next(remaining, None)
            if following is not None:
                pending.append((following, pool.submit(_read_or_bad_image, following)))
            yield path, future.result()


def _read_or_bad_image(path: Path):
    """The image at `path`, or the BadImage that says why it cannot be read (the caller reports and skips it)."""
    try:
        return read_image(path)
    except BadImage as e:
        return e


def run(args) -> Path:
    ctx = dist.init_distributed(args.device)
    setup_logging(ctx.rank, ctx.world_size)
    options = inference_options(args)
    handle = load_handle(args.weights, args.cfg, options, ctx.device)
    names_flag = f"--data {args.data}" if args.data else f"--names {args.names}" if args.names else "--names"
    given = read_class_names(args.data or args.names) if args.data or args.names else None
    names = class_names(handle, given, names_flag)
    settings, tracker = detector_settings(handle, options, args.track, ctx.device)
    predictor = Predictor(handle.runner, settings, ctx.device)
    # the source is opened (a stream) or listed (files) before the run folder exists: a typo leaves none behind
    stream = open_stream(args.source, retries=args.retries, retry_wait_s=args.retry_wait) \
        if is_stream(args.source) else None
    inputs = list_sources(args.source, args.recursive) if stream is None else []
    run_dir = next_run_dir(args.project, args.name)
    for sub in ("labels", "json"):
        (run_dir / sub).mkdir(parents=True, exist_ok=True)
    tracking = tracker and Tracking(tracker, run_dir, names, args.source, args.save_conf, args.save_mot)
    try:
        if stream is not None:
            if predict_frames(predictor, stream, source_stem(args.source), names, run_dir, "stream",
                              args.save_conf, tracking) == 0:
                raise ValueError(f"--source {stream.name}: no frame could be read from the stream")
        else:
            predict_files(predictor, inputs, names, run_dir, args, tracking)
    except KeyboardInterrupt:
        if tracking:  # the tracks so far: their counts and tracks.json, as at the end
            tracking.finish()
        print(f"interrupted (Ctrl-C): what was written so far is in {run_dir}")
        raise
    if tracking:
        tracking.finish()
    print(f"results written to {run_dir}")
    return run_dir


def detector_settings(handle: ModelHandle, options: InferenceOptions, track: str | None,
                      device) -> tuple[InferenceSettings, TrackerConfig | None]:
    """predict's detector (PREDICT's defaults); with --track, as tracking runs it (the tracker's config too)."""
    if track:
        return tracking_detector(handle, options, track, device)
    return build_settings(handle, options, PREDICT, device), None


def predict_files(predictor: Predictor, inputs: list[Input], names, run_dir: Path, args,
                  tracking: Tracking | None = None) -> None:
    """Images in batches of the predictor's batch size (decoded ahead on args.workers threads) and videos frame by frame; a file
    that cannot be read is skipped and counted, and a source none of whose files can be read is an error."""
    skipped, batch = 0, []
    decoded = decode_ahead([item.path for item in inputs if not item.is_video], args.workers)
    with contextlib.closing(decoded):  # an error stops the decoding threads
        for i, item in enumerate(inputs, 1):
            label = f"{i}/{len(inputs)}"
            if not item.is_video:
                batch.append((item, label, next(decoded)[1]))
                if len(batch) == predictor.settings.batch_size or i == len(inputs):
                    skipped += predict_images(predictor, batch, names, run_dir, args.save_conf, tracking)
                    batch = []
                continue
            skipped += predict_images(predictor, batch, names, run_dir, args.save_conf, tracking)
            batch = []
            try:
                predict_video(predictor, item, names, run_dir, f"video {label}", args.save_conf, tracking)
            except UnreadableSource as e:
                log.warning("skipped %s", e)
                skipped += 1
    if skipped == len(inputs):
        raise ValueError(f"--source {args.source}: none of its {len(inputs)} file(s) could be read (see above)")
    if skipped:
        print(f"{len(inputs) - skipped} of {len(inputs)} files processed; {skipped} skipped (could not be read)")


def predict_images(predictor: Predictor, images: list[tuple[Input, str, np.ndarray | BadImage]], names,
                   run_dir: Path, save_conf: bool = False, tracking: Tracking | None = None) -> int:
    """Detect in decoded image files (input, progress label, image or the BadImage its decoding raised) as one
    batch and save the results; returns how many were skipped because they cannot be decoded (each named in one
    warning)."""
    tick = time.perf_counter()
    readable = [image for _, _, image in images if not isinstance(image, BadImage)]
    found = iter(predictor(readable) if readable else [])
    elapsed = (time.perf_counter() - tick) * 1000 / max(len(readable), 1)
    frames = tracking.frames((item, image) for item, _, image in images) if tracking else None
    for item, label, image in images:
        frame = next(frames) if tracking else None  # a frame of its folder's sequence (unreadable: a gap)
        if isinstance(image, BadImage):
            log.warning("skipped %s", UnreadableSource(f"{item.path}: {image.detail}"))
            continue
        det = next(found)
        if tracking:  # each image to its folder's tracker, also when the batch holds several folders
            det, annotated, save = tracking.image(item, frame, det)
        with deferred_interrupt():  # Ctrl-C: an image's three outputs are written whole or not at all
            write_image(run_dir / item.relative, annotated if tracking else draw(image, det, names))
            save() if tracking else save_results(det, names, image.shape, item.output, run_dir, str(item.path),
                                                 save_conf)
        print(f"image {label} {item.path}: {summary(det, names)} ({elapsed:.1f} ms)")
    return len(images) - len(readable)


def predict_video(predictor: Predictor, item: Input, names, run_dir: Path, label: str,
                  save_conf: bool = False, tracking: Tracking | None = None) -> None:
    """Every frame of a video file (decoded ahead on a thread) into run_dir/<output>.mp4, txt and json."""
    try:
        reader = FrameReader(item.path, live=False)
    except ValueError as e:
        raise UnreadableSource(str(e)) from None
    if predict_frames(predictor, reader, item.output, names, run_dir, label, save_conf, tracking) == 0:
        raise UnreadableSource(f"{item.path}: the video has no readable frame")


def predict_frames(predictor: Predictor, reader: FrameReader, output: str, names, run_dir: Path, label: str,
                   save_conf: bool = False, tracking: Tracking | None = None) -> int:
    """Annotate the frames `reader` gives into run_dir/<output>.mp4, with labels/<output>_<index>.txt and
    json/<output>_<index>.json per frame (index: the frame's number in the source); returns the frames written.
    The reader is closed and the video finished at the end, on an error and on Ctrl-C alike, and the counts
    (read, processed, dropped, reconnects) printed."""
    writer, size, written = None, None, 0
    try:
        for index, frame, _ in source_frames(reader):  # frame_source's loop: numbered in the source
            tick = time.perf_counter()
            det = predictor([frame])[0]
            elapsed = (time.perf_counter() - tick) * 1000
            if tracking:  # the rows become the tracked ones, with their ids
                det, annotated = tracking.frame(tracking.video_key(output), det, frame, reader.fps, index)
            else:
                annotated = draw(frame, det, names)
            with deferred_interrupt():  # Ctrl-C: a frame's video frame, txt and json are written whole or not at all
                if writer is None:
                    writer, size = open_writer(run_dir / f"{output}.mp4", reader.fps, frame)
                # a stream reopened at another size still fits the video
                writer.write(annotated if annotated.shape[1::-1] == size else cv2.resize(annotated, size))
                if tracking:
                    tracking.save(det, frame.shape, f"{output}_{index}", f"{reader.name}#{index}",
                                  tracking.video_key(output), index + 1)
                else:
                    save_results(det, names, frame.shape, f"{output}_{index}", run_dir, f"{reader.name}#{index}",
                                 save_conf)
                written += 1
            print(f"{label} {reader.name} frame {index}: {summary(det, names)} ({elapsed:.1f} ms)")
    finally:
        reader.close()
        if writer is not None:
            writer.release()  # writes the mp4's index: the file plays
        unfinished = reader.stats.processed - written
        print(f"{label} {reader.name}: {reader.stats.line()}" + (f" ({unfinished} interrupted before its outputs "
                                                                  f"were written)" if unfinished else ""))
    return written


def main(argv=None) -> int:
    """0 on success, 2 for a user's mistake, 130 when Ctrl-C ended the run (what was written is whole)."""
    try:
        return run_command(parse_args, run, argv)
    except KeyboardInterrupt:
        return 130
