"""What the commands read from the user: task files, bundle folders, training params.

Several commands read the same inputs (``predict``, ``htcondor`` and ``serve`` a
bundle folder; ``train``, ``evaluate`` and ``retrain`` a parameter file); reading them
in one place gives the same one-line :class:`~panda_predictor.errors.UserInputError`
for the same mistake, whichever command was run. Heavy modules are imported only when
used, so ``--help`` stays fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from panda_predictor.errors import UserInputError
from panda_predictor.settings import Settings

if TYPE_CHECKING:
    from panda_predictor.serving.predictor import Predictor
    from pipelines.training.config import TrainingConfig


def read_definitions_file(source: str, stdin_text: str | None = None) -> Any:
    """Return the parsed content of a .json/.yaml/.yml file, or of stdin for ``-``.

    Stdin may hold JSON or YAML. Raises :class:`UserInputError` naming the file and
    the problem.

    Parameters
    ----------
    source:
        Path of the file, or ``-`` for ``stdin_text``.
    stdin_text:
        What the command read from stdin (only used for ``-``).
    """
    import yaml

    if source == "-":
        text, kind = stdin_text if stdin_text is not None else "", "yaml"
    else:
        path = Path(source)
        suffix = path.suffix.lower()
        if suffix not in (".json", ".yaml", ".yml"):
            raise UserInputError(
                f"The task file must end in .json, .yaml or .yml (or be '-' for "
                f"stdin). Got {path.name!r} instead."
            )
        if not path.is_file():
            raise UserInputError(f"The task file {source!r} must exist. It does not.")
        text, kind = path.read_text(), "json" if suffix == ".json" else "yaml"
    try:
        if kind == "json":
            return json.loads(text)
        return yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UserInputError(
            f"The task file {source!r} must hold {kind.upper()}. Got a parse error "
            f"instead: {first}"
        ) from None


def predictor_for(
    settings: Settings, bundle_dir: str | None, version: str = "local"
) -> Predictor:
    """Return the predictor of the bundle folder the user named, else the champion.

    A folder that is not a consistent bundle raises :class:`UserInputError`; the
    champion's own problems stay registry errors.

    Parameters
    ----------
    settings:
        Settings naming the registry and the model.
    bundle_dir:
        Bundle folder given with ``--bundle``, or None for the registry's champion.
    version:
        Model version reported for a bundle folder.
    """
    if bundle_dir is None:
        from panda_predictor.serving.loader import load_champion

        return load_champion(settings, settings.predict_cache_seconds)
    from panda_predictor.serving.bundle import BundleError, load_bundle
    from panda_predictor.serving.loader import served_cost
    from panda_predictor.serving.predictor import Predictor

    try:
        bundle = load_bundle(bundle_dir)
    except BundleError as exc:
        raise UserInputError(
            f"The --bundle folder {bundle_dir!r} must hold a consistent bundle. Got "
            f"one that does not load instead: {exc}"
        ) from exc
    return Predictor(
        bundle, settings.model_name, version, served_cost(bundle, settings.delay_price)
    )


def training_config_from(
    settings: Settings,
    params_file: str | None,
    kinds: tuple[str, ...] = (),
    split: str | None = None,
) -> TrainingConfig:
    """Return the training config of ``--params``, ``--kind`` and ``--split``.

    Building the config only reads and checks that file and those options, so every
    ``ValueError`` it raises (unknown parameter names, a file that is no mapping) is
    about the user's input and becomes a :class:`UserInputError`.

    Parameters
    ----------
    settings:
        Settings giving the tail recall target and the confidence threshold.
    params_file:
        Training parameters YAML; default: the packaged ``training.yaml``.
    kinds, split:
        Command-line choices that win over the file.
    """
    from pipelines.training.config import training_config

    try:
        return training_config(settings, params_file, kinds, split)
    except UserInputError:
        raise
    except ValueError as exc:
        raise UserInputError(str(exc)) from exc
