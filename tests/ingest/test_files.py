"""Job logs open as text whether gzip or plain: the magic bytes decide, not the name."""

from __future__ import annotations

import gzip

import pytest

from panda_predictor.errors import UserInputError
from panda_predictor.ingest.files import (
    JobLogError,
    is_gzip,
    open_text,
    read_head,
)

TEXT = "; a header line\n1 0 10 100\n"


def test_gzip_is_told_by_content_whatever_the_suffix(tmp_path):
    packed, plain = tmp_path / "log.swf", tmp_path / "log.gz"
    packed.write_bytes(gzip.compress(TEXT.encode()))
    plain.write_text(TEXT)
    assert is_gzip(packed) and not is_gzip(plain)
    for path in (packed, plain):
        with open_text(path) as fh:
            assert fh.read() == TEXT
        assert read_head(path, 8) == TEXT[:8]


def test_bad_bytes_are_replaced_not_fatal(tmp_path):
    path = tmp_path / "log"
    path.write_bytes(b"ok \xff\xfe end\n")
    assert read_head(path) == "ok \ufffd\ufffd end\n"


def test_a_cut_off_gzip_stream_raises_eof(tmp_path):
    path = tmp_path / "cut.gz"
    path.write_bytes(gzip.compress(TEXT.encode() * 500)[:40])
    with pytest.raises(EOFError):
        read_head(path)


def test_a_job_log_error_is_a_user_error():
    assert issubclass(JobLogError, UserInputError)
