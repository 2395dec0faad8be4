"""Load the champion bundle as a :class:`Predictor`, once per version.

The registry says which version is champion; the local cache serves it when the
registry is unreachable (see ``model_registry.cache``). Loaded predictors are kept
per version, so a hook pass or an HTTP request does not reload models.
"""

from __future__ import annotations

import logging
import threading

from model_registry.cache import load_champion_bundle_dir, recently_confirmed
from model_registry.registry import NoChampionError
from panda_predictor.core.decide.cost_choice import CostSettings
from panda_predictor.serving.bundle import Bundle, load_bundle
from panda_predictor.serving.predictor import Predictor
from panda_predictor.settings import Settings

log = logging.getLogger(__name__)

_lock = threading.Lock()
_loaded: dict[tuple[str, str, int, float | None], Predictor] = {}


def load_champion(settings: Settings, trust_cache_seconds: float = 0.0) -> Predictor:
    """Return the champion predictor; raise NoChampionError when there is none.

    ``trust_cache_seconds`` > 0 serves the local copy without asking the registry
    when the registry confirmed it that recently (for one-shot commands).
    """
    return load_champion_with_source(settings, trust_cache_seconds)[0]


def load_champion_with_source(
    settings: Settings, trust_cache_seconds: float = 0.0
) -> tuple[Predictor, str]:
    """Return the champion predictor and who vouched for it: registry or cache."""
    champion = recently_confirmed(
        settings, trust_cache_seconds
    ) or load_champion_bundle_dir(settings)
    key = (
        settings.tracking_uri(),
        settings.model_name,
        champion.version,
        settings.delay_price,
    )
    with _lock:
        predictor = _loaded.get(key)
        if predictor is None:
            log.info(
                "loading %s version %s from %s (%s)",
                settings.model_name,
                champion.version,
                champion.path,
                champion.source,
            )
            bundle = load_bundle(champion.path)
            predictor = Predictor(
                bundle,
                settings.model_name,
                str(champion.version),
                served_cost(bundle, settings.delay_price),
            )
            _loaded.clear()
            _loaded[key] = predictor
    return predictor, champion.source


def served_cost(bundle: Bundle, delay_price: float | None) -> CostSettings:
    """Return the prices to serve: the bundle's, with the ``delay_price`` setting
    in place of the prices it chose (one per target) where the operator set one."""
    if delay_price is None:
        return bundle.cost
    return bundle.cost.with_price(delay_price)


def try_load_champion(settings: Settings) -> Predictor | None:
    """Return the champion predictor, or None when no champion exists yet."""
    try:
        return load_champion(settings)
    except NoChampionError:
        return None
