#!/usr/bin/env bash
# Run the main job end to end on the embedded default (SQLite database and a local
# MLflow store under ./var): simulate PanDA history, build labels, train, register the
# champion, run the submit hook over newly defined tasks and print what it wrote.
# Installs what it needs first. Extra arguments go to 'panda-predictor demo'.
source "$(dirname "${BASH_SOURCE[0]}")/_env.sh"
panda-predictor demo "$@"
