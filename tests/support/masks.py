"""Random boxes drawn as white masks on black images, and the box a mask shows: box-vs-pixel checks of augmentation."""

import numpy as np

TOL = 1.5  # pixels


def random_box(rng, h, w, min_side=3):
    """A box with integer corners (so its mask is exact) inside an h x w image, at least min_side wide."""
    x1, y1 = int(rng.integers(0, w - min_side)), int(rng.integers(0, h - min_side))
    x2, y2 = int(rng.integers(x1 + min_side, w + 1)), int(rng.integers(y1 + min_side, h + 1))
    return np.array([[x1, y1, x2, y2]], dtype=np.float64)


def mask_image(h, w, box=None):
    image = np.zeros((h, w, 3), dtype=np.uint8)
    if box is not None:
        x1, y1, x2, y2 = box[0].astype(int)
        image[y1:y2, x1:x2] = 255
    return image


def mask_box(image):
    ys, xs = np.nonzero(image[..., 0] > 127)
    if len(xs) == 0:
        return None
    return np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1], dtype=np.float64)


def random_tiles(rng, size, count):
    """`count` tiles with long side = size; one random tile carries one box, the others are empty."""
    carrier = int(rng.integers(count))
    images, boxes, classes = [], [], []
    for i in range(count):
        long_side_w = rng.random() < 0.5
        other = int(rng.integers(size // 2, size + 1))
        h, w = (other, size) if long_side_w else (size, other)
        box = random_box(rng, h, w) if i == carrier else None
        images.append(mask_image(h, w, box))
        boxes.append(box if box is not None else np.zeros((0, 4)))
        classes.append(np.array([7] if box is not None else [], dtype=np.int64))
    return images, boxes, classes, boxes[carrier]
