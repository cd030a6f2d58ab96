"""The WSGI entry point for a production server, configured by ``MEMKIT_*`` variables:

    MEMKIT_DATABASE_URL=postgresql://... MEMKIT_INDEX_DIR=instance/index MEMKIT_WARM_INDEX=1 \\
        gunicorn -w 2 --threads 4 -b 0.0.0.0:8000 server.wsgi:app

Each worker process holds its own search index (loaded from ``MEMKIT_INDEX_DIR`` and
caught up from the store's log) and stays in step with the others through the store.
With ``MEMKIT_SEARCH_BACKEND=postgres`` (a PostgreSQL store) the index lives in the store
instead and workers hold nothing (server/search/store.py; docs/DEPLOYMENT.md "Several processes and
PostgreSQL + pgvector").
"""

from server import create_app

app = create_app()
