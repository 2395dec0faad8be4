"""The list of sub-commands: one line each, module imported only when used."""

from panda_predictor.cli import register

register(
    "db",
    "panda_predictor.cli.db",
    "db",
    "Create, upgrade and check the database tables.",
)
register(
    "simulate",
    "panda_predictor.cli.simulate",
    "simulate",
    "Write a SIMULATED PanDA history (tasks, datasets, jobs) into the database.",
)
register(
    "labels",
    "panda_predictor.cli.labels",
    "labels",
    "Compute the scout-formula labels of the history; optionally fit bins.",
)
register(
    "export",
    "panda_predictor.cli.export",
    "export",
    "Copy PanDA's history tables to Parquet month by month (resumable, verified).",
)
register(
    "train",
    "panda_predictor.cli.train",
    "train",
    "Train, evaluate and register the four target models (gated champion).",
)
register(
    "model",
    "panda_predictor.cli.model",
    "model",
    "List registered versions; promote or roll back the champion, with a reason.",
)
register(
    "hook",
    "panda_predictor.cli.hook",
    "hook",
    "Predict tasks waiting for scouts and write the resources back.",
)
register(
    "demo",
    "panda_predictor.cli.demo",
    "demo",
    "Run the main job end to end on the embedded default (SQLite, local MLflow).",
)
register(
    "ingest",
    "panda_predictor.cli.ingest",
    "ingest",
    "Read a real job log (SWF) into the task model and summarise it.",
)
register(
    "benchmark",
    "panda_predictor.cli.benchmark",
    "benchmark",
    "Benchmark the models against the field's baselines on real job logs.",
)
register(
    "htcondor",
    "panda_predictor.cli.htcondor",
    "htcondor",
    "Print HTCondor submit attributes or a schedd job transform for a task.",
)
register(
    "evaluate",
    "panda_predictor.cli.evaluate",
    "evaluate",
    "Score the champion on the newest history, or walk forward month by month.",
)
register(
    "serve",
    "panda_predictor.cli.serve",
    "serve",
    "Serve predictions over HTTP (waitress): /v1/predictions, /readyz, /metrics.",
)
register(
    "predict",
    "panda_predictor.cli.predict",
    "predict",
    "Show what would be requested for a task definition (JSON/YAML file or -).",
)
register(
    "feedback",
    "panda_predictor.cli.feedback",
    "feedback",
    "Compare written predictions with the jobs' outcomes, week by week.",
)
register(
    "drift",
    "panda_predictor.cli.drift",
    "drift",
    "Check recent tasks and feedback for drift from the champion (exit 3).",
)
register(
    "retrain",
    "panda_predictor.cli.retrain",
    "retrain",
    "Retrain on the last months; promote only if not worse (idempotent).",
)
register(
    "report",
    "panda_predictor.cli.report",
    "report",
    "Write a static HTML page: feedback, drift, coverage, confusions, decisions.",
)
register(
    "replay-simulated",
    "panda_predictor.cli.replay_simulated",
    "replay_simulated_command",
    "Replay simulated jobs' memory: scouts vs predictor vs oracle.",
)
