"""The list of sub-commands: one line each, module imported only when used."""

from panda_predictor.cli import register

register("db", "panda_predictor.cli.db", "db", "Create, upgrade and check the database tables.")
