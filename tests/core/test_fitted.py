"""The one "used before fit" contract: NotFittedError and check_is_fitted."""

from __future__ import annotations

import numpy as np
import pytest

from panda_predictor.core import errors
from panda_predictor.core.decide.calibration import TemperatureCalibrator
from panda_predictor.core.decide.tail_rule import TailDecisionRule
from panda_predictor.core.features.pipeline import FeaturePipeline
from panda_predictor.core.fitted import NotFittedError, check_is_fitted
from panda_predictor.models import XGBoostResourceClassifier


class _Estimator:
    """A stand-in estimator with learned attributes set by hand."""


def test_fitted_estimator_passes():
    est = _Estimator()
    est.a_ = 1
    est.b_ = 2
    check_is_fitted(est, "a_")
    check_is_fitted(est, ["a_", "b_"])


def test_message_names_the_estimator_and_what_to_call_first():
    with pytest.raises(NotFittedError) as info:
        check_is_fitted(_Estimator(), "a_", "Call 'fit' with X first.")
    assert (
        str(info.value) == "This _Estimator is not fitted yet. Call 'fit' with X first."
    )


def test_default_hint_and_any_missing_attribute_fails():
    est = _Estimator()
    est.a_ = 1
    with pytest.raises(
        NotFittedError,
        match=r"^This _Estimator is not fitted yet\. Call 'fit' first\.$",
    ):
        check_is_fitted(est, ("a_", "b_"))


def test_no_attribute_is_a_programming_error():
    with pytest.raises(ValueError, match="at least one attribute"):
        check_is_fitted(_Estimator(), [])


def test_one_error_type_for_every_estimator():
    assert errors.NotFittedError is NotFittedError
    assert issubclass(NotFittedError, ValueError)
    assert issubclass(NotFittedError, AttributeError)


@pytest.mark.parametrize(
    ("use", "hint"),
    [
        (lambda: FeaturePipeline().transform(None), "Call 'fit' with training tasks"),
        (
            lambda: TailDecisionRule().predict(np.full((1, 3), 1 / 3)),
            "Call 'fit' with validation probabilities and labels first.",
        ),
        (
            lambda: TemperatureCalibrator().to_dict(),
            "Call 'fit' with validation probabilities and labels first.",
        ),
        (
            lambda: XGBoostResourceClassifier(n_classes=3).save("unused"),
            "Call 'fit' before 'save'.",
        ),
    ],
    ids=["features", "tail-rule", "calibrator", "classifier"],
)
def test_estimators_raise_the_shared_error(use, hint):
    with pytest.raises(NotFittedError, match="is not fitted yet") as info:
        use()
    assert hint in str(info.value)
