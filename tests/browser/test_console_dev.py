"""`langorch dev` names the console beside the gateway.

In a module of its own: it starts (and stops) a whole local stack in this process, whose
emulator shares moto's process-wide backends with any other stack a module keeps running.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from langorch.local.stack import free_port


def test_langorch_dev_prints_the_console_beside_the_gateway(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    from langorch.cli.main import main

    monkeypatch.chdir(tmp_path)
    port = free_port()
    code = main(
        [
            "dev",
            "--ready-only",
            "--home",
            str(tmp_path / ".langorch"),
            "--port",
            str(free_port()),
            # not the default 4566: another suite on this machine may hold it
            "--emulator-port",
            str(free_port()),
            "--console-port",
            str(port),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = [line.split() for line in out.splitlines()]
    assert [w[0] for w in lines if w and w[0] == "gateway"] == ["gateway"]
    [console] = [w[1] for w in lines if w and w[0] == "console"]
    assert console.startswith(f"http://127.0.0.1:{port}/?token=")
