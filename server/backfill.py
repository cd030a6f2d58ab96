"""Index the events a PostgreSQL search backend has no rows for yet (a store written
before ``search_backend = "postgres"`` was switched on), configured by ``MEMKIT_*``
variables like the service:

    MEMKIT_DATABASE_URL=postgresql://... MEMKIT_SEARCH_BACKEND=postgres python -m server.backfill
    ... python -m server.backfill --jobs 2      # two processes, each a disjoint range of event ids

Safe to run while the service serves and writes (rows are upserted by event id); run it
again at any time, it only does what is missing. One process keeps about one core busy
(the model's runs, then the rows' writes, in turn); ``--jobs`` splits the store's event ids
into that many ranges, each filled by a process of its own.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import sqlalchemy as sa
from tqdm.auto import tqdm

from server.search.versions import Version
from server.services.memory import Memory
from server.settings import Settings
from server.store import connect


def id_ranges(engine: sa.Engine, jobs: int) -> list[tuple[str, str | None]]:
    """``jobs`` ranges ``(after, upto]`` of event ids, about as many events each; the first
    starts before every id (``""``), the last has no upper bound (None)."""
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM events")).scalar()
        cuts = [
            conn.execute(
                sa.text("SELECT id FROM events ORDER BY id OFFSET :k LIMIT 1"), {"k": n * j // jobs}
            ).scalar()
            for j in range(1, jobs)
        ]
    cuts = sorted(set(c for c in cuts if c is not None))
    return list(zip(["", *cuts], [*cuts, None]))


def fill(
    overrides: dict,
    after: str = "",
    upto: str | None = None,
    batch: int = 500,
    progress=None,
    report_every: int = 0,
    version: Version | None = None,
) -> int:
    """One process's part: the missing rows of the events with ids in ``(after, upto]``,
    with the settings of ``MEMKIT_*`` and ``overrides``. Returns how many events.
    ``progress(n)`` after each batch; or, with ``report_every``, a printed line (the
    rate) each time that many more events are done. ``version``: the vector tables of an
    encoder version being built (`memkit adapt`) instead of the active search tables."""
    settings = Settings.load({**overrides, "search_backend": "postgres"})
    engine = connect(settings.database_url)
    if progress is None and report_every:
        started, label, mark = (
            time.perf_counter(),
            f"(ids {after or 'first'}..{upto or 'last'})",
            report_every,
        )

        def progress(n):
            nonlocal mark
            if n >= mark:
                mark += report_every
                print(
                    f"   backfilled {n:,} {label} ({n / (time.perf_counter() - started):.0f} "
                    "events/s)",
                    flush=True,
                )

    try:
        memory = Memory(engine, settings)
        search = memory.index if version is None else memory.builder(version)
        return search.backfill(batch, progress=progress, after=after, upto=upto)
    finally:
        engine.dispose()


def fill_ranges(
    overrides: dict,
    jobs: int,
    batch: int = 500,
    progress=None,
    report_every: int = 0,
    version: Version | None = None,
) -> int:
    """Every missing row, ``jobs`` processes side by side (spawned: each loads its own
    model); ``progress(n)`` in the one-process case only."""
    if jobs == 1:
        return fill(
            overrides, batch=batch, progress=progress, report_every=report_every, version=version
        )
    engine = connect(Settings.load({**overrides, "search_backend": "postgres"}).database_url)
    ranges = id_ranges(engine, jobs)
    engine.dispose()
    with mp.get_context("spawn").Pool(len(ranges)) as pool:
        return sum(
            pool.starmap(
                fill, [(overrides, lo, hi, batch, None, report_every, version) for lo, hi in ranges]
            )
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m server.backfill", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--batch", type=int, default=500, help="events per transaction")
    parser.add_argument(
        "--jobs", type=int, default=1, help="processes, each filling a disjoint range of event ids"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs: expected a whole number of at least 1")
    with tqdm(desc="events indexed", unit="event", disable=args.jobs > 1) as bar:
        done = fill_ranges({}, args.jobs, args.batch, progress=lambda n: bar.update(n - bar.n))
    print(f"indexed {done} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
