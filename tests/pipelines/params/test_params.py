"""The pipelines' YAML parameters: the packaged files and a user's own file."""

from __future__ import annotations

import pytest

from panda_predictor.errors import UserInputError
from pipelines.params import load_params


def test_the_packaged_files_are_mappings():
    for name in ("training", "simulation"):
        assert isinstance(load_params(name), dict) and load_params(name)


def test_a_users_file_is_read_and_its_faults_are_named(tmp_path):
    good = tmp_path / "p.yaml"
    good.write_text("xgboost:\n  n_estimators: 5\n")
    assert load_params("training", good) == {"xgboost": {"n_estimators": 5}}
    with pytest.raises(FileNotFoundError, match="must exist"):
        load_params("training", tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(UserInputError, match="must hold YAML"):
        load_params("training", bad)
    listed = tmp_path / "list.yaml"
    listed.write_text("- 1\n- 2\n")
    with pytest.raises(UserInputError):
        load_params("training", listed)
