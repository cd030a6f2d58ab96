"""The store: times go in and come out as aware UTC datetimes on both backends."""

from datetime import datetime, timedelta, timezone

import pytest
import sqlalchemy as sa

from server.store import connect, metadata
from tests.service_fixtures import postgres_url

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path, tmp_path_factory):
    return f"sqlite:///{tmp_path / 'store.db'}" if request.param == "sqlite" else postgres_url(tmp_path_factory)


def test_times_come_back_aware_and_in_utc(url):
    engine = connect(url)
    users = metadata.tables["users"]
    india = timezone(timedelta(hours=5, minutes=30))
    rows = [("u_1", T0.astimezone(india)), ("u_2", T0.replace(tzinfo=None)), ("u_3", T0)]  # naive: UTC
    try:
        with engine.begin() as conn:
            conn.execute(users.insert(), [dict(id=i, name="Ann", validated=True, floor_quota=5, block_quota=20,
                                               created_at=at) for i, at in rows])
            got = conn.execute(sa.select(users.c.created_at).order_by(users.c.id)).scalars().all()
            # compared in SQL too: the stored instants order as the times do, whatever zone they came in
            later = conn.execute(sa.select(sa.func.count()).where(users.c.created_at > T0 - timedelta(minutes=1))
                                 ).scalar_one()
        assert got == [T0] * 3 and all(t.tzinfo is timezone.utc for t in got)
        assert later == 3
    finally:
        engine.dispose()
