"""Process plumbing: ranks and collectives, liveness, logging, atomic files, run folders, lazy
exports, CPU threads, precision, TensorBoard, the command runner. Imports nothing else of `detect`."""
