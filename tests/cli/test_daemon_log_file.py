"""``zotd start`` appends the daemon's output to ``$ZOT_HOME/logs/zotd.log``:
a daemon that finds it past ``max_log_bytes`` copies it aside and starts it
afresh, as it does an extension's (zotd.runtime.daemon_log)."""

from __future__ import annotations

from tests.cli import test_cli
from tests.cli.test_cli import WAIT, Cli, wait_until

cli = test_cli.cli  # the fixture, as this module's own


def test_a_daemon_log_past_its_size_is_rotated_as_the_daemon_starts(cli: Cli) -> None:
    log = cli.home / "logs" / "zotd.log"
    log.parent.mkdir(parents=True)
    old = b"an old daemon's line\n" * 500  # 10,500 bytes
    log.write_bytes(old)
    cli.config.write_text('max_log_bytes = 4096\nlog_level = "info"\n')
    cli.start()
    copy = log.with_name("zotd.log.1")
    wait_until(copy.exists, WAIT, "zotd.log.1")
    assert copy.read_bytes().startswith(old)  # (and the new daemon's first lines, maybe)
    rotated = "this log was past max_log_bytes ("
    wait_until(lambda: rotated in log.read_text(), WAIT, "the line saying so")
    text = log.read_text()
    assert "an old daemon's line" not in text
    assert "copied to zotd.log.1 and truncated" in text, text
    assert cli.zotd("stop").returncode == 0
