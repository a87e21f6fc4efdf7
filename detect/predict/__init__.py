"""`python -m detect.predict` (detect.predict.cli): detection on images, folders, globs, videos and live streams;
`inputs` lists what a --source names, `outputs` writes what was found, `tracks` runs --track."""

import detect.runtime.cpu_threads  # noqa: F401  (first: OMP_WAIT_POLICY before torch loads)

# isort: split
from detect.predict.cli import main, parse_args, run
from detect.predict.inputs import list_sources, output_names

__all__ = ["list_sources", "main", "output_names", "parse_args", "run"]
