"""Training images changed: host augmentation and its settings, mosaic, resize modes and letterbox geometry, multi-scale, the device-side augmentation and its per-sample plan."""
