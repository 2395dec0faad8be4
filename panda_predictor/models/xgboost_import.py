"""Import XGBoost without the scikit-learn wrappers the product never uses.

``import xgboost`` tries to import scikit-learn for its ``XGBClassifier`` wrappers,
and scikit-learn is installed here (MLflow depends on it). That import pulls in
``scipy.stats`` and costs about 0.5 s of CPU on a quiet 2-core host and 3 s on a
loaded one, a third of a one-task ``panda-predictor predict``. The product uses only
XGBoost's native ``Booster``/``DMatrix`` API, so :func:`import_xgboost` hides
scikit-learn for the moment XGBoost is first imported; XGBoost then defines its
wrappers without it, and scikit-learn itself stays importable for everyone else.

The one consequence: in a process whose first ``import xgboost`` went through here,
XGBoost's scikit-learn wrappers (``xgboost.XGBClassifier``, ``xgboost.spark``,
``xgboost.dask``) are not usable. Code that needs them must import XGBoost first.
"""

from __future__ import annotations

import sys
from types import ModuleType


def import_xgboost() -> ModuleType:
    """Return the ``xgboost`` module, importing it without scikit-learn if first."""
    already = sys.modules.get("xgboost")
    if already is not None:
        return already
    hide = "sklearn" not in sys.modules
    if hide:
        sys.modules["sklearn"] = None  # type: ignore[assignment]  # import -> ImportError
    try:
        import xgboost
    finally:
        if hide and sys.modules.get("sklearn", 0) is None:
            del sys.modules["sklearn"]
    return xgboost
