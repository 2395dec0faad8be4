"""The service recovers once the model store is back, without a restart (issue 11.16).

A real MLflow SQLite store in a temporary folder: the champion is registered, the
store file is moved away before the service starts (so the first load fails and the
cache is empty), then put back. The next retry must serve the champion.
"""

from __future__ import annotations

import os
import shutil

from model_registry.registry import register_bundle, set_alias
from panda_predictor.http_api import create_app

TASK = {"processingType": "simul", "transPath": "Sim_tf.py", "coreCount": 8}


def test_the_service_opens_mlflow_stores_without_a_connection_pool(
    tmp_path, monkeypatch
):
    from panda_predictor.settings import load_settings

    monkeypatch.delenv("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", raising=False)
    app = create_app(load_settings(home=tmp_path), background_load=False)
    app.extensions["panda_predictor"].close()
    assert os.environ["MLFLOW_SQLALCHEMYSTORE_POOLCLASS"] == "NullPool"


def test_predictions_recover_when_the_missing_store_is_put_back(
    reg_settings, trained_bundle_dir, tmp_path, monkeypatch
):
    # As in the service process: MLflow's engines for this store are made unpooled
    # (create_app sets this before its first registry call; here the test's own
    # registry calls come first).
    monkeypatch.setenv("MLFLOW_SQLALCHEMYSTORE_POOLCLASS", "NullPool")
    info = register_bundle(
        reg_settings, trained_bundle_dir, None, {"mean_accuracy": 0.9}
    )
    set_alias(reg_settings, info.version, "champion")
    store = tmp_path / "mlflow.db"
    shutil.move(store, tmp_path / "mlflow.db.away")

    app = create_app(reg_settings)
    state = app.extensions["panda_predictor"]
    client = app.test_client()
    try:
        state.wait_for_model(120)
        missing = client.post("/v1/predictions", json=TASK)
        assert missing.status_code == 503
        assert str(tmp_path) not in missing.get_data(as_text=True)

        (tmp_path / "mlflow.db.away").replace(store)  # the real store is back
        state.retry_seconds = 0.0  # do not wait 10 s for the next attempt
        assert client.get("/readyz").get_json()["checks"]["model"]["status"] == (
            "loading"
        )
        state.wait_for_model(120)
        response = client.post("/v1/predictions", json=TASK)
        assert response.status_code == 200, response.get_json()
        assert response.get_json()["predictions"][0]["model"]["version"] == str(
            info.version
        )
    finally:
        state.close()
