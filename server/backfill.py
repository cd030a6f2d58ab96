"""Index the events a PostgreSQL search backend has no rows for yet (a store written
before ``search_backend = "postgres"`` was switched on), configured by ``MEMKIT_*``
variables like the service:

    MEMKIT_DATABASE_URL=postgresql://... MEMKIT_SEARCH_BACKEND=postgres python -m server.backfill

Safe to run while the service serves and writes (rows are upserted by event id); run it
again at any time, it only does what is missing.
"""

from __future__ import annotations

import argparse

from tqdm.auto import tqdm

from server.services.memory import Memory
from server.settings import Settings
from server.store import connect


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.backfill", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=500, help="events per transaction")
    args = parser.parse_args(argv)
    settings = Settings.load({"search_backend": "postgres"})
    engine = connect(settings.database_url)
    search = Memory(engine, settings).index
    with tqdm(desc="events indexed", unit="event") as bar:
        done = search.backfill(args.batch, progress=lambda n: bar.update(n - bar.n))
    print(f"indexed {done} events")
    engine.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
