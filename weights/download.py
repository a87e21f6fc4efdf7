"""Download official Darknet weight files into weights/ and check them (stdlib only).

    python weights/download.py yolov3-tiny.weights darknet53.conv.74
    python weights/download.py --list

Sizes come from the reference's tables (docs/darknet-format.md §4.4 and §5: 20-byte header + 4 bytes per float
of the matching cfg); a sha256 is checked only where one was computed from a file at hand.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import urllib.request
from pathlib import Path

PJREDDIE = "https://pjreddie.com/media/files"
ALEXEYAB = "https://github.com/AlexeyAB/darknet/releases/download"

# name -> (url, size in bytes, sha256 or None, cfg it pairs with)
FILES = {
    "yolov3-tiny.weights": (f"{PJREDDIE}/yolov3-tiny.weights", 35_434_956,
                            "dccea06f59b781ec1234ddf8d1e94b9519a97f4245748a7d4db75d5b7080a42c", "yolov3-tiny.cfg"),
    "yolov3.weights": (f"{PJREDDIE}/yolov3.weights", 248_007_048, None, "yolov3.cfg"),
    "yolov3-spp.weights": (f"{PJREDDIE}/yolov3-spp.weights", 252_209_544, None, "yolov3-spp.cfg"),
    "darknet53.conv.74": (f"{PJREDDIE}/darknet53.conv.74", 162_482_580, None, "yolov3*.cfg (first 74 layers)"),
    "yolov4.weights": (f"{ALEXEYAB}/darknet_yolo_v3_optimal/yolov4.weights", 257_717_640, None, "yolov4.cfg"),
    "yolov4.conv.137": (f"{ALEXEYAB}/darknet_yolo_v3_optimal/yolov4.conv.137", 170_038_676, None,
                        "yolov4.cfg (first 137 layers)"),
    "yolov4-tiny.weights": (f"{ALEXEYAB}/darknet_yolo_v4_pre/yolov4-tiny.weights", 24_251_276, None,
                            "yolov4-tiny.cfg"),
    "yolov4-tiny.conv.29": (f"{ALEXEYAB}/darknet_yolo_v4_pre/yolov4-tiny.conv.29", 19_789_716, None,
                            "yolov4-tiny.cfg (first 29 layers)"),
    "yolov4-csp.weights": (f"{ALEXEYAB}/darknet_yolo_v4_pre/yolov4-csp.weights", 211_944_840, None,
                           "yolov4-csp.cfg"),
    "yolov4x-mish.weights": (f"{ALEXEYAB}/darknet_yolo_v4_pre/yolov4x-mish.weights", 399_388_168, None,
                             "yolov4x-mish.cfg"),
    "yolov7-tiny.weights": (f"{ALEXEYAB}/yolov4/yolov7-tiny.weights", 24_967_560, None, "yolov7-tiny.cfg"),
    "yolov7.weights": (f"{ALEXEYAB}/yolov4/yolov7.weights", 147_898_248, None, "yolov7.cfg"),
}


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check(path: Path, size: int, sha256: str | None) -> None:
    actual = path.stat().st_size
    if actual != size:
        raise ValueError(f"{path}: {actual:,} bytes, expected {size:,} (truncated download, or another file)")
    if sha256 is not None and sha256_of(path) != sha256:
        raise ValueError(f"{path}: sha256 differs from the known {sha256}")


def download(name: str, directory: Path, verify: bool = True) -> Path:
    if name not in FILES:
        raise KeyError(f"unknown weights '{name}'; known: {', '.join(FILES)}")
    url, size, sha256, _ = FILES[name]
    target = directory / name
    if target.exists():
        if verify:
            check(target, size, sha256)
        return target
    partial = target.with_name(target.name + ".part")
    print(f"downloading {url} -> {target}", file=sys.stderr)
    with urllib.request.urlopen(url, timeout=60) as response, open(partial, "wb") as out:
        while block := response.read(1 << 20):
            out.write(block)
    if verify:
        check(partial, size, sha256)
    os.replace(partial, target)  # only a complete, checked file gets the final name
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="files to fetch (see --list)")
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent)
    parser.add_argument("--list", action="store_true", help="list the known files")
    parser.add_argument("--no-verify", action="store_true", help="skip the size/sha256 checks")
    args = parser.parse_args(argv)
    if args.list or not args.names:
        for name, (url, size, sha256, cfg) in FILES.items():
            print(f"{name:22s} {size:>13,} bytes  {cfg:32s} {url}")
        return 0
    args.dir.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        print(download(name, args.dir, verify=not args.no_verify))
    return 0


if __name__ == "__main__":
    sys.exit(main())
