"""Accounts: sign-up, validation codes, sign-in, bearer tokens, password and e-mail changes.

No Flask here: functions take requests validated by their models (server/models.py) and
raise typed errors (server.errors). Every
operation runs in one transaction, so a failed request changes nothing, with one
deliberate exception: every check of a code is counted (in its own transaction) so that
guessing is bounded.

Guessing codes is bounded three ways (SECURITY.md): per code (``code_max_attempts``
checks, then it is burned), per account and mode (``code_checks_per_hour`` checks over
all its codes of the last hour), both checked and counted by one SQL ``UPDATE`` so that
concurrent guesses cannot slip past the count; and per client address by the API's rate
limits.

Who owns an account: a sign-up proves nothing until its code comes back. ``validate``
therefore takes the code *and* the password chosen at sign-up, so validating proves
that whoever holds the mailbox also chose the password; a squatter who signs up someone
else's address never gets in, and the owner's own sign-up replaces the unvalidated
registration instead of being refused. An address is bound to an account only by a code
sent to it: validating keeps the address whose code was checked and drops the other one
given at sign-up (add it with a change of address), so a number typed beside one's own
e-mail address is never anyone's. Password resets and the e-mail or mobile changes
work on validated accounts only; a change of address needs the password when its code
is asked for, revokes every other token and tells the old address. A sign-up nobody
validates within ``signup_ttl_hours`` is as good as gone.

A token works only while the credentials it was issued on are the account's: it records
``users.credential_version`` (which every password change or reset and every change of
address counts up), as read with the password hash argon2 checked, and ``authenticate``
refuses it once they differ. So a sign-in whose check ran while the owner changed the
password or moved the account gets no working token, whichever commits first.

Whether an address has an account is not told by any answer but sign-up's 409 (rate
limited): asking for a change-of-address code answers the same, after the same work,
for a taken address (its holder gets a notice, and a code nobody receives is stored), and
an address's code checks answer one ``code_invalid``. Wrong passwords and application
secrets are counted, and refused past their limit before argon2 runs, by the API layer
(server/api/limits.py), which knows the client's address.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from datetime import datetime, timedelta

import phonenumbers
import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from email_validator import EmailNotValidError, validate_email

from server import models as m
from server.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound, Unauthorized
from server.models import MODES
from server.search.conversations import forget_quoted
from server.search.forgetting import NO_VECTORS
from server.services.common import new_id, now
from server.services.delivery import Deliveries, Sender
from server.settings import Settings
from server.store.changes import log_event_changes
from server.store.db import reading
from server.store.schema import TS, apps, blocks, codes, events, floors, tokens, users

log = logging.getLogger(__name__)

DEFAULT_BLOCKS = [("feed", "Feed"), ("blog", "Blog"), ("forum", "Forum"), ("quiz", "Quiz")]
BAD_APP_CREDENTIALS = "unknown application or wrong secret"  # also answered by RefuseUnchecked
APP_RECHECK = 600.0  # seconds an application secret argon2 accepted is known (Accounts.known_app)
# argon2 runs at once in a process, per kind of check (_Argon2). Each takes 64 MiB, so their
# sum bounds the memory a burst can take; a kind's own slots cannot be taken by another's
# flood, so wrong application secrets or password checks of signed-in users never make an
# honest sign-in wait, and sign-ups (anyone may send them) never make a password change or
# reset wait (SECURITY.md).
ARGON2_SLOTS = {"sign_in": 2, "app": 1, "sign_up": 1, "other": 1}
# A kind's slot stays held this many times a hash's own time after it: sign-ups (anyone may
# send them, from any number of networks, so no count refuses a spread flood) then take at
# most a quarter of a core, and an honest sign-up waits a fraction of a second more.
ARGON2_PACE = {"sign_up": 3.0}


class _Argon2:
    """argon2 with at most ``ARGON2_SLOTS[kind]`` hashes or checks of each kind running at
    once: ``sign_in`` (signing in, validating a sign-up), ``app`` (application secrets),
    ``sign_up`` (a sign-up's password), ``other`` (the new password of a change or reset,
    password checks of a signed-in user). A burst of one kind
    (32 wrong secrets sent together would take 2 GiB) cannot take the process's
    memory, nor the slots of another kind; on two cores more at once would not finish
    sooner. A kind in ``ARGON2_PACE`` keeps its slot a while after each hash."""

    def __init__(self, hasher: PasswordHasher | None = None):
        self._hasher = hasher or PasswordHasher()  # argon2-cffi's defaults
        self._slots = {k: threading.BoundedSemaphore(n) for k, n in ARGON2_SLOTS.items()}

    def hash(self, password: str, kind: str = "other") -> str:
        with self._slots[kind]:
            began = time.monotonic()
            hashed = self._hasher.hash(password)
            time.sleep(ARGON2_PACE.get(kind, 0.0) * (time.monotonic() - began))
            return hashed

    def verify(self, stored: str, password: str, kind: str = "other") -> bool:
        with self._slots[kind]:
            return self._hasher.verify(stored, password)


_hasher = _Argon2()


# -- request checking (the shapes are the models' in server/models.py) ---------------------
def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header; the scheme name is
    case-insensitive (RFC 7235), so ``bearer`` works too."""
    scheme, _, token = (header or "").strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" and len(header) <= 200 else None


def normalize_email(value: str, field: str = "email") -> str:
    try:
        return validate_email(value, check_deliverability=False).normalized.lower()
    except EmailNotValidError as exc:
        raise BadRequest(
            f"{field} is not a valid e-mail address: {exc}", field=field, code="invalid_email"
        ) from None


def normalize_mobile(value: str, region: str = "", field: str = "mobile") -> str:
    try:
        number = phonenumbers.parse(value, region or None)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        hint = "" if region else " in international form, e.g. +447911123456"
        raise BadRequest(
            f"{field} is not a valid mobile number{hint}", field=field, code="invalid_mobile"
        )
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


class Accounts:
    def __init__(
        self,
        engine: sa.Engine,
        settings: Settings,
        mailer: Sender,
        sms: Sender,
        vectors=NO_VECTORS,
    ):
        self.engine, self.settings, self.mailer, self.sms = engine, settings, mailer, sms
        self.vectors = vectors  # server.search.forgetting.CachedVectors: what a deletion forgets
        # Sends the codes whose sending must not show in the answer (send_code)
        self.deliveries = Deliveries()
        self._apps_checked: dict[
            str, tuple[str, float]
        ] = {}  # app id -> (SHA-256 of its secret, when argon2 said so)

    # -- shapes ---------------------------------------------------------------------------
    def profile(self, conn, user_id: str) -> dict:
        """Interface 2.4's ``profile`` (server/models.py UserDetails says where each value
        comes from)."""
        u = conn.execute(sa.select(users).where(users.c.id == user_id)).mappings().one()
        n_floors = conn.execute(
            sa.select(sa.func.count()).select_from(floors).where(floors.c.owner_id == user_id)
        ).scalar()
        n_blocks = conn.execute(
            sa.select(sa.func.count())
            .select_from(blocks)
            .join(floors)
            .where(floors.c.owner_id == user_id)
        ).scalar()
        own = _own_floor(conn, user_id) or {}
        return {
            "floor_id": own.get("id", ""),
            "floor_count_info": {
                "permitted": str(u["floor_quota"]),
                "remaining": str(max(0, u["floor_quota"] - n_floors)),
            },
            "block_count_info": {
                "permitted": str(u["block_quota"]),
                "remaining": str(max(0, u["block_quota"] - n_blocks)),
            },
            "FID": own.get("id", ""),
            "title": own.get("title", ""),
            "name": u["name"],
            "email": u["email"] or "",
            "mobile_number": u["mobile"] or "",
            "user_id": u["id"],
            "avatar": _avatar(own.get("avatar")),
            "validated": u["validated"],
            "created_at": u["created_at"].isoformat(),
            "external_id": u["external_id"],
        }

    def pod_info(self, conn, user_id: str) -> dict:
        """Interface 2.4's ``pod_info``: the user's own floor (the first one created for
        them) and its blocks (every user has one; empty values if it were ever missing)."""
        f = _own_floor(conn, user_id) or {}
        bl = (
            conn.execute(
                sa.select(blocks)
                .where(blocks.c.floor_id == f.get("id"))
                .order_by(blocks.c.created_at, blocks.c.id)
            )
            .mappings()
            .all()
        )
        app_id = conn.execute(sa.select(users.c.app_id).where(users.c.id == user_id)).scalar()
        return {
            "floor_id": f.get("id", ""),
            "is_owner": "1",
            "app_id": app_id or "",
            "title": f.get("title", ""),
            "details": f.get("details") or "",
            "floor_uid": f.get("id", ""),
            "blocks": [{"block_id": b["id"], "type": b["type"], "title": b["title"]} for b in bl],
            "avatar": _avatar(f.get("avatar")),
        }

    # -- tokens -----------------------------------------------------------------------------
    def _issue_token(self, conn, user_id: str, version: int | None = None) -> dict | None:
        """A new token for the user, recording the credentials it was issued on: ``version``,
        the ``credential_version`` read with the password that was checked (None: the
        account's current one). None, and nothing written, if the account is gone or its
        password or address changed since that read: such a token would be refused anyway
        (``authenticate``), and the request is answered as a wrong password would be."""
        token = secrets.token_urlsafe(32)
        at = now()
        expires = at + timedelta(hours=self.settings.token_ttl_hours)
        account = sa.select(
            sa.literal(_sha(token), sa.String(64)),
            users.c.id,
            sa.literal(at, TS),
            sa.literal(expires, TS),
            users.c.credential_version,
        ).where(users.c.id == user_id)
        if version is not None:
            account = account.where(users.c.credential_version == version)
        columns = ["hash", "user_id", "created_at", "expires_at", "credential_version"]
        try:
            conn.execute(tokens.insert().from_select(columns, account))
        except sa.exc.IntegrityError:  # PostgreSQL: the account's deletion committed meanwhile
            return None
        # Whether a row went in, read back: psycopg reports no row count for INSERT ... SELECT.
        if (
            conn.execute(sa.select(tokens.c.hash).where(tokens.c.hash == _sha(token))).first()
            is None
        ):
            return None
        return {"token": token, "token_type": "Bearer", "expires_at": expires.isoformat()}

    def authenticate(self, header: str | None) -> str:
        """The user id behind an ``Authorization: Bearer ...`` header, or 401."""
        token = bearer_token(header)
        if token is None:
            raise Unauthorized("a bearer token is required", code="missing_token")
        # One query: the token, if its credentials are still the account's. A token written
        # by a sign-in that checked the password just before the owner changed it (its
        # insert may commit after the change revoked the tokens it could see) is refused.
        current = sa.and_(
            users.c.id == tokens.c.user_id,
            users.c.credential_version == tokens.c.credential_version,
        )
        with reading(self.engine) as conn:
            row = (
                conn.execute(
                    sa.select(tokens.c.user_id, tokens.c.revoked_at, tokens.c.expires_at)
                    .select_from(tokens.join(users, current))
                    .where(tokens.c.hash == _sha(token))
                )
                .mappings()
                .first()
            )
        if row is None or row["revoked_at"] is not None or row["expires_at"] <= now():
            raise Unauthorized(
                "the bearer token is invalid, expired or revoked", code="invalid_token"
            )
        return row["user_id"]

    def check_app(self, conn, app_id: str | None, field: str = "app_id") -> None:
        """An ``app_id`` in a body must name a registered application (or be absent)."""
        if (
            app_id is not None
            and conn.execute(sa.select(apps.c.id).where(apps.c.id == app_id)).first() is None
        ):
            raise BadRequest(
                f"{field}: no such application (register one with `memkit app add NAME`)",
                field=field,
                code="invalid_app",
            )

    # -- codes --------------------------------------------------------------------------------
    def _code_hash(self, code: str) -> str:
        return hmac.new(
            self.settings.secret_key.encode(), code.encode(), hashlib.sha256
        ).hexdigest()

    def _issue_code(
        self,
        conn,
        user_id: str,
        mode: str,
        destination: str,
        channel: Sender,
        notice: str | None = None,
    ) -> None:
        """Store a new code (one live code per user and mode) and send it, or, given a
        ``notice``, send that instead: the code is then one nobody knows."""
        conn.execute(
            codes.update()
            .where(codes.c.user_id == user_id, codes.c.mode == mode, codes.c.used_at.is_(None))
            .values(used_at=now())
        )  # one live code per user and mode
        code = f"{secrets.randbelow(10**6):06d}"
        conn.execute(
            codes.insert().values(
                id=new_id("c"),
                user_id=user_id,
                mode=mode,
                destination=destination,
                code_hash=self._code_hash(code),
                attempts=0,
                created_at=now(),
                expires_at=now() + timedelta(minutes=self.settings.code_ttl_minutes),
            )
        )
        minutes = int(self.settings.code_ttl_minutes)
        if notice is not None:
            self._deliver(channel, destination, "About your memkit account", notice)
        else:
            self._deliver(
                channel,
                destination,
                f"Your memkit code: {code}",
                f"Your memkit code is {code}. It is for: {MODES[mode]}.\n"
                f"It expires in {minutes} minutes and works once.",
            )

    def _deliver(self, channel: Sender, destination: str, subject: str, text: str) -> None:
        """Send inside the caller's transaction: if it fails, the transaction rolls back."""
        try:
            channel.send(destination, subject, text)
        except OSError:  # SMTP refused, unreachable, timed out
            raise ApiError(
                "a message could not be delivered; nothing was changed, try again later",
                code="delivery_failed",
                status=503,
            ) from None

    def _use_code(self, user_id: str, mode: str, destination: str, code: str, field: str) -> str:
        """Check a code without consuming it; returns its id. Every check is counted at
        once, right or wrong, by one ``UPDATE`` that also checks the bounds (per code, and
        per account and mode over the last hour), so concurrent guesses cannot all pass a
        check made before any of them is counted."""
        if not isinstance(code, str) or not code.strip():
            raise BadRequest(f"{field} is required", field=field, code="missing_field")
        at = now()
        with self.engine.begin() as conn:
            row = (
                conn.execute(
                    sa.select(codes)
                    .where(codes.c.user_id == user_id, codes.c.mode == mode)
                    .order_by(codes.c.created_at.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
            problem = None
            if row is None:
                problem = ("no code was sent for this", "code_invalid")
            elif row["used_at"] is not None:
                problem = ("this code was already used or replaced", "code_used")
            elif row["expires_at"] <= at:
                problem = ("this code has expired; ask for a new one", "code_expired")
            elif not hmac.compare_digest(row["destination"], destination):
                problem = ("this code was not sent to that address", "code_invalid")
            elif not self._count_check(conn, row["id"], user_id, mode, at):
                problem = self._why_refused(conn, row["id"])
            elif not hmac.compare_digest(row["code_hash"], self._code_hash(code.strip())):
                problem = ("the code is wrong", "code_invalid")
        if problem:
            raise BadRequest(problem[0], field=field, code=problem[1])
        return row["id"]

    def _count_check(self, conn, code_id: str, user_id: str, mode: str, at: datetime) -> bool:
        """Count one check of this code if both bounds allow it (one statement: atomic on
        SQLite, whose writers take turns, and on PostgreSQL, which re-evaluates the
        condition on the locked row). Only the newest live code of a user and mode can be
        checked, so the other codes' counts do not move meanwhile."""
        others = codes.alias("others")
        earlier = (
            sa.select(sa.func.coalesce(sa.func.sum(others.c.attempts), 0))
            .where(
                others.c.user_id == user_id,
                others.c.mode == mode,
                others.c.id != code_id,
                others.c.created_at > at - timedelta(hours=1),
            )
            .scalar_subquery()
        )
        done = conn.execute(
            codes.update()
            .where(
                codes.c.id == code_id,
                codes.c.used_at.is_(None),
                codes.c.expires_at > at,
                codes.c.attempts < self.settings.code_max_attempts,
                codes.c.attempts + earlier < self.settings.code_checks_per_hour,
            )
            .values(attempts=codes.c.attempts + 1)
        )
        return done.rowcount == 1

    def _why_refused(self, conn, code_id: str) -> tuple[str, str]:
        row = conn.execute(sa.select(codes).where(codes.c.id == code_id)).mappings().one()
        if row["used_at"] is not None:
            return "this code was already used or replaced", "code_used"
        if row["attempts"] >= self.settings.code_max_attempts:
            return "this code is burned after too many tries; ask for a new one", "code_burned"
        if row["expires_at"] <= now():
            return "this code has expired; ask for a new one", "code_expired"
        return (
            "too many code checks for this account in the last hour; try again later",
            "too_many_tries",
        )

    def _consume(self, conn, code_id: str, field: str) -> None:
        """Mark a checked code used; a concurrent request that used it first wins."""
        done = conn.execute(
            codes.update()
            .where(codes.c.id == code_id, codes.c.used_at.is_(None))
            .values(used_at=now())
        )
        if done.rowcount != 1:
            raise BadRequest(
                "this code was already used or replaced", field=field, code="code_used"
            )

    # -- operations ---------------------------------------------------------------------------
    def sign_up(self, data: m.SignUpRequest) -> dict:
        """A new, unvalidated account. An address held by another unvalidated account is
        taken over by this sign-up (that registration is deleted with its code): nobody
        proved it was theirs, and refusing would let a squatter block the owner."""
        if not data.email and not data.mobile:
            raise BadRequest(
                "an e-mail address or a mobile number is required",
                field="email",
                code="missing_field",
            )
        name = data.name
        email = normalize_email(data.email) if data.email else None
        mobile = normalize_mobile(data.mobile, self.settings.phone_region) if data.mobile else None
        password_hash = _hasher.hash(data.password, "sign_up")
        with self.engine.begin() as conn:
            self._forget_stale_sign_ups(conn)
            stale = []
            for column, value, what in (
                (users.c.email, email, "email"),
                (users.c.mobile, mobile, "mobile"),
            ):
                held = (
                    conn.execute(
                        sa.select(users.c.id, users.c.validated).where(column == value)
                    ).first()
                    if value
                    else None
                )
                if held is not None and held[1]:
                    raise Conflict(
                        f"this {_ADDRESS[what]} is already registered",
                        field=what,
                        code=f"{what}_in_use",
                    )
                if held is not None:
                    stale.append(held[0])
            # The replaced registrations' codes of the last hour go to the new one (used):
            # the hourly bound on checks of an address's codes holds across sign-ups, which
            # would otherwise restart it with each new user id.
            checked = []
            for old in dict.fromkeys(stale):
                checked += self._recent_codes(conn, old)
                _delete_user(conn, old)
            uid = new_id("u")
            try:
                conn.execute(
                    users.insert().values(
                        id=uid,
                        name=name,
                        email=email,
                        mobile=mobile,
                        password_hash=password_hash,
                        validated=False,
                        floor_quota=self.settings.floor_quota,
                        block_quota=self.settings.block_quota,
                        created_at=now(),
                    )
                )
            except (
                sa.exc.IntegrityError
            ):  # a concurrent sign-up with the same address committed first
                raise Conflict(
                    "this e-mail address or mobile number is already registered",
                    field="email" if email else "mobile",
                    code="address_in_use",
                ) from None
            self._create_own_floor(conn, uid, name)
            if checked:
                conn.execute(
                    codes.insert(),
                    [{**c, "user_id": uid, "used_at": c["used_at"] or now()} for c in checked],
                )
            if email:
                self._issue_code(conn, uid, "signup", email, self.mailer)
            else:
                self._issue_code(conn, uid, "signup", mobile, self.sms)
            return {
                "user_id": uid,
                "profile": self.profile(conn, uid),
                "pod_info": self.pod_info(conn, uid),
                "message": f"a validation code was sent to {email or mobile}"
                + (
                    f"; {mobile} is not part of the account until a code sent to it is checked "
                    "(after validating, change the mobile number to it)"
                    if email and mobile
                    else ""
                ),
            }

    def _recent_codes(self, conn, user_id: str) -> list[dict]:
        """The user's codes of the last hour (what ``_count_check`` counts), as rows."""
        return [
            dict(row)
            for row in conn.execute(
                sa.select(codes).where(
                    codes.c.user_id == user_id, codes.c.created_at > now() - timedelta(hours=1)
                )
            ).mappings()
        ]

    def _create_own_floor(self, conn, user_id: str, name: str) -> None:
        fid = new_id("f")
        conn.execute(
            floors.insert().values(
                id=fid,
                owner_id=user_id,
                title=f"{name}'s floor",
                details="",
                is_private=True,
                created_at=now(),
            )
        )
        for btype, title in DEFAULT_BLOCKS:
            conn.execute(
                blocks.insert().values(
                    id=new_id("b"),
                    floor_id=fid,
                    type=btype,
                    title=title,
                    details="",
                    created_at=now(),
                )
            )

    def _address(self, data) -> tuple[str, str]:
        """(``email`` or ``mobile``, its normalised value) of a body naming an account."""
        if getattr(data, "email", None):
            return "email", normalize_email(data.email)
        if getattr(data, "mobile", None):
            return "mobile", normalize_mobile(data.mobile, self.settings.phone_region)
        raise BadRequest(
            "an e-mail address or a mobile number is required", field="email", code="missing_field"
        )

    def _find_user(self, conn, data) -> dict | None:
        kind, value = self._address(data)
        return self._holder(conn, kind, value)

    def _holder(self, conn, kind: str, value: str) -> dict | None:
        """The account holding this e-mail address or mobile number: a validated one, or a
        sign-up nobody has validated for less than ``signup_ttl_hours`` (an older one is as
        good as gone, and is deleted by the next write that needs the address)."""
        return (
            conn.execute(
                sa.select(users).where(
                    users.c[kind] == value,
                    sa.or_(users.c.validated, users.c.created_at > self._stale_before()),
                )
            )
            .mappings()
            .first()
        )

    def _stale_before(self) -> datetime:
        return now() - timedelta(hours=self.settings.signup_ttl_hours)

    def _forget_stale_sign_ups(self, conn) -> None:
        """Delete the sign-ups nobody validated in time (they never had a token, so they own
        nothing but their empty floor)."""
        for old in (
            conn.execute(
                sa.select(users.c.id).where(
                    ~users.c.validated, users.c.created_at <= self._stale_before()
                )
            )
            .scalars()
            .all()
        ):
            _delete_user(conn, old)

    def send_code(self, data: m.SendCodeRequest, user_id: str | None) -> dict:
        """Send a code for ``mode``. For signup and reset_password the answer is the same,
        after the same work, whether or not the account exists (it echoes the address as
        normalised from what was typed), so it cannot be used to find accounts: finding the
        account, writing its code and sending it are left to the delivery thread
        (``_send_if_account``), so neither their time nor a mail server's failure shows in
        the answer. A change of e-mail or mobile
        number needs the account's password as well as the token: a stolen token alone
        cannot move the account to another address."""
        mode = data.mode
        with self.engine.begin() as conn:
            self.check_app(conn, data.app_id)
            if mode in ("signup", "reset_password"):
                kind, dest = self._address(data)
                if not self.deliveries.submit(lambda: self._send_if_account(mode, kind, dest)):
                    raise ApiError(
                        "too many messages are waiting to be sent; nothing was changed, try "
                        "again later",
                        code="delivery_failed",
                        status=503,
                    )
                return {
                    "mode": mode,
                    "message": f"if an account matches, a code was sent to {dest}",
                }
            if user_id is None:
                raise BadRequest(
                    "this mode needs a bearer token", field="mode", code="missing_token"
                )
            if data.user_id not in (None, user_id):
                raise BadRequest(
                    "user_id does not match the bearer token", field="user_id", code="user_mismatch"
                )
            kind, field = (
                ("email", "new_email_id") if mode == "change_email" else ("mobile", "new_mobile")
            )
            if not getattr(data, field):
                raise BadRequest(f"{field} is required", field=field, code="missing_field")
            dest = (
                normalize_email(getattr(data, field), field)
                if kind == "email"
                else normalize_mobile(getattr(data, field), self.settings.phone_region, field)
            )
            if data.password is None:
                raise BadRequest(
                    f"password is required to change the {_ADDRESS[kind]}",
                    field="password",
                    code="missing_field",
                )
            me = conn.execute(
                sa.select(users.c.password_hash, users.c[kind]).where(users.c.id == user_id)
            ).one()
            if not verify_password(me[0], data.password):
                raise BadRequest("password is wrong", field="password", code="bad_credentials")
            if me[1] == dest:
                raise BadRequest(
                    f"this is already your {_ADDRESS[kind]}", field=field, code=f"{kind}_in_use"
                )
            channel = self.mailer if kind == "email" else self.sms
            holder = self._holder(conn, kind, dest)
            if holder is not None and holder["validated"]:
                # Someone else's account: its owner is told instead of sent a code, and a code
                # nobody receives is stored, so what follows (checks of a code, the answer, the
                # time a message takes) is the same as for a free address.
                self._issue_code(
                    conn,
                    user_id,
                    mode,
                    dest,
                    channel,
                    notice=(
                        f"Someone asked to move another memkit account to this {_ADDRESS[kind]}. "
                        "It already belongs to your account, so nothing was changed. You need not "
                        "do anything."
                    ),
                )
            else:  # free, or held by a sign-up nobody validated (which the change will replace)
                self._issue_code(conn, user_id, mode, dest, channel)
            return {"mode": mode, "message": f"a code was sent to {dest}"}

    def _send_if_account(self, mode: str, kind: str, dest: str) -> None:
        """On the delivery thread: a ``mode`` code to ``dest`` if an account there may have
        one. A code that cannot be sent is not kept (its transaction rolls back); the failure
        is logged without the address."""
        try:
            with self.engine.begin() as conn:
                user = self._holder(conn, kind, dest)
                # signup: only an account still to be validated; reset: only a validated one
                if user is not None and user["validated"] == (mode == "reset_password"):
                    self._issue_code(
                        conn, user["id"], mode, dest, self.mailer if kind == "email" else self.sms
                    )
        except ApiError as exc:  # delivery_failed
            log.warning("a %s code was not sent (%s); none was stored", mode, exc.code)

    def _account_code(
        self, data: m.ValidateRequest | m.ResetPasswordRequest, mode: str
    ) -> tuple[dict, str]:
        """The account named by ``email`` or ``mobile`` and its checked ``code`` for ``mode``
        (a reset only for a validated account, a validation only for one still to be
        validated; any other account is answered as if it had no code)."""
        with self.engine.connect() as conn:
            user = self._find_user(conn, data)
        unusable = BadRequest(
            "the code is wrong, expired or already used; ask for a new one",
            field="code",
            code="code_invalid",
        )
        if user is None or user["validated"] != (mode == "reset_password"):
            raise unusable
        dest = user["email"] if data.email else user["mobile"]
        try:
            return user, self._use_code(user["id"], mode, dest, data.code, "code")
        except (
            BadRequest
        ) as exc:  # whether a code was sent must not tell whether the account exists
            if exc.code in ("code_invalid", "code_used", "code_expired"):
                raise unusable from None
            raise

    def validate(self, data: m.ValidateRequest) -> dict:
        """The code sent at sign-up and the password chosen there: both are needed, so the
        account becomes usable only by whoever chose its password *and* holds its mailbox."""
        user, code_id = self._account_code(data, "signup")
        if not verify_password(user["password_hash"], data.password, "sign_in"):  # code counted
            raise BadRequest(
                "password is not the one chosen at sign-up (sign up again to choose another)",
                field="password",
                code="bad_credentials",
            )
        # The code proved the address it was sent to; the other one given at sign-up (a number
        # beside an e-mail address, say) is dropped: it is nobody's until a code sent there is
        # checked (a change of address), so it signs no one in and blocks no one's sign-up.
        unproved = "mobile" if data.email else "email"
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "code")
            conn.execute(
                users.update()
                .where(users.c.id == user["id"])
                .values({"validated": True, unproved: None})
            )
            issued = self._issue_token(conn, user["id"], user["credential_version"])
            if issued is None:
                raise BadRequest(
                    "the code is wrong, expired or already used; ask for a new one",
                    field="code",
                    code="code_invalid",
                )
            return {"user_id": user["id"], "profile": self.profile(conn, user["id"]), **issued}

    def sign_in(self, data: m.SignInEmailRequest | m.SignInMobileRequest, by: str) -> dict:
        refused = Unauthorized(
            f"wrong {'e-mail address' if by == 'email' else 'mobile number'} or password",
            code="bad_credentials",
        )
        with self.engine.begin() as conn:
            user = self._find_user(conn, data)
            if not verify_password(
                user["password_hash"] if user else None, data.password, "sign_in"
            ):
                raise refused
            if not user["validated"]:
                raise Forbidden(
                    "validate the account first (POST /auth-service/validate)", code="not_validated"
                )
            # Under the credentials read with the hash argon2 checked: if the password or the
            # address changed, or the account was deleted, while it ran, no token (the answer
            # of a wrong password or a missing account). The token first: once it is written
            # the account cannot go before this transaction ends, so the profile is there.
            issued = self._issue_token(conn, user["id"], user["credential_version"])
            if issued is None:
                raise refused
            return {"user_id": user["id"], "profile": self.profile(conn, user["id"]), **issued}

    def change_password(self, user_id: str, data: m.ChangePasswordRequest) -> dict:
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(users.c.password_hash).where(users.c.id == user_id)
            ).first()
            if not verify_password(row[0], data.old_password):
                raise BadRequest(
                    "old_password is wrong", field="old_password", code="bad_credentials"
                )
            return self._set_password(conn, user_id, data.new_password)

    def _set_password(self, conn, user_id: str, password: str) -> dict:
        # A new credential version: tokens of sign-ins that checked the old password and
        # write their token after this commits are refused too (``authenticate``).
        conn.execute(
            users.update()
            .where(users.c.id == user_id)
            .values(
                password_hash=_hasher.hash(password),
                credential_version=users.c.credential_version + 1,
            )
        )
        conn.execute(
            tokens.update()
            .where(tokens.c.user_id == user_id, tokens.c.revoked_at.is_(None))
            .values(revoked_at=now())
        )  # every old token stops working at once
        issued = self._issue_token(conn, user_id)  # under the new version
        if issued is None:  # the account was deleted meanwhile
            raise NotFound("no such user")
        return {"message": "password changed; every earlier token is revoked", **issued}

    def reset_password(self, data: m.ResetPasswordRequest) -> dict:
        user, code_id = self._account_code(data, "reset_password")
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "code")
            return self._set_password(conn, user["id"], data.new_password)

    def change_email(
        self, user_id: str, data: m.ChangeEmailRequest, token: str | None = None
    ) -> dict:
        """The interface's change of e-mail (sections 2.3, 2.4): ``new_email_id`` and
        ``activation_code`` (multipart or JSON; JSON may also carry ``user_id`` and
        ``app_id``, a registered application's). Every failure is a 400."""
        if data.user_id not in (None, user_id):
            raise BadRequest(
                "user_id does not match the bearer token", field="user_id", code="user_mismatch"
            )
        with self.engine.connect() as conn:
            self.check_app(conn, data.app_id)
        email = normalize_email(data.new_email_id, "new_email_id")
        self._change_address(
            user_id, "email", email, data.activation_code, "new_email_id", "activation_code", token
        )
        with self.engine.connect() as conn:
            return {
                "profile": self.profile(conn, user_id),
                "pod_info": self.pod_info(conn, user_id),
                "app_id": data.app_id or "",
            }

    def change_mobile(
        self, user_id: str, data: m.ChangeMobileRequest, token: str | None = None
    ) -> dict:
        mobile = normalize_mobile(data.new_mobile, self.settings.phone_region, "new_mobile")
        self._change_address(user_id, "mobile", mobile, data.code, "new_mobile", "code", token)
        with self.engine.connect() as conn:
            return {
                "profile": self.profile(conn, user_id),
                "pod_info": self.pod_info(conn, user_id),
            }

    def _change_address(
        self,
        user_id: str,
        kind: str,
        value: str,
        code: str,
        field: str,
        code_field: str,
        token: str | None,
    ) -> None:
        """Move the account to a new e-mail address or mobile number with the code sent
        there; every other token is revoked (the caller's, ``token``, stays) and the old
        address is told, so a change nobody asked for is noticed. If the notice cannot be
        sent nothing changes (503), as with codes."""
        in_use = BadRequest(
            f"this {_ADDRESS[kind]} is already in use", field=field, code=f"{kind}_in_use"
        )
        # The code first: only whoever holds the new address learns whether it has an account.
        code_id = self._use_code(user_id, f"change_{kind}", value, code, code_field)
        with self.engine.begin() as conn:
            self._consume(conn, code_id, code_field)
            before = (
                conn.execute(sa.select(users.c.email, users.c.mobile).where(users.c.id == user_id))
                .mappings()
                .one()
            )
            self._forget_stale_sign_ups(conn)
            holder = conn.execute(
                sa.select(users.c.id, users.c.validated).where(
                    users.c[kind] == value, users.c.id != user_id
                )
            ).first()
            if holder is not None and holder[1]:
                raise in_use
            if (
                holder is not None
            ):  # a sign-up nobody validated: whoever holds the address just proved it
                _delete_user(conn, holder[0])
            try:
                conn.execute(
                    users.update()
                    .where(users.c.id == user_id)
                    .values({kind: value, "credential_version": users.c.credential_version + 1})
                )
            except sa.exc.IntegrityError:  # another account took it since the check above
                raise in_use from None
            # The new version (this transaction holds the row until it commits): sign-ins
            # that read the account before the change get no working token.
            version = conn.execute(
                sa.select(users.c.credential_version).where(users.c.id == user_id)
            ).scalar_one()
            keep = [] if token is None else [_sha(token)]
            conn.execute(
                tokens.update()
                .where(
                    tokens.c.user_id == user_id,
                    tokens.c.revoked_at.is_(None),
                    tokens.c.hash.not_in(keep),
                )
                .values(revoked_at=now())
            )
            if token is not None:  # the caller's own token moves to the new version
                conn.execute(
                    tokens.update()
                    .where(
                        tokens.c.hash == _sha(token),
                        tokens.c.user_id == user_id,
                        tokens.c.revoked_at.is_(None),
                        tokens.c.credential_version == version - 1,
                    )
                    .values(credential_version=version)
                )
            # the old address of that kind, else the account's other one
            to = next(
                (
                    (a, k)
                    for k in (kind, "mobile" if kind == "email" else "email")
                    if (a := before[k])
                ),
                None,
            )
            if to is not None:
                self._deliver(
                    self.mailer if to[1] == "email" else self.sms,
                    to[0],
                    f"Your memkit {_ADDRESS[kind]} was changed",
                    f"The {_ADDRESS[kind]} of your memkit account was changed from "
                    f"{before[kind] or 'none'} to {value}, and every other session was signed out. "
                    "If you did not do this, reset your password and contact us.",
                )

    # -- applications -------------------------------------------------------------------------
    def register_app(self, name: str) -> tuple[str, str]:
        """A new application: returns (app_id, secret); the secret is shown once."""
        app_id, secret = new_id("app"), secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            conn.execute(
                apps.insert().values(
                    id=app_id, name=name, secret_hash=_hasher.hash(secret, "app"), created_at=now()
                )
            )
        return app_id, secret

    def authenticate_app(self, app_id: str | None, secret: str | None) -> str:
        if not app_id or not secret:
            raise Unauthorized(
                "application credentials are required (X-App-Id and X-App-Secret)",
                code="missing_app",
            )
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(apps.c.secret_hash).where(apps.c.id == app_id)).first()
        # An id no application has is refused without argon2 work: what it would hide is no
        # secret (a signed-in user's query naming it is told invalid_app), and a flood of
        # made-up ids would otherwise take the argon2 slots sign-ins need.
        if row is None or not verify_password(row[0], secret, "app"):
            raise Unauthorized(BAD_APP_CREDENTIALS, code="bad_app_credentials")
        self._apps_checked[app_id] = (_sha(secret), time.monotonic())
        return app_id

    def app_registered(self, app_id: str) -> bool:
        """Whether an application has this id (one indexed read, no argon2)."""
        with self.engine.connect() as conn:
            return (
                conn.execute(sa.select(apps.c.id).where(apps.c.id == app_id[:100])).first()
                is not None
            )

    def known_app(self, app_id: str | None, secret: str | None) -> bool:
        """Whether argon2 accepted this application's secret in the last ``APP_RECHECK``
        seconds (then a SHA-256 compare suffices: the secret is 32 random bytes). So an
        application's queries do not each pay an argon2 check, and wrong secrets sent
        under its id, which are refused unchecked past their limit, do not lock it out."""
        seen = self._apps_checked.get(app_id or "")
        return (
            seen is not None
            and bool(secret)
            and time.monotonic() - seen[1] < APP_RECHECK
            and hmac.compare_digest(seen[0], _sha(secret))
        )

    def register_external(self, app_id: str, data: m.ExternalRegisterRequest) -> dict:
        """Register, or find, the application's user with this external id (idempotent,
        also when two requests for the same id arrive at once)."""
        ext = data.external_id
        name = ((data.name or "").strip() or ext)[:200]
        for attempt in range(2):
            try:
                with self.engine.begin() as conn:
                    row = conn.execute(
                        sa.select(users.c.id).where(
                            users.c.app_id == app_id, users.c.external_id == ext
                        )
                    ).first()
                    created = row is None
                    if created:
                        uid = new_id("u")
                        conn.execute(
                            users.insert().values(
                                id=uid,
                                name=name,
                                validated=True,
                                app_id=app_id,
                                external_id=ext,
                                floor_quota=self.settings.floor_quota,
                                block_quota=self.settings.block_quota,
                                created_at=now(),
                            )
                        )
                        self._create_own_floor(conn, uid, name)
                    else:
                        uid = row[0]
                    issued = self._issue_token(conn, uid)
                    if issued is None:  # the user was deleted meanwhile
                        raise NotFound("no such user")
                    return {
                        "user_id": uid,
                        "created": created,
                        "app_id": app_id,
                        "profile": self.profile(conn, uid),
                        "pod_info": self.pod_info(conn, uid),
                        **issued,
                    }
            except sa.exc.IntegrityError:  # the same external id registered at once: find that one
                if attempt:
                    raise

    def delete_account(self, user_id: str, data: m.DeleteAccountRequest) -> dict:
        """Delete the account and everything it owns: floors, blocks, events, tokens, codes."""
        with self.engine.begin() as conn:
            row = conn.execute(
                sa.select(users.c.password_hash).where(users.c.id == user_id)
            ).first()
            if not verify_password(row[0] if row else None, data.password):
                raise BadRequest("password is wrong", field="password", code="bad_credentials")
            owned = list(
                conn.execute(sa.select(floors.c.id).where(floors.c.owner_id == user_id)).scalars()
            )
            elsewhere = (
                conn.execute(
                    sa.select(events.c.floor_id, events.c.block_id, events.c.created_at).where(
                        events.c.user_id == user_id, events.c.floor_id.not_in(owned)
                    )
                )
                .mappings()
                .all()
            )
            old = self.vectors.pending(conn, elsewhere)
            # their words leave other users' stored turns with them (posts anywhere, and
            # every post of their floors)
            posts = conn.execute(
                sa.select(events.c.id, events.c.text).where(
                    sa.or_(events.c.user_id == user_id, events.c.floor_id.in_(owned))
                )
            ).all()
            forget_quoted(conn, dict(posts))
            gone = _delete_user(conn, user_id)
        old.forget(floors=owned)  # their floors' vectors, and their posts' in others' floors
        return {"deleted": user_id, "events_deleted": gone}

    def get_profile(self, user_id: str) -> dict:
        with self.engine.connect() as conn:
            if conn.execute(sa.select(users.c.id).where(users.c.id == user_id)).first() is None:
                raise NotFound("no such user")
            return {
                "profile": self.profile(conn, user_id),
                "pod_info": self.pod_info(conn, user_id),
            }


def verify_password(stored_hash: str | None, password: str, kind: str = "other") -> bool:
    """argon2 check in ``kind``'s slots (_Argon2); with no stored hash it still spends the
    same time, so a missing account and a wrong password cannot be told apart by timing."""
    if not stored_hash:
        _hasher.hash(password, kind)
        return False
    try:
        return _hasher.verify(stored_hash, password, kind)
    except (VerificationError, InvalidHashError):
        return False


def _delete_user(conn, user_id: str) -> int:
    """Delete a user and all they own (the foreign keys cascade); returns how many events
    went. Their events are logged first, so search indexes drop them when they catch up."""
    gone = [
        r[0]
        for r in conn.execute(
            sa.select(events.c.id).where(
                sa.or_(
                    events.c.user_id == user_id,
                    events.c.floor_id.in_(
                        sa.select(floors.c.id).where(floors.c.owner_id == user_id)
                    ),
                )
            )
        )
    ]
    log_event_changes(conn, gone)
    conn.execute(users.delete().where(users.c.id == user_id))
    return len(gone)


_ADDRESS = {"email": "e-mail address", "mobile": "mobile number"}


def _own_floor(conn, user_id: str):
    """The user's own floor: the first one created for them."""
    return (
        conn.execute(
            sa.select(floors)
            .where(floors.c.owner_id == user_id)
            .order_by(floors.c.created_at, floors.c.id)
            .limit(1)
        )
        .mappings()
        .first()
    )


def _avatar(url: str | None) -> dict:
    return {"url": url or "", "type": "image" if url else ""}


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
