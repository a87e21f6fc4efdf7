"""The shape of the code base: every module of `detect` under 300 lines, and no test module imports another
(what tests share lives in tests/support/, fixtures in conftest.py)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 300


def test_every_module_is_under_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / "detect").rglob("*.py"))
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by concept (over {MAX_LINES} lines): {long}"


def _imported_test_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
            [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # scripts run in child processes
            names = [line.split()[1] for line in node.value.splitlines()
                     if line.startswith(("from tests.", "import tests.")) and len(line.split()) > 1]
        found |= {n for n in names if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")}
    return found


def test_no_test_module_imports_another():
    offenders = {str(p.relative_to(ROOT)): sorted(mods) for p in sorted((ROOT / "tests").rglob("*.py"))
                 if (mods := _imported_test_modules(p))}
    assert not offenders, f"move what they share into tests/support/: {offenders}"


def test_the_checks_find_what_they_look_for(tmp_path):
    sample = tmp_path / "t.py"
    head = "from tests."  # split, so that this module does not show the imports it looks for
    sample.write_text(f"{head}test_val import x\nS = '''\n{head}engine.test_a import y\n'''\n"
                      f"{head}support.training import z\n")
    assert _imported_test_modules(sample) == {"tests.test_val", "tests.engine.test_a"}
