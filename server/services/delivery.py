"""Delivering validation codes. E-mail goes over SMTP when a host is configured, and to an
outbox folder of readable files otherwise (so a person trying the API can find the code);
mobile numbers go to a pluggable sender, the outbox by default."""

from __future__ import annotations

import smtplib
from datetime import datetime, timezone
from email.message import EmailMessage
from pathlib import Path
from typing import Protocol

from memkit.private import private_dir, write_private


class Sender(Protocol):
    def send(self, to: str, subject: str, text: str) -> None: ...


class OutboxSender:
    def __init__(self, folder: str | Path, channel: str = "email"):
        self.folder = Path(folder)
        self.channel = channel

    def send(self, to: str, subject: str, text: str) -> None:
        private_dir(self.folder)  # the messages hold live codes: the owner's alone
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
        safe = "".join(c if c.isalnum() or c in "@.+-" else "_" for c in to)
        write_private(
            self.folder / f"{stamp}-{self.channel}-{safe}.txt",
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
