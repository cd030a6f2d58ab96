"""Writes into one busy block-day: session runs capped (the default) against whole-day
sessions, side by side in one run.

    .venv/bin/python eval/bench/busy_block.py [--posts 400] [--writes 40]

The service's default pipeline gives each post its neighbours and its session's text; a
session is the block's posts of that day, cut into runs of ``max_session`` posts. For each
setting a fresh app (SQLite store) takes ``--posts`` posts into one block on one day in
one batch, then ``--writes`` single posts more, one at a time, each searchable when its
request returns. Printed: mean time per single write and documents re-indexed per write.
``max_session = 10000`` stands for the earlier behaviour (the whole day is one session).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from memkit.config import CONFIG_DIR
from server import create_app


def config_with(max_session: int, folder: Path) -> Path:
    text = (CONFIG_DIR / "default.toml").read_text()
    assert "\n[representation]\n" in text
    path = folder / f"default-{max_session}.toml"
    path.write_text(
        text.replace(
            "\n[representation]\n", f"\n[representation]\nmax_session = {max_session}\n", 1
        )
    )
    return path


def run(max_session: int, posts: int, writes: int) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="busy-block-"))
    app = create_app(
        {
            "database_url": f"sqlite:///{folder / 'm.db'}",
            "outbox_dir": str(folder / "outbox"),
            "secret_key": "bench",
            "pipeline_config": str(config_with(max_session, folder)),
        }
    )
    c = app.test_client()
    c.post(
        "/auth-service/signup",
        json={"name": "Ann", "email": "ann@example.com", "password": "bench pw 123"},
    )
    code = next((folder / "outbox").glob("*.txt")).read_text().split("code is ")[1][:6]
    token = c.post(
        "/auth-service/validate",
        json={"email": "ann@example.com", "code": code, "password": "bench pw 123"},
    ).get_json()["token"]
    h = {"Authorization": f"Bearer {token}"}
    pod = c.get("/auth-service/profile", headers=h).get_json()["pod_info"]
    path = f"/floors/{pod['floor_uid']}/blocks/{pod['blocks'][0]['block_id']}/events"

    def at(i: int) -> str:
        return f"2024-03-01T{8 + i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}Z"

    body = {
        "events": [
            {"text": f"Ann's note {i} on the harbour works", "created_at": at(i)}
            for i in range(posts)
        ]
    }
    assert c.post(path + "/batch", headers=h, json=body).status_code == 200
    index = app.extensions["memkit"]["memory"].warm()
    before, t = index.reindexed, time.perf_counter()
    for i in range(posts, posts + writes):
        assert (
            c.post(
                path,
                headers=h,
                json={"text": f"Ann's later note {i} on the harbour", "created_at": at(i)},
            ).status_code
            == 200
        )
    took = (time.perf_counter() - t) / writes
    app.extensions["memkit"]["engine"].dispose()
    return {
        "max_session": max_session,
        "ms per write": took * 1000,
        "re-indexed per write": (index.reindexed - before) / writes,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--posts", type=int, default=400)
    ap.add_argument("--writes", type=int, default=40)
    args = ap.parse_args(argv)
    rows = [run(64, args.posts, args.writes), run(10_000, args.posts, args.writes)]
    print(f"\n{args.posts} posts in one block-day, then {args.writes} single writes\n")
    print("| sessions | ms per write | documents re-indexed per write | speed-up |")
    print("|---|---:|---:|---:|")
    for r in rows:
        label = "runs of 64 (default)" if r["max_session"] == 64 else "whole day (before)"
        print(
            f"| {label} | {r['ms per write']:.0f} | {r['re-indexed per write']:.1f} | "
            f"{rows[1]['ms per write'] / r['ms per write']:.2f}x |"
        )


if __name__ == "__main__":
    main()
