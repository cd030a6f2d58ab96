"""Encoder versions: which model the search index uses, switched for every process at once.

`memkit adapt` (server/search/adapt.py) trains a model on the store's posts and re-encodes
the store into a new *version* of the index while the current one serves; then one
committed row makes it the active version. The ``encoder_versions`` table holds one row per
version: ``building`` (being re-encoded), ``active`` (the newest active row is the one in
use) or ``retired``. No row at all is version 0: the configuration's own model.

Every query reads the active version first (one small SELECT) and, if its process holds
another one, switches before searching (server/services/memory.py), so a query started
before the switch uses the old model and its vectors throughout, and one started after it
the new model and its vectors: never a query vector of one model against document vectors
of another. Each version keeps its vectors apart: the in-memory backend saves its index in
``<index_dir>.v<n>``, the PostgreSQL backend writes vector tables ``<table>_v<n>``.

The model's files travel in the row (``model``, a tar archive of its folder), so a process
on another machine whose cache lacks the model unpacks it from the store.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import sqlalchemy as sa

from memkit.models.encoders import MINILM, float_name, models_dir
from memkit.training import is_trained
from server.store.schema import encoder_versions

BUILDING, ACTIVE, RETIRED, FAILED = "building", "active", "retired", "failed"
# PostgreSQL advisory lock: writes take it shared (they index into the active version and a
# building one), the switch takes it exclusive (no write is half-way while it fills the last
# missing rows and flips the version).
SWITCH_LOCK = 0x6D656D76  # "memv"


@dataclass(frozen=True)
class Version:
    number: int  # 0: the configuration's own model (no row)
    encoder: str | None = None

    def folder(self, index_dir: str | None) -> str | None:
        """Where the in-memory backend saves this version's index."""
        if not index_dir:
            return None
        return index_dir if self.number == 0 else f"{index_dir}.v{self.number}"

    def table(self, base: str) -> str:
        """The vector table of this version, for a pgvector part whose own table is ``base``."""
        return base if self.number == 0 else f"{base}_v{self.number}"


def _version(row) -> Version:
    return Version(row[0], row[1]) if row else Version(0)


def active(conn) -> Version:
    """The version queries use now."""
    row = conn.execute(
        sa.select(encoder_versions.c.version, encoder_versions.c.encoder)
        .where(encoder_versions.c.state == ACTIVE)
        .order_by(encoder_versions.c.version.desc())
        .limit(1)
    ).first()
    return _version(row)


def building(conn) -> Version | None:
    """The version being re-encoded, if any (writes keep it up to date too)."""
    row = conn.execute(
        sa.select(encoder_versions.c.version, encoder_versions.c.encoder)
        .where(encoder_versions.c.state == BUILDING)
        .order_by(encoder_versions.c.version.desc())
        .limit(1)
    ).first()
    return _version(row) if row else None


def begin(conn, encoder: str) -> Version:
    """A new version being built with ``encoder`` (its model's files stored with it);
    an unfinished earlier build is abandoned."""
    conn.execute(
        encoder_versions.update().where(encoder_versions.c.state == BUILDING).values(state=RETIRED)
    )
    number = conn.execute(
        encoder_versions.insert().values(
            encoder=encoder,
            state=BUILDING,
            model=pack(encoder),
            created_at=datetime.now(timezone.utc),
        )
    ).inserted_primary_key[0]
    return Version(number, encoder)


def activate(conn, version: Version) -> list[Version]:
    """Make ``version`` the one in use. Returns the versions retired for good, whose
    vectors can go: every earlier one but the one it replaces (queries in flight when the
    switch commits may still be reading that one)."""
    previous = active(conn)
    conn.execute(
        encoder_versions.update().where(encoder_versions.c.state == ACTIVE).values(state=RETIRED)
    )
    conn.execute(
        encoder_versions.update()
        .where(encoder_versions.c.version == version.number)
        .values(state=ACTIVE, switched_at=datetime.now(timezone.utc))
    )
    gone = conn.execute(
        sa.select(encoder_versions.c.version, encoder_versions.c.encoder).where(
            encoder_versions.c.state == RETIRED, encoder_versions.c.version != previous.number
        )
    ).all()
    conn.execute(
        encoder_versions.update()
        .where(encoder_versions.c.version.in_([r[0] for r in gone]))
        .values(model=None)
    )
    return [_version(r) for r in gone] + ([Version(0)] if previous.number else [])


def fail(conn, version: Version) -> None:
    """A build that did not finish: writes stop keeping it up to date."""
    conn.execute(
        encoder_versions.update()
        .where(encoder_versions.c.version == version.number)
        .values(state=FAILED, model=None)
    )


def pack(name: str) -> bytes | None:
    """A trained model's folder as a tar archive (None for the packaged model). A name
    with int8 weights packs its float model: the int8 one is made from it on first use."""
    folder = float_name(name)
    if not is_trained(name) or folder in ("minilm", MINILM):
        return None
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(models_dir() / folder, arcname=folder)
    return buf.getvalue()


def ensure_model(conn, name: str | None) -> None:
    """Unpack the model of a version from the store if this machine's cache lacks it."""
    if name is None or is_trained(name):
        return
    row = conn.execute(
        sa.select(encoder_versions.c.model)
        .where(encoder_versions.c.encoder == name, encoder_versions.c.model.is_not(None))
        .limit(1)
    ).first()
    if row is None:
        return  # get_encoder will say which model is missing
    target = models_dir()
    tmp = target / f".{name}.unpack"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(row[0])) as tar:
        tar.extractall(tmp, filter="data")
    try:
        (tmp / float_name(name)).rename(target / float_name(name))
    except OSError:  # another process unpacked it first
        pass
    shutil.rmtree(tmp, ignore_errors=True)


def remove_saved(index_dir: str | None, versions: list[Version]) -> None:
    """Delete the saved in-memory indexes of versions retired for good."""
    for v in versions:
        folder = v.folder(index_dir)
        if folder and v.number:
            shutil.rmtree(Path(folder), ignore_errors=True)
