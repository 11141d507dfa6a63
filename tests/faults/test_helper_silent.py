"""The Kconfig dump helper that never answers: the harness waited on its
readline() forever; now a bounded wait, an infrastructure error, and the
helper killed. A real process stands in for a hung helper."""
from __future__ import annotations

import os
import time

import pytest

from harness.errors import EXIT_INFRA, ConfigError
from harness.kconfig import tool


def test_a_helper_that_stops_answering_is_an_infrastructure_error(tmp_path, monkeypatch):
    helper = tmp_path / "dump"
    helper.write_text("#!/bin/sh\necho '{\"ready\": true}'\nexec sleep 300\n")
    helper.chmod(0o755)
    monkeypatch.setattr(tool, "ANSWER_TIMEOUT", 1.0)
    dump = tool.DumpProcess(helper, tmp_path, dict(os.environ), tmp_path / "dump.log")
    start = time.monotonic()
    with pytest.raises(ConfigError) as error:
        dump.ask("symbol RDMA_RXE")
    assert time.monotonic() - start < 5
    assert error.value.exit_code == EXIT_INFRA
    assert "did not answer 'symbol RDMA_RXE' within 1 s (killed)" in str(error.value)
    dump._proc.wait(timeout=5)                 # the helper is gone, not left behind
