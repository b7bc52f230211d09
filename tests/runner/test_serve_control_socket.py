"""`manage.py serve` writes nothing outside the data folder: gunicorn's control socket lives inside it."""

from __future__ import annotations

import signal
import subprocess
import urllib.request

import pytest

from tests.installations import ROOT, installation
from tests.local_servers import free_port, wait_for

pytestmark = pytest.mark.slow


def test_serve_keeps_gunicorns_control_socket_in_the_data_folder(tmp_path):
    data, env, manage = installation(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    # gunicorn's own default: $XDG_RUNTIME_DIR/gunicorn.ctl, else ~/.gunicorn/gunicorn.ctl
    env = {k: v for k, v in env.items() if k != "XDG_RUNTIME_DIR"} | {"HOME": str(home)}
    port = free_port()
    serve = subprocess.Popen(
        [*manage, "serve", "--no-worker", "--port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/examples", timeout=5) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        wait_for(answers, 60, "the site to answer")
        wait_for(lambda: (data / "gunicorn.ctl").is_socket(), 30, "the control socket")
        assert not (home / ".gunicorn").exists()
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=15)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
    assert list(home.iterdir()) == []
