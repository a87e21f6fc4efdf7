"""A live MJPEG stream for the tests: JPEG frames as HTTP multipart/x-mixed-replace on 127.0.0.1 (an ephemeral
port), served by a thread, the way IP cameras serve them. Each frame carries its number in a row of black and
white blocks (`stamp`, `stamp_of`), so a test can tell which frames the reader delivered.

`MjpegServer(frames, fps, per_connection=None, total=None)`: frames are served in a loop; a connection ends after
`per_connection` frames (the server stays up: a reader reconnects); after `total` frames in all the server stops
listening (a reconnection finds nobody). `served` counts the frames sent; `url`; `stop()`.
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import cv2
import numpy as np

BITS, BLOCK = 12, 8  # frame numbers up to 4095, in 8 px blocks along the top row


def stamp(image: np.ndarray, number: int) -> np.ndarray:
    out = image.copy()
    for bit in range(BITS):
        out[:BLOCK, bit * BLOCK:(bit + 1) * BLOCK] = 255 if number >> bit & 1 else 0
    return out


def stamp_of(image: np.ndarray) -> int:
    blocks = [image[1:BLOCK - 1, bit * BLOCK + 1:(bit + 1) * BLOCK - 1].mean() for bit in range(BITS)]
    return sum(1 << bit for bit, level in enumerate(blocks) if level > 128)


def coco_frames(folder, count: int = 8, size=(320, 240)) -> list[np.ndarray]:
    """The first `count` images of a folder, resized to one frame size."""
    paths = sorted(folder.glob("*.jpg"))[:count]
    return [cv2.resize(cv2.imread(str(p)), size) for p in paths]


class MjpegServer:
    def __init__(self, frames: list[np.ndarray], fps: float = 30.0, per_connection: int | None = None,
                 total: int | None = None):
        self.frames, self.period, self.per_connection, self.total = frames, 1.0 / fps, per_connection, total
        self.served, self.connections = 0, 0
        self._lock, self._stopped = threading.Lock(), threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                server._serve(self)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/live/stream.mjpg"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="mjpeg-server")
        self._thread.start()

    def _next_number(self) -> int | None:
        with self._lock:
            if self._stopped.is_set() or (self.total is not None and self.served >= self.total):
                return None
            self.served += 1
            return self.served - 1

    def _serve(self, handler) -> None:
        with self._lock:
            self.connections += 1
        handler.send_response(200)
        handler.send_header("Content-Type", "multipart/x-mixed-replace; boundary=frame")
        handler.end_headers()
        sent = 0
        while self.per_connection is None or sent < self.per_connection:
            number = self._next_number()
            if number is None:
                break
            frame = stamp(self.frames[number % len(self.frames)], number)
            data = cv2.imencode(".jpg", frame, [cv2.IMWRITE_JPEG_QUALITY, 90])[1].tobytes()
            try:
                handler.wfile.write(b"--frame\r\nContent-Type: image/jpeg\r\nContent-Length: %d\r\n\r\n" % len(data)
                                    + data + b"\r\n")
                handler.wfile.flush()
            except OSError:  # the reader went away
                return
            sent += 1
            time.sleep(self.period)
        if self.total is not None and self.served >= self.total:
            threading.Thread(target=self.stop, daemon=True).start()  # stop listening: reconnections fail

    def stop(self) -> None:
        if not self._stopped.is_set():
            self._stopped.set()
            self.httpd.shutdown()
            self.httpd.server_close()

    def __enter__(self) -> MjpegServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
