"""detect.runtime.cpu_threads makes OpenMP threads sleep while waiting, unless the user chose a policy, and the inference
entry points import it before torch."""

import ast
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SHOW_POLICY = "import detect.runtime.cpu_threads, os; print(os.environ['OMP_WAIT_POLICY'])"


@pytest.mark.parametrize("given, expected", [(None, "PASSIVE"), ("ACTIVE", "ACTIVE")])
def test_policy_is_passive_unless_given(given, expected):
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(ROOT)
    if given:
        env["OMP_WAIT_POLICY"] = given
    out = subprocess.run([sys.executable, "-c", SHOW_POLICY], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == expected


@pytest.mark.parametrize("module", ["detect/predict/__init__.py", "detect/predict/cli.py", "detect/val.py",
                                    "detect/bench/__main__.py", "benchmarks/__main__.py"])
def test_entry_points_import_it_before_anything_that_loads_torch(module):
    tree = ast.parse((ROOT / module).read_text())
    imports = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name if isinstance(n, ast.Import) else n.module for n in imports for a in n.names]
    first_third_party = next(i for i, name in enumerate(names) if name.split(".")[0] in ("cv2", "numpy", "torch",
                                                                                         "detect"))
    assert names[first_third_party] == "detect.runtime.cpu_threads"
