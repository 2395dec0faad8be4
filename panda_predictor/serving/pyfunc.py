"""The bundle as an MLflow pyfunc model, for MLflow's own tools.

Each registered version is a pyfunc model folder (``MLmodel``, signature, input
example) whose artifact ``bundle`` is the ordinary bundle folder. Tools that speak
MLflow (``mlflow.pyfunc.load_model("models:/panda-predictor@champion")``,
``mlflow models serve``) load it through :class:`BundleModel`; the submit hooks and
the HTTP service keep downloading only the bundle folder and building a
:class:`~panda_predictor.serving.predictor.Predictor` directly, which avoids
pyfunc's import cost and environment checks on the hot path.

The pyfunc answer is :meth:`Predictor.predict_table` without recent history: per
task the decision and, per target, class, value written and confidence.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from panda_predictor.core.features.task_features import REQUEST_COLUMNS, TASK_COLUMNS
from panda_predictor.serving.bundle import load_bundle
from panda_predictor.serving.predictor import Predictor

if TYPE_CHECKING:
    from mlflow.models import ModelSignature

#: Name of the bundle artifact inside the pyfunc model folder.
BUNDLE_ARTIFACT = "bundle"
#: Where the bundle lies inside a saved pyfunc model folder.
BUNDLE_SUBDIR = f"artifacts/{BUNDLE_ARTIFACT}"
#: Rows of the training window kept as the model's input example.
EXAMPLE_ROWS = 3

# Importing this module imports MLflow: callers turn its telemetry off first
# (model_registry.tracking.disable_mlflow_telemetry); MLflow's own loader has already
# imported MLflow when it imports this module.
with warnings.catch_warnings():
    # Importing pyfunc builds MLflow's agent schemas, which warn about their own
    # type hints: noise for every user of this module.
    warnings.simplefilter("ignore")
    import mlflow.pyfunc
    from mlflow.pyfunc import PythonModel


class BundleModel(PythonModel):  # type: ignore[misc]
    """Serve a bundle through pyfunc: task rows in, one prediction row per task out.

    Holds nothing when pickled; :meth:`load_context` loads the bundle artifact into
    a :class:`Predictor` (named after the registered model where known).
    """

    def __init__(self, model_name: str = "panda-predictor", version: str = "") -> None:
        self.model_name = model_name
        self.version = version
        self._predictor: Predictor | None = None

    def load_context(self, context: Any) -> None:
        """Load the bundle artifact once, when MLflow loads the model."""
        bundle = load_bundle(context.artifacts[BUNDLE_ARTIFACT])
        self._predictor = Predictor(bundle, self.model_name, self.version)

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: Any = None
    ) -> pd.DataFrame:
        """Return :meth:`Predictor.predict_table` of the tasks in ``model_input``."""
        if self._predictor is None:
            self.load_context(context)
        assert self._predictor is not None
        frame = pd.DataFrame(model_input).reset_index(drop=True)
        return self._predictor.predict_table(frame).reset_index(drop=True)


def input_example(tasks: pd.DataFrame, rows: int = EXAMPLE_ROWS) -> pd.DataFrame:
    """Return the first ``rows`` task rows with only the columns a prediction reads.

    Counts are stored as doubles, so tasks with a missing count pass the signature.

    Raises ``ValueError`` naming the missing columns when ``tasks`` lacks some.
    """
    missing = [c for c in TASK_COLUMNS if c not in tasks.columns]
    if missing:
        raise ValueError(
            "The tasks of the input example must have the task columns. Got no "
            f"{', '.join(missing)} instead."
        )
    columns = [*TASK_COLUMNS, *(c for c in REQUEST_COLUMNS if c in tasks.columns)]
    example = tasks[columns].head(rows).reset_index(drop=True)
    # Integer columns become doubles: a task may lack a count (NaN), which an
    # integer column of the signature would refuse at inference time.
    integers = example.select_dtypes("integer").columns.drop(
        "jeditaskid", errors="ignore"
    )
    return example.astype({c: "float64" for c in integers})


def signature_of(bundle_dir: Path | str, example: pd.DataFrame) -> ModelSignature:
    """Return the signature: the example's columns in, the predictor's columns out."""
    from mlflow.models import infer_signature

    predictor = Predictor(load_bundle(bundle_dir), "signature", "")
    output = predictor.predict_table(example)
    with warnings.catch_warnings():
        # The outputs' integers (class indices) are never missing: MLflow's hint
        # about NaN in integer columns does not apply to them.
        warnings.filterwarnings("ignore", message="Hint: Inferred schema contains")
        return infer_signature(example, output)


def save_pyfunc_model(
    bundle_dir: Path | str,
    dest: Path | str,
    example: pd.DataFrame,
    model_name: str = "panda-predictor",
) -> Path:
    """Save ``bundle_dir`` as a pyfunc model folder ``dest``; return ``dest``.

    The bundle is copied to ``dest/artifacts/bundle`` unchanged. Requirements are
    stated (this package and MLflow) rather than inferred, which would load the
    model once more in a subprocess.

    Parameters
    ----------
    bundle_dir:
        A saved bundle (see :func:`~panda_predictor.serving.bundle.save_bundle`).
    dest:
        Folder to create (must not exist).
    example:
        Task rows (see :func:`input_example`) stored as the input example and used
        to infer the signature.
    model_name:
        Registered model name the predictions carry.
    """
    from importlib.metadata import version

    signature = signature_of(bundle_dir, example)
    with _quiet_pyfunc_logger():
        mlflow.pyfunc.save_model(
            path=str(dest),
            python_model=BundleModel(model_name),
            artifacts={BUNDLE_ARTIFACT: str(bundle_dir)},
            signature=signature,
            input_example=example,
            pip_requirements=[
                f"panda-predictor=={version('panda-predictor')}",
                f"mlflow=={mlflow.__version__}",
            ],
        )
    return Path(dest)


@contextmanager
def _quiet_pyfunc_logger() -> Iterator[None]:
    """Hide pyfunc's advice to use models-from-code while saving.

    It warns on every save that a pickled ``python_model`` runs code when loaded;
    ours is a class of this package pickled by reference (no state), and the
    warning would repeat in every training log and the demo.
    """
    pyfunc_logger = logging.getLogger("mlflow.pyfunc")
    level = pyfunc_logger.level
    pyfunc_logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        pyfunc_logger.setLevel(level)
