"""Import PanDA's own classes (installing them once), for tests that compare with them.

``scripts/install-panda-classes.sh`` installs panda-server and panda-common into the
venv with a minimal configuration; PanDA imports some of its modules by short names,
so their folder is appended to ``sys.path`` (last: nothing of ours is shadowed).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INSTALL = ROOT / "scripts" / "install-panda-classes.sh"


def ensure_panda_classes() -> None:
    """Install PanDA's classes when missing and make their short names importable."""
    os.environ.setdefault("PANDA_HOME", str(Path(sys.prefix) / "panda-home"))
    config = Path(os.environ["PANDA_HOME"]) / "etc" / "panda" / "panda_jedi.cfg"
    with contextlib.suppress(ImportError):
        import pandajedi  # noqa: F401
    if "pandajedi" not in sys.modules or not config.is_file():
        env = dict(os.environ, PANDA_PREDICTOR_VENV=sys.prefix)
        subprocess.run(
            ["bash", str(INSTALL)], check=True, env=env, stdout=subprocess.DEVNULL
        )
        importlib.invalidate_caches()
    import pandacommon

    short_names = str(Path(pandacommon.__file__).parent)
    if short_names not in sys.path:
        sys.path.append(short_names)


def jedi_task_spec_class():
    """Return PanDA's ``JediTaskSpec`` class (the SPLITRULE accessors live there)."""
    ensure_panda_classes()
    with warnings.catch_warnings():
        # PanDA's own modules are not ours to fix (old escape sequences, ...).
        warnings.simplefilter("ignore")
        from pandaserver.taskbuffer.JediTaskSpec import JediTaskSpec
    return JediTaskSpec
