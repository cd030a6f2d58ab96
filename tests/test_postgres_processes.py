"""Two real app processes (separate OS processes, each its own werkzeug server on a
loopback port) on one PostgreSQL database with the search index in the store
(search_backend = "postgres"): one process takes writes while the other answers queries
at the same time, and every event the writer's requests have returned is found by the
reader at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from memkit.config import CONFIG_DIR
from server import create_app
from tests.service_fixtures import postgres_url, user

ROOT = Path(__file__).resolve().parents[1]
WORDS = [
    "quokka",
    "zeppelin",
    "marimba",
    "origami",
    "tapioca",
    "kestrel",
    "banjo",
    "glacier",
    "lantern",
    "mango",
    "nebula",
    "obsidian",
    "pelican",
    "quince",
    "rhubarb",
    "saffron",
    "tundra",
    "ukulele",
    "vortex",
    "walrus",
]


def _call(port: int, method: str, path: str, body: dict | None, headers: dict) -> dict:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _start(env: dict) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "serve_one.py")],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = (
        proc.stdout.readline()
    )  # blocks until the app is created and listening (or the process died)
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"app process did not start: {line!r}")
    return proc, int(line.split()[1])


@pytest.mark.heavy
@pytest.mark.slow
def test_one_process_writes_while_another_reads(tmp_path, tmp_path_factory):
    url = postgres_url(tmp_path_factory)
    settings = {
        "database_url": url,
        "outbox_dir": str(tmp_path / "outbox"),
        "secret_key": "test-secret",
        "search_backend": "postgres",
        "pipeline_config": str(CONFIG_DIR / "postgres.toml"),
    }
    setup = create_app(
        settings
    )  # an account to write and ask with (codes are read from the outbox here)
    c = setup.test_client()
    ann, floor, blocks = user(c, setup, "Ann")
    ann_id = c.get("/auth-service/profile", headers=ann).get_json()["profile"]["user_id"]
    setup.extensions["memkit"]["engine"].dispose()

    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        **{f"MEMKIT_{k.upper()}": v for k, v in settings.items()},
    }
    procs = []
    try:
        (writer, wport), (reader, rport) = _start(env), _start(env)
        procs = [writer, reader]
        assert writer.pid != reader.pid
        ask = lambda q: _call(  # noqa: E731
            rport,
            "POST",
            "/agent/memory/query",
            {
                "user_id": ann_id,
                "query": q,
                "floor_ids": [floor],
                "k": 5,
                "summary_needed": "0",
            },
            ann,
        )["items"]
        ask("warm up the model")  # the reader's first query loads its model

        written: list[
            tuple[str, str]
        ] = []  # (event id, its unique word) as the writer's requests return
        errors: list[BaseException] = []

        def write():
            try:
                for i, word in enumerate(WORDS):
                    e = _call(
                        wport,
                        "POST",
                        f"/floors/{floor}/blocks/{blocks['feed']}/events",
                        {"text": f"Day {i} of the trip: we saw a {word} near the old harbour."},
                        ann,
                    )
                    written.append((e["event_id"], word))
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                errors.append(exc)

        thread = threading.Thread(target=write)
        thread.start()
        checked, misses, overlapped = set(), [], 0
        while thread.is_alive() or len(checked) < len(written):
            pending = [w for w in list(written) if w[0] not in checked]
            if thread.is_alive() and pending:
                overlapped += 1  # this check ran while the writer was still writing
            for eid, word in pending:
                if eid not in [i["event_id"] for i in ask(word)]:
                    misses.append((eid, word))
                checked.add(eid)
            if not pending:
                time.sleep(0.02)
        thread.join()
        assert not errors, errors
        assert len(written) == len(WORDS) and not misses, misses
        assert overlapped > 0  # reads and writes did interleave

        # A delete through the writer is gone from the reader's results at once.
        gone, word = written[0]
        _call(wport, "DELETE", f"/events/{gone}", None, ann)
        assert gone not in [i["event_id"] for i in ask(word)]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
