"""The layering rules of docs/architecture.md, checked by import-linter."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The contract that checks the layer table of docs/architecture.md.
LAYERS_CONTRACT = "Layers of docs/architecture.md, top to bottom"
#: The contracts docs/architecture.md promises, by name and type.
PROMISED_CONTRACTS = {
    LAYERS_CONTRACT: "layers",
    "No import cycles between sibling modules": "acyclic_siblings",
}


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {c["name"]: c for c in config["tool"]["importlinter"]["contracts"]}


@pytest.mark.parametrize(("name", "kind"), PROMISED_CONTRACTS.items())
def test_promised_contract_exists(name, kind):
    """A renamed or deleted contract would silently stop guarding the layers."""
    contracts = _contracts()
    assert name in contracts, sorted(contracts)
    assert contracts[name]["type"] == kind


def test_layers_contract_covers_every_top_level_part():
    """Every package and top-level module is in a layer, so none escapes the rules."""
    layers = _contracts()[LAYERS_CONTRACT]["layers"]
    covered = {m.strip() for layer in layers for m in layer.split("|")}
    parts = {"pipelines", "model_registry"}
    for path in (ROOT / "panda_predictor").iterdir():
        if path.name.startswith("_") or path.name == "py.typed":
            continue
        if path.suffix == ".py" or (path / "__init__.py").is_file():
            parts.add(f"panda_predictor.{path.stem}")
    assert parts <= covered, sorted(parts - covered)


def test_import_contracts_are_kept():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_help_does_not_import_tensorflow():
    """``panda-predictor --help`` must stay fast: no TensorFlow, XGBoost or MLflow."""
    code = (
        "import sys; from click.testing import CliRunner; "
        "from panda_predictor.cli import main; "
        "r = CliRunner().invoke(main, ['--help']); assert r.exit_code == 0, r.output; "
        "heavy = [m for m in ('tensorflow', 'xgboost', 'mlflow') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
