"""``memkit serve`` as a user starts it: a real server process on loopback, its output read
whole. Each request is logged once, by the service's own line (method, path, status,
time), and a token a client put in the query string appears in no line. ``--help`` says
what a first start needs: the port, the instance folder, the main settings."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from memkit.config import resolve_config

ROOT = Path(__file__).resolve().parents[1]
SECRET = "tok3n-in-the-url-9f2c"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_each_request_is_logged_once_and_no_query_string_is_logged(tmp_path):
    port = _free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MEMKIT_INSTANCE": str(tmp_path / "instance"),
        "MEMKIT_PIPELINE_CONFIG": str(resolve_config("bm25")),  # no model to load
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "memkit.cli", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:  # until it listens
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stdout.read()
                assert time.monotonic() < deadline, "memkit serve did not start"
                time.sleep(0.5)
        assert _get(f"{base}/floors/f_0000000000000000?token={SECRET}&x=1") == 401
        assert _get(f"{base}/openapi.json?access_token={SECRET}") == 200
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            # a request line werkzeug cannot parse: it answers 400 itself and logs why
            s.sendall(f"GET /bad?token={SECRET} extra HTTP/1.1\r\n\r\n".encode())
            assert b" 400 " in s.recv(1000)
        time.sleep(0.5)
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    lines = out.splitlines()
    assert SECRET not in out, out
    floor_lines = [line for line in lines if "/floors/f_0000000000000000" in line]
    doc_lines = [line for line in lines if "/openapi.json" in line]
    assert len(floor_lines) == 1 and len(doc_lines) == 1, out
    assert (
        floor_lines[0].endswith(" ms")
        and " GET /floors/f_0000000000000000 401 " in (floor_lines[0])
    )
    assert " GET /openapi.json 200 " in doc_lines[0]
    assert len([line for line in lines if "GET /bad?..." in line]) == 1, out


def test_serve_help_says_the_port_the_instance_folder_and_the_settings(capsys):
    from memkit.cli import main

    with pytest.raises(SystemExit) as done:
        main(["serve", "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for said in ("default: 8080", "./instance", "MEMKIT_INSTANCE", "MEMKIT_DATABASE_URL"):
        assert said in text, said
