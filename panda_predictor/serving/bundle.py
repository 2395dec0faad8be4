"""Save and load a *bundle*: everything needed to serve the four target models.

A bundle is one folder, the unit the model registry versions::

    bundle.json      manifest: format, targets, model kind per target, schema hash,
                     bins version, training-domain lists, metrics
    features.json    the fitted FeaturePipeline
    bins.yaml        the class edges and values of every target
    decisions.json   the tail rule, the calibrator and the use spread per target,
                     the expert combination and the prices of the cost policy
                     (docs/decisions.md)
    models/<target>/ the classifier of each target (its own save format)

Loading checks that the stored feature schema and bins version agree with the
manifest, so a model never silently predicts on data it was not built for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# The one BundleError, defined in the lower registry layer; re-exported for callers.
from model_registry.registry import BundleError as BundleError
from panda_predictor.core.bins import BinSet
from panda_predictor.core.decide.calibration import (
    Calibrator,
    IdentityCalibrator,
    calibrator_from_dict,
)
from panda_predictor.core.decide.cost_choice import CostChooser, CostSettings
from panda_predictor.core.decide.experts import CombinationParams
from panda_predictor.core.decide.scout_policy import CostPolicy
from panda_predictor.core.decide.tail_rule import TailDecisionRule
from panda_predictor.core.decide.use_table import UseTable
from panda_predictor.core.features.pipeline import FeaturePipeline
from panda_predictor.models import ResourceClassifier, load_classifier

BUNDLE_FORMAT = 1


@dataclass
class Bundle:
    """The fitted parts that serve predictions for all targets.

    Parameters
    ----------
    features:
        Fitted feature pipeline (its schema hash is checked at load time).
    bins:
        Classes of every target, with the value to write and the unit.
    models:
        Fitted classifier per target.
    tail_rules:
        Tuned decision rule per target (recall of the largest classes).
    cost:
        The prices of the cost policy (the delay price chosen by training).
    known_transformations, known_frameworks:
        The training domain: a task with neither seen keeps its scouts.
    metrics:
        Flat test metrics of this bundle (for the registry and ``GET /v1/models``).
    combination:
        How the model is combined with the recency rules per key (see
        :mod:`panda_predictor.core.decide.experts`); None: the model alone.
    record_start:
        Tasks created from then on were not fitted on: the model's track record
        for the combination starts there (ISO time; None: no record).
    use_tables:
        How the use of each target is spread inside its classes (training
        values); a target without one is spread evenly over its class ranges.
    calibrators:
        Per target, the map from the served distribution (the combination's
        output) to calibrated probabilities, fitted on the validation part; a
        target without one (an older bundle) is served uncalibrated.
    """

    features: FeaturePipeline
    bins: BinSet
    models: dict[str, ResourceClassifier]
    tail_rules: dict[str, TailDecisionRule]
    cost: CostSettings
    known_transformations: list[str]
    known_frameworks: list[str]
    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    combination: CombinationParams | None = None
    record_start: str | None = None
    use_tables: dict[str, UseTable] = field(default_factory=dict)
    calibrators: dict[str, Calibrator] = field(default_factory=dict)

    @property
    def targets(self) -> list[str]:
        """Return the target names this bundle predicts."""
        return list(self.models)

    def policy(self, cost: CostSettings | None = None) -> CostPolicy:
        """Return the cost policy of this bundle (``cost`` overrides its prices)."""
        settings = self.cost if cost is None else cost
        choosers = {
            t: CostChooser(
                t,
                self.use_tables.get(t) or UseTable.from_bins(self.bins[t]),
                self.bins[t].values,
                settings.for_target(t),
            )
            for t in self.models
        }
        return CostPolicy(choosers, settings)

    def calibrator(self, target: str) -> Calibrator:
        """Return ``target``'s calibrator (the identity where none was fitted)."""
        found = self.calibrators.get(target)
        if found is None:
            found = IdentityCalibrator(self.bins[target].n_classes)
            self.calibrators[target] = found
        return found


def save_bundle(bundle: Bundle, directory: Path | str) -> Path:
    """Write ``bundle`` into ``directory`` (created; must be empty or absent)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    if any(root.iterdir()):
        raise BundleError(
            f"The bundle folder must be empty. Got {str(root)!r} with files in it."
        )
    (root / "features.json").write_text(json.dumps(bundle.features.to_dict()))
    (root / "bins.yaml").write_text(
        yaml.safe_dump(bundle.bins.to_dict(), sort_keys=False)
    )
    decisions = {
        "cost": bundle.cost.to_dict(),
        "use_tables": {t: table.to_dict() for t, table in bundle.use_tables.items()},
        "tail_rules": {t: rule.to_dict() for t, rule in bundle.tail_rules.items()},
        "combination": (
            bundle.combination.to_dict() if bundle.combination is not None else None
        ),
        "record_start": bundle.record_start,
        "calibrators": {t: c.to_dict() for t, c in bundle.calibrators.items()},
    }
    (root / "decisions.json").write_text(json.dumps(decisions, indent=1))
    for target, model in bundle.models.items():
        model.save(root / "models" / target)
    manifest = {
        "format": BUNDLE_FORMAT,
        "targets": bundle.targets,
        "model_kinds": {t: m.kind for t, m in bundle.models.items()},
        "schema_hash": bundle.features.schema_hash_,
        "bins_version": bundle.bins.version,
        "known_transformations": sorted(bundle.known_transformations),
        "known_frameworks": sorted(bundle.known_frameworks),
        "metrics": bundle.metrics,
        "info": bundle.info,
    }
    (root / "bundle.json").write_text(json.dumps(manifest, indent=1, default=str))
    return root


def _read_json(path: Path) -> Any:
    if not path.is_file():
        raise BundleError(
            f"The bundle is missing {path.name!r}. Looked for {str(path)!r}."
        )
    return json.loads(path.read_text())


def load_bundle(directory: Path | str) -> Bundle:
    """Load a bundle written by :func:`save_bundle`, checking its parts agree."""
    root = Path(directory)
    manifest = _read_json(root / "bundle.json")
    if manifest.get("format") != BUNDLE_FORMAT:
        raise BundleError(
            f"The bundle format must be {BUNDLE_FORMAT}. Got "
            f"{manifest.get('format')!r} in {str(root)!r} instead."
        )
    features = FeaturePipeline.from_dict(_read_json(root / "features.json"))
    if features.schema_hash_ != manifest["schema_hash"]:
        raise BundleError(
            f"The feature schema hash must be {manifest['schema_hash']!r} as in the "
            f"manifest. Got {features.schema_hash_!r} instead."
        )
    bins_path = root / "bins.yaml"
    if not bins_path.is_file():
        raise BundleError(f"The bundle is missing 'bins.yaml' in {str(root)!r}.")
    bins = BinSet.from_dict(yaml.safe_load(bins_path.read_text()))
    if bins.version != manifest["bins_version"]:
        raise BundleError(
            f"The bins version must be {manifest['bins_version']!r} as in the manifest."
            f" Got {bins.version!r} instead."
        )
    decisions = _read_json(root / "decisions.json")
    models = {t: load_classifier(root / "models" / t) for t in manifest["targets"]}
    for target, model in models.items():
        if model.n_classes != bins[target].n_classes:
            raise BundleError(
                f"The {target} model must have {bins[target].n_classes} classes like "
                f"bins version {bins.version!r}. Got {model.n_classes} instead."
            )
    calibrators = {
        t: calibrator_from_dict(d)
        for t, d in (decisions.get("calibrators") or {}).items()
    }
    for target, calibrator in calibrators.items():
        if calibrator.n_classes_ != bins[target].n_classes:
            raise BundleError(
                f"The {target} calibrator must have {bins[target].n_classes} classes "
                f"like bins version {bins.version!r}. Got {calibrator.n_classes_} "
                "instead."
            )
    return Bundle(
        features=features,
        bins=bins,
        models=models,
        tail_rules={
            t: TailDecisionRule.from_dict(d) for t, d in decisions["tail_rules"].items()
        },
        # A bundle from before the cost policy keeps the default prices.
        cost=CostSettings.from_dict(decisions.get("cost") or {}),
        known_transformations=list(manifest["known_transformations"]),
        known_frameworks=list(manifest["known_frameworks"]),
        metrics=dict(manifest.get("metrics", {})),
        info=dict(manifest.get("info", {})),
        combination=(
            CombinationParams.from_dict(decisions["combination"])
            if decisions.get("combination")
            else None
        ),
        record_start=decisions.get("record_start"),
        use_tables={
            t: UseTable.from_dict(d)
            for t, d in (decisions.get("use_tables") or {}).items()
        },
        calibrators=calibrators,
    )
