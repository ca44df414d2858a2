"""``sa-jobqueue worker --worker-id``: a bad id ends the command in one line, before any work."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sa_jobqueue.cli import main


@pytest.mark.parametrize("bad", ["", "   ", " padded", "x" * 192])
def test_a_bad_worker_id_is_refused_naming_the_option(tmp_path, bad):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    args = ["worker", "tests.support.apps.flow:jobs", "--database-url", url]
    result = CliRunner().invoke(main, [*args, "--worker-id", bad])
    assert result.exit_code == 2, result.output
    assert "--worker-id" in result.stderr
    assert "1 to 191 characters" in result.stderr
    assert not (tmp_path / "app.db").exists()  # nothing was opened


def test_the_worker_id_comes_from_the_environment_too(tmp_path):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    args = ["worker", "tests.support.apps.flow:jobs", "--database-url", url]
    result = CliRunner().invoke(main, args, env={"SA_JOBQUEUE_WORKER_ID": " x"})
    assert result.exit_code == 2
    assert "SA_JOBQUEUE_WORKER_ID" in result.stderr
