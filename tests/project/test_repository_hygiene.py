"""No database file is committed at the repository root, and none can slip in.

A local MLflow store or SQLite database created by a demo run at the root (e.g.
``mlflow.db``) once ended up in a commit; ``.gitignore`` now keeps them out.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATABASE_SUFFIXES = (".db", ".sqlite")


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False
    )


def test_no_database_file_is_tracked_at_the_root():
    tracked = git("ls-files").stdout.splitlines()
    assert tracked, "git ls-files listed nothing: not run from the repository?"
    at_root = [p for p in tracked if "/" not in p and p.endswith(DATABASE_SUFFIXES)]
    assert at_root == []


def test_root_database_files_are_ignored_but_other_folders_are_not():
    ignored = git("check-ignore", "--no-index", "mlflow.db", "panda.sqlite")
    assert ignored.stdout.split() == ["mlflow.db", "panda.sqlite"], ignored.stderr
    # Only the root: a fixture database under tests/ stays visible to git.
    assert git("check-ignore", "--no-index", "tests/data/x.sqlite").returncode == 1
