"""Imports inside `detect` run one way: the graph of `detect` modules has no cycle, and packages import only
from the layers below their own (`LAYERS`, docs/architecture.md).

Every `import` and `from ... import` counts, at module level and inside functions (a deferred import still
ties two modules together; it only hides the circle from the interpreter). Relative imports are resolved.
`from pkg import name` is an edge to the submodule `pkg.name` when there is one, else to `pkg`. Running a
package's `__init__` before its submodule is not an edge: package `__init__`s only re-export.
"""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "detect"

# The layers of `detect`, lowest first: a unit (a package, or an entry-point module at the top) imports only
# from units of lower layers; units of one layer are independent of each other, except the entry points, which
# may use one another (val and predict use api) as long as no circle forms.
LAYERS = (
    ("runtime",),  # process plumbing and the shipped files: nothing else of detect
    ("ops",),  # tensor helpers, class identity (coco.names is a shipped file)
    ("darknet", "data", "streams"),  # the model and its files; datasets to batches; frames of live sources
    ("inference",),  # model files to detections: the loader, the engines, the Predictor, decode + NMS
    # COCO and the other metrics, over the Predictor's detections; detections over frames to tracks, MOT metrics
    ("evaluation", "tracking"),
    ("plots", "export"),  # pictures, of what evaluation computes among the rest; ONNX / Darknet files written
    ("engine",),  # training
    ("api", "train", "val", "predict", "bench", "tune", "audit"),  # entry points
)
ENTRY_LAYER = len(LAYERS) - 1
# Inside `detect.data`, the pipeline's stages by the same rule: what each image is (records, caches, image
# files), read from its format or changed by augmentation, sampled per rank or made into datasets, and the loaders on top.
DATA_LAYERS = (
    ("records",),
    ("formats", "augmentation"),
    ("sampling", "datasets"),
    ("loader",),
)


def package_modules(root: Path, package: str) -> dict[str, Path]:
    """{dotted module name: file} of every module of `package` (a folder under `root`)."""
    modules = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that module `name` (file `path`) imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def known(target: str) -> str | None:
        while target and target not in modules:  # `import detect.data.x.Y`-style dotted names
            target = target.rpartition(".")[0]
        return target or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(known(alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # `from .x import y`: one dot is this package, each further dot its parent
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else known(base))
    found.discard(None)
    found.discard(name)
    return found


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """{module: the package's modules it imports} for every module of `package`."""
    modules = package_modules(root, package)
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (a -> b -> ... -> a) through every strongly connected group of modules (Tarjan)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def connect(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.add(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(group)

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return [_cycle_within(graph, group) for group in groups]


def _cycle_within(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, staying inside the group."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for v in frontier:
            for w in sorted(graph[v] & group):
                if w == start:
                    return paths[v] + [start]
                if w not in paths:
                    paths[w] = paths[v] + [w]
                    following.append(w)
        frontier = following
    raise AssertionError(f"group {sorted(group)} is strongly connected but has no cycle through {start}")


def test_import_graph_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]


def test_relative_function_level_and_submodule_imports_are_edges(tmp_path):
    files = {
        "pkg/__init__.py": "from .a import f\n",
        "pkg/a.py": "import json\n\ndef f():\n    from pkg.sub import b\n    return b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from .. import a\nfrom ..sub import c\nimport pkg.sub.c\n",
        "pkg/sub/c.py": "from pkg.a import f\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert import_graph(tmp_path, "pkg") == {
        "pkg": {"pkg.a"}, "pkg.a": {"pkg.sub.b"}, "pkg.sub": set(), "pkg.sub.b": {"pkg.a", "pkg.sub.c"},
        "pkg.sub.c": {"pkg.a"}}


def test_detect_imports_run_one_way():
    cycles = find_cycles(import_graph())
    listing = "\n".join(" -> ".join(cycle) for cycle in cycles)
    print(f"import cycles in {PACKAGE}: {len(cycles)}" + (f"\n{listing}" if listing else ""))
    assert not cycles, f"import cycles in {PACKAGE} (each imports the next, the last the first):\n{listing}"


def unit_of(module: str, package: str = PACKAGE) -> str:
    """The layer unit of a module: the package (or module) right under `package`; `package` itself."""
    parts = module.split(".")
    depth = package.count(".") + 1
    return parts[depth] if len(parts) > depth else package


def layer_violations(graph: dict[str, set[str]], layers=LAYERS, package: str = PACKAGE) -> list[str]:
    """Every import edge within `package` that goes up a layer, sideways between two units of one layer
    (outside the top layer), or to a unit no layer names."""
    layer = {u: i for i, units in enumerate(layers) for u in units}
    top = len(layers) - 1
    inside = package + "."
    bad = []
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if not (a.startswith(inside) and b.startswith(inside)):
                continue
            ua, ub = unit_of(a, package), unit_of(b, package)
            if ua == ub or ua == package:  # within a unit; a package's __init__ only re-exports lazily
                continue
            if ua not in layer or ub not in layer:
                bad.append(f"{a} -> {b}: {ua if ua not in layer else ub} is in no layer")
            elif layer[ub] > layer[ua]:
                bad.append(f"{a} -> {b}: {ua} (layer {layer[ua] + 1}) imports from above ({layer[ub] + 1})")
            elif layer[ub] == layer[ua] and layer[ua] != top:
                bad.append(f"{a} -> {b}: {ua} and {ub} share layer {layer[ua] + 1}, which keeps them apart")
    return bad


def test_layer_rule_finds_upward_sideways_and_unknown_imports():
    graph = {"detect.runtime.log": {"detect.engine.loss"}, "detect.darknet.model": {"detect.data.formats.spec"},
             "detect.engine.loss": {"detect.runtime.log", "detect.misc.x"}, "detect.val": {"detect.api"},
             "detect.api": {"detect.darknet.model"}}
    assert layer_violations(graph) == [
        "detect.darknet.model -> detect.data.formats.spec: darknet and data share layer 3, which keeps them apart",
        "detect.engine.loss -> detect.misc.x: misc is in no layer",
        "detect.runtime.log -> detect.engine.loss: runtime (layer 1) imports from above (7)"]


def test_detect_packages_import_only_lower_layers():
    bad = layer_violations(import_graph())
    assert not bad, "imports against the layers (tests/test_imports.py LAYERS):\n" + "\n".join(bad)


def test_data_stages_import_only_earlier_stages():
    """detect/data/ shows the pipeline: records, then formats and augmentation, sampling and datasets, the loaders."""
    bad = layer_violations(import_graph(), DATA_LAYERS, package=f"{PACKAGE}.data")
    assert not bad, "imports against the data stages (tests/test_imports.py DATA_LAYERS):\n" + "\n".join(bad)
    units = {p.stem for p in (ROOT / PACKAGE / "data").iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    units |= {p.name for p in (ROOT / PACKAGE / "data").iterdir() if (p / "__init__.py").is_file()}
    assert units == {u for layer in DATA_LAYERS for u in layer}


def test_the_top_of_detect_is_packages_and_entry_points_only():
    """`ls detect/` reads as the architecture: every unit is a package or an entry point of the top layer."""
    units = {p.stem for p in (ROOT / PACKAGE).iterdir() if p.suffix == ".py" and p.stem != "__init__"}
    units |= {p.name for p in (ROOT / PACKAGE).iterdir() if (p / "__init__.py").is_file()}
    assert units == {u for layer in LAYERS for u in layer}
    modules = {u for u in units if (ROOT / PACKAGE / f"{u}.py").is_file()}
    assert modules <= set(LAYERS[ENTRY_LAYER]), f"modules outside a package, not entry points: {modules}"


OUTSIDE = ("benchmarks", "tests")  # a clone's folders beside the package, not installed: never imported by it


def imports_from_outside(root: Path = ROOT, package: str = PACKAGE, outside=OUTSIDE) -> list[str]:
    """`file:line module` for every import (module or function level) of `package` that names a top-level
    package of `outside`; relative imports stay inside the package and do not count."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            found += [f"{path.relative_to(root)}:{node.lineno} {name}" for name in names
                      if name.split(".")[0] in outside]
    return found


def test_the_outside_import_check_finds_planted_imports(tmp_path):
    files = {"pkg/__init__.py": "import json\nfrom . import tests\n",
             "pkg/a.py": "def f():\n    from benchmarks.scale import main\n    return main\n",
             "pkg/b.py": "import tests.support.oracle as oracle\nimport benchmarks_of_mine\n",
             "pkg/tests.py": ""}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert imports_from_outside(tmp_path, "pkg") == ["pkg/a.py:2 benchmarks.scale",
                                                     "pkg/b.py:1 tests.support.oracle"]


def test_detect_never_imports_the_benchmarks_or_the_tests():
    """benchmarks/ and tests/ sit beside the package in a clone and are not in the wheel: an installed detect
    that imported them would fail on a user's machine (they may import detect, never the reverse)."""
    bad = imports_from_outside()
    assert not bad, "detect imports from outside the package:\n" + "\n".join(bad)


def test_packages_import_torch_and_opencv_only_when_a_name_needs_them():
    code = ("import sys, detect, detect.data, detect.darknet, detect.data.formats.spec; "
            "print(sorted({'torch', 'cv2'} & set(sys.modules)))")
    heavy = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert heavy.stdout.strip() == "[]", f"importing the packages imported {heavy.stdout.strip()}"
    from detect import Darknet
    from detect.darknet import CfgError, load_weights, save_pt
    from detect.data import DatasetSource, build_train_loader

    assert Darknet.__module__ == "detect.darknet.model" and callable(build_train_loader) and callable(save_pt)
    assert DatasetSource.__module__ == "detect.data.formats.sources" and issubclass(CfgError, ValueError)
    assert callable(load_weights)
