"""What a training fits and how: the config, from YAML, settings and the command line.

The defaults live in ``pipelines/params/training.yaml`` (under version control);
:func:`training_config` reads them and applies the deployment's settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from panda_predictor.core.decide.calibration import DEFAULT_METHOD

#: The ``half_life_days`` value that lets each retraining choose its own.
AUTO = "auto"


@dataclass(frozen=True)
class TrainingConfig:
    """What to train and how; defaults live in ``pipelines/params/training.yaml``."""

    model_kinds: tuple[str, ...] = ("xgboost", "keras")
    split: str = "time"
    train_fraction: float = 0.80
    val_fraction: float = 0.10
    test_fraction: float = 0.10
    #: Register the model fitted again one part later (the gate's test part
    #: validating it) instead of the gated one, whose trees never saw the newest
    #: tasks (:func:`pipelines.training.train.serving_parts`); time split only.
    refit_for_serving: bool = True
    recall_target: float = 0.95
    tail_min_precision: float = 0.5
    #: Core-hours one core-hour of a job's delay is worth (the cost policy's one
    #: price); "auto": chosen on the validation part
    #: (pipelines/training/cost_tuning.py).
    delay_price: float | str = AUTO
    #: Size for the early re-measurement: the tasks the decision marks (written
    #: their scouts' first values, or beside a scouts-valued target) are
    #: re-measured after 3 settled jobs, and the prices are tuned with it
    #: (the ``early_remeasure`` setting; pipelines/training/cost_tuning.py);
    #: "auto" (the default): on or off as it fares on the validation part
    #: (cost_tuning._sizing_for_early; docs/decisions.md says why).
    early_remeasure: bool | str = AUTO
    seed: int = 0
    #: Days over which a task's weight halves; None: no decay; "auto": chosen per
    #: target among :data:`pipelines.training.self_tuning.HALF_LIFE_CANDIDATES`.
    half_life_days: float | str | None = "auto"
    #: Training rows (a random sample of the training part, and as many validation
    #: rows) on which the candidate half-lives are compared when the part is larger;
    #: the chosen one is then fitted once on all rows. None: compare on all rows.
    half_life_sample_rows: int | None = 200_000
    #: The newest training rows the models fit on (a bounded window; the time decay
    #: gives older rows little weight anyway). None: the whole training part.
    max_train_rows: int | None = 750_000
    #: XGBoost training parts of at least this many rows are quantised once for all
    #: targets and half-lives (:class:`QuantisedParts`); smaller ones per fit.
    quantise_min_rows: int = 200_000
    combine_rules: bool = True
    #: How the served distribution is calibrated, one method for every target
    #: (see :mod:`panda_predictor.core.decide.calibration`, docs/models.md).
    calibration_method: str = DEFAULT_METHOD
    xgboost: Mapping[str, Any] = field(default_factory=dict)
    keras: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (isinstance(self.early_remeasure, bool) or self.early_remeasure == AUTO):
            raise ValueError(
                "The 'early_remeasure' field must be true, false or 'auto'. "
                f"Got {self.early_remeasure!r} instead."
            )

    def params_for(self, kind: str) -> dict[str, Any]:
        """Return the constructor parameters of model ``kind``."""
        params = dict(self.xgboost if kind == "xgboost" else self.keras)
        params.setdefault("random_state", self.seed)
        return params


def training_config(
    settings: Any,
    params_file: str | None = None,
    kinds: tuple[str, ...] = (),
    split: str | None = None,
) -> TrainingConfig:
    """Return the training config: YAML parameters, settings, command-line choices.

    ``params_file`` defaults to ``pipelines/params/training.yaml``; the tail recall
    target and the confidence threshold come from the settings; ``kinds`` and
    ``split`` (from the command line) win over the file; the ``delay_price``
    setting, where set, replaces the per-deployment choice; the
    ``early_remeasure`` setting (true, false or "auto") decides the early
    re-measurement.
    """
    from pipelines.params import load_params

    params = load_params("training", params_file)
    if kinds:
        params["model_kinds"] = list(kinds)
    if split:
        params["split"] = split
    params["model_kinds"] = tuple(params.get("model_kinds", ()))
    params.setdefault("recall_target", settings.tail_recall_target)
    if getattr(settings, "delay_price", None) is not None:
        params.setdefault("delay_price", settings.delay_price)
    if hasattr(settings, "early_remeasure"):
        params.setdefault("early_remeasure", settings.early_remeasure)
    try:
        return TrainingConfig(**params)
    except TypeError as exc:
        known = sorted(TrainingConfig.__dataclass_fields__)
        raise ValueError(
            f"The training parameters must be among {known}. Got {exc} instead."
        ) from None
