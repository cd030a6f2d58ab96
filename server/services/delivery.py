"""Delivering validation codes. E-mail goes over SMTP when a host is configured, and to an
outbox folder of readable files otherwise (so a person trying the API can find the code);
mobile numbers go to a pluggable sender, the outbox by default.

``Deliveries`` runs the sending of codes that are sent only where an account matches (a
reset code, a sign-up code asked for again) on a thread of its own, so that such a request
answers after the same work whether or not the address has an account, and a mail server's
failure is not its answer."""

from __future__ import annotations

import hashlib
import logging
import smtplib
import threading
from collections import deque
from datetime import datetime, timezone
from email.message import EmailMessage
from pathlib import Path
from typing import Callable, Protocol

from memkit.core.private import private_dir, write_private

log = logging.getLogger(__name__)

# Characters of the address kept in an outbox file's name: a valid e-mail address may have
# 254, and with the time stamp that passed the 255 bytes a file name may have.
NAME_CHARS = 64


class Sender(Protocol):
    def send(self, to: str, subject: str, text: str) -> None: ...


class OutboxSender:
    def __init__(self, folder: str | Path, channel: str = "email"):
        self.folder = Path(folder)
        self.channel = channel

    def send(self, to: str, subject: str, text: str) -> None:
        private_dir(self.folder)  # the messages hold live codes: the owner's alone
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        safe = "".join(c if c.isalnum() or c in "@.+-" else "_" for c in to)[:NAME_CHARS]
        # The whole address is in the file ("To: ..."); the digest keeps two long addresses
        # that share their first characters apart.
        digest = hashlib.sha256(to.encode()).hexdigest()[:12]
        write_private(
            self.folder / f"{stamp}-{self.channel}-{safe}-{digest}.txt",
            f"To: {to}\nSubject: {subject}\n\n{text}\n",
        )


class SmtpSender:
    def __init__(self, host: str, port: int, mail_from: str, timeout: float = 10.0):
        self.host, self.port, self.mail_from, self.timeout = host, port, mail_from, timeout

    def send(self, to: str, subject: str, text: str) -> None:
        msg = EmailMessage()
        msg["From"], msg["To"], msg["Subject"] = self.mail_from, to, subject
        msg.set_content(text)
        with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
            smtp.send_message(msg)


class Deliveries:
    """Jobs run one at a time, in order, on one thread started at the first job and ended
    after ``idle`` seconds with none. At most ``bound`` jobs wait or run: past that
    ``submit`` refuses, so a flood of requests holds a bounded queue, not memory. A job that
    raises is logged and the next one runs."""

    def __init__(self, bound: int = 256, idle: float = 5.0):
        self.bound, self.idle = bound, idle
        self._jobs: deque[Callable[[], None]] = deque()
        self._unfinished = 0  # waiting or running
        self._cond = threading.Condition()
        self._running = False

    def submit(self, job: Callable[[], None]) -> bool:
        with self._cond:
            if self._unfinished >= self.bound:
                return False
            self._jobs.append(job)
            self._unfinished += 1
            if self._running:
                self._cond.notify_all()
            else:
                self._running = True
                threading.Thread(target=self._run, name="memkit-deliveries", daemon=True).start()
        return True

    def wait(self, timeout: float | None = None) -> bool:
        """Whether every job submitted so far was done within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._unfinished == 0, timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._jobs, self.idle)
                if not self._jobs:  # idle: the next submit starts a new thread
                    self._running = False
                    return
                job = self._jobs.popleft()
            try:
                job()
            except Exception:
                log.exception("a background delivery failed")
            finally:
                with self._cond:
                    self._unfinished -= 1
                    self._cond.notify_all()
