"""Typed errors. The service maps these to HTTP status codes in one place."""

from __future__ import annotations


class MemkitError(Exception):
    """Base class of every error memkit raises on purpose."""


class ValidationError(MemkitError, ValueError):
    """A value given to memkit is not what was expected. ``field`` names the culprit."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")

    def __reduce__(
        self,
    ):  # raised in a worker process (memkit eval --jobs), re-raised in the parent
        return type(self), (self.field, self.message)


class DatasetError(MemkitError, ValueError):
    """A dataset file has bad rows. Every problem names the file, the line and the field.

    ``problems`` is a list of ``(file, line, field, message)``; ``line`` is 1-based and
    ``None`` for a problem with the file as a whole.
    """

    def __init__(self, problems: list[tuple[str, int | None, str | None, str]]):
        self.problems = problems
        shown = [_fmt(p) for p in problems[:10]]
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        super().__init__(f"{len(problems)} bad row(s):\n  " + "\n  ".join(shown) + more)

    def __reduce__(self):
        return type(self), (self.problems,)


def _fmt(p: tuple[str, int | None, str | None, str]) -> str:
    file, line, field, message = p
    where = f"{file}:{line}" if line is not None else file
    return f"{where}: field {field!r}: {message}" if field else f"{where}: {message}"
