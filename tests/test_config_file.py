"""The settings' YAML config file: read as a mapping, refused with the fix named."""

from __future__ import annotations

import pytest

from panda_predictor.config_file import CONFIG_ENV, ConfigFileError, read_config_file


def test_a_mapping_is_read_as_setting_names_to_values(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("mode: shadow\nhook_batch_size: 50\n")
    assert read_config_file(path) == {"mode": "shadow", "hook_batch_size": 50}


def test_an_empty_file_holds_no_settings(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("")
    assert read_config_file(path) == {}


@pytest.mark.parametrize(
    ("text", "match"),
    [
        (None, f"does not exist. Create it or unset {CONFIG_ENV}"),
        ("mode: [shadow", "must hold YAML. Got a parse error instead"),
        (
            "- mode\n- shadow\n",
            "must hold a mapping of setting names to values. Got list",
        ),
    ],
    ids=["missing", "not-yaml", "not-a-mapping"],
)
def test_a_bad_file_is_refused_saying_what_was_expected(tmp_path, text, match):
    path = tmp_path / "config.yaml"
    if text is not None:
        path.write_text(text)
    with pytest.raises(ConfigFileError, match=match):
        read_config_file(path)
