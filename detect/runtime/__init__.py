"""Process plumbing: ranks and collectives, liveness, logging, atomic files, run folders, lazy
exports, CPU threads, precision, TensorBoard, the command runner, Ctrl-C held back during writes, and the files
shipped inside the package (assets: cfgs, class names, yamls, dataset specs). Imports nothing else of `detect`."""
