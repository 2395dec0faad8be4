"""XGBoost is imported without scikit-learn, which stays importable for others."""

from __future__ import annotations

import subprocess
import sys

from panda_predictor.models.xgboost_import import import_xgboost


def test_the_module_is_imported_once():
    first = import_xgboost()
    assert first is import_xgboost() is sys.modules["xgboost"]
    assert hasattr(first, "Booster") and hasattr(first, "DMatrix")


def test_a_first_import_hides_scikit_learn_only_while_it_runs():
    code = (
        "import sys\n"
        "from panda_predictor.models.xgboost_import import import_xgboost\n"
        "xgb = import_xgboost()\n"
        "assert 'sklearn' not in sys.modules, 'scikit-learn was imported'\n"
        "import sklearn\n"
        "print(type(sklearn).__name__, xgb.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["module", "xgboost"]
