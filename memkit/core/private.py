"""Files only their owner can read, whatever the umask: what memkit and its service write
(the store, the outbox with live codes, the embedding cache) holds people's private posts
and codes, so folders made here are 0700 and files 0600 (SECURITY.md)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

FOLDER, FILE = 0o700, 0o600


def private_dir(path: str | Path) -> Path:
    """Make ``path`` and its missing parents, each made here 0700 (mkdir's mode is cut by the
    umask, so it is set again). A folder that exists is left as it is: it may be shared (a
    home folder, /tmp); what is written into it is private by its own mode."""
    path = Path(path)
    missing, folder = [], path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=FOLDER)
        except FileExistsError:  # another process made it meanwhile
            continue
        folder.chmod(FOLDER)
    return path


def private_file(path: str | Path) -> Path:
    """Make the file ``path`` if it is missing (empty, 0600 from the start, so it is never
    readable by others before its mode is set), and make an existing one 0600: a store an
    earlier version left 0644 is closed at the next start."""
    path = Path(path)
    path.touch(mode=FILE, exist_ok=True)
    if stat.S_IMODE(path.stat().st_mode) != FILE:
        path.chmod(FILE)
    return path


def private_sqlite(path: str | Path) -> Path:
    """A SQLite file and its write-ahead log and shared-memory files 0600: SQLite makes the
    latter two with the database file's mode, so they follow once it is private; those an
    earlier version left are set here."""
    path = private_file(path)
    for extra in ("-wal", "-shm", "-journal"):
        try:
            os.chmod(path.with_name(path.name + extra), FILE)
        except FileNotFoundError:
            pass
    return path


def write_private(path: str | Path, text: str) -> None:
    """Write ``text`` to a file made 0600 before anything is written into it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        os.fchmod(fd, FILE)
        f.write(text)
