"""The package as a library sees it: the SDK through its public API only, and dists that carry
what the README promises (LICENSE, langgraph.json, the examples)."""

from __future__ import annotations

import ast
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from conftest import run_env, scenario_with

from orchestrator.faces.demo import DEMO_TASK, scenario_path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "orchestrator"


def _private_sdk_uses(path: Path) -> list[str]:
    """Every import of a private ``openai`` module or name, and every ``openai._x`` attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "openai":
            parts = node.module.split(".")[1:] + [a.name for a in node.names]
            if any(p.startswith("_") for p in parts):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("openai.") and "._" in "." + alias.name.split(".", 1)[1]:
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("openai", "sdk", "client"):
                found.append(f"{path.name}:{node.lineno}: {value.id}.{node.attr}")
    return found


def test_the_openai_sdk_is_used_through_its_public_api_only():
    files = [p for p in PACKAGE.rglob("*.py") if "suites" not in p.parts]
    found = [hit for path in files for hit in _private_sdk_uses(path)]
    assert not found, found
    assert "openai._" not in "".join(p.read_text(encoding="utf-8") for p in files)


def test_the_private_use_check_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("import openai\nfrom openai._models import FinalRequestOptions\n"
                      "from openai import _base_client\nimport openai._streaming\n"
                      "def f(sdk):\n    return sdk._build_request(None)\n")
    assert len(_private_sdk_uses(sample)) == 4


# --- the dists --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel and the sdist, built from this checkout by the build backend itself (offline:
    hatchling is in the test extra, no isolated build environment to download)."""
    out = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-t", "sdist",
                           "-d", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (wheel,), (sdist,) = out.glob("*.whl"), out.glob("*.tar.gz")
    return wheel, sdist


def test_the_wheel_carries_the_license_langgraph_json_and_the_examples(dists):
    wheel, _ = dists
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        licence = next(n for n in names if n.endswith(".dist-info/licenses/LICENSE"))
        assert "MIT License" in zf.read(licence).decode()
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT" in metadata and "License-File: LICENSE" in metadata
    assert {"orchestrator/langgraph.json", "orchestrator/examples/ci_bot.py",
            "orchestrator/_agents/roles.toml"} <= names
    # no == pins: a library installs next to its host's own versions
    # (the test tools of the test extra stay pinned: they are not the library's dependencies)
    requires = [line.split(";")[0] for line in metadata.splitlines()
                if line.startswith("Requires-Dist:") and "extra == 'test'" not in line]
    assert len(requires) > 20 and not [r for r in requires if "==" in r], requires


def test_the_sdist_carries_the_license_langgraph_json_and_the_examples(dists):
    _, sdist = dists
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"LICENSE", "langgraph.json", "examples/ci_bot.py", "pyproject.toml", "roles.toml",
            "agents/builder.md", "action.yml", "scripts/ci/action.sh",
            "scripts/live-model/start.sh", "docs/ci.md"} <= names  # the Action and the live kit


def test_the_shipped_example_runs_from_the_wheel(dists, sim, sample_repo, tmp_path):
    """``python -m orchestrator.examples.ci_bot`` from the unpacked wheel (not this checkout),
    with the arguments its docstring shows, writes its Markdown for a run on the simulator."""
    wheel, _ = dists
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    usage = (site / "orchestrator" / "examples" / "ci_bot.py").read_text(encoding="utf-8")
    assert "--set run.max_attempts=2" in usage  # the docstring's flags, used below
    sim.set_scenario(scenario_with())
    out = tmp_path / "comment.md"
    env = {**run_env(), "PYTHONPATH": str(site)}
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator.examples.ci_bot", DEMO_TASK, "--repo",
         str(sample_repo), "--out", str(out), "--roles", str(scenario_path("demo-roles.toml")),
         "--set", f'providers.sim.base_url="{sim.base_url}"', "--set", "run.max_attempts=2"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert out.read_text(encoding="utf-8").startswith("## ✅ orchestrate")
    where = subprocess.run([sys.executable, "-c", "import orchestrator; print(orchestrator.__file__)"],
                           capture_output=True, text=True, env=env, cwd=tmp_path, check=True)
    assert where.stdout.strip().startswith(str(site))  # the wheel's package ran, not the checkout
