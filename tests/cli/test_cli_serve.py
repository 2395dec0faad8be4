"""``panda-predictor serve --bundle`` refuses a folder that holds no bundle."""

from __future__ import annotations

from click.testing import CliRunner

from panda_predictor.cli.serve import serve
from panda_predictor.settings import load_settings


def test_a_folder_without_a_bundle_is_refused_before_serving(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()

    result = CliRunner().invoke(
        serve, ["--bundle", str(empty), "--port", "1"], obj=load_settings(home=tmp_path)
    )

    assert result.exit_code == 1
    assert f"The --bundle folder {str(empty)!r} must hold a consistent bundle" in (
        result.output
    )
    assert "Serving on" not in result.output
