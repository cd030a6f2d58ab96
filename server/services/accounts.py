"""Accounts: sign-up, validation codes, sign-in, bearer tokens, password and e-mail changes.

No Flask here: functions take plain dicts and raise typed errors (server.errors). Every
operation runs in one transaction, so a failed request changes nothing, with one
deliberate exception: a wrong code's attempt is counted (in its own transaction) so that
a code burns after ``code_max_attempts`` misses.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta, timezone

import phonenumbers
import sqlalchemy as sa
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from email_validator import EmailNotValidError, validate_email

from server.errors import ApiError, BadRequest, Conflict, Forbidden, NotFound, Unauthorized
from server.services.delivery import Sender
from server.settings import Settings
from server.store.changes import log_event_changes
from server.store.schema import apps, blocks, codes, events, floors, tokens, users

MODES = {
    "signup": "validate a new account (sent to its e-mail, else its mobile number)",
    "reset_password": "reset a forgotten password (sent to the account's e-mail or mobile number)",
    "change_email": "confirm a new e-mail address (sent to the new address; bearer token required)",
    "change_mobile": "confirm a new mobile number (sent to the new number; bearer token required)",
}
DEFAULT_BLOCKS = [("feed", "Feed"), ("blog", "Blog"), ("forum", "Forum"), ("quiz", "Quiz")]
_hasher = PasswordHasher()


def now() -> datetime:
    return datetime.now(timezone.utc)


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


def _aware(dt: datetime) -> datetime:
    return dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)  # SQLite drops the zone


# -- request checking -------------------------------------------------------------------
def check_fields(data, required: dict[str, type], optional: dict[str, type] | None = None) -> dict:
    """Unknown fields, missing fields and wrong types are refused, each naming the field."""
    optional = optional or {}
    if not isinstance(data, dict):
        raise BadRequest("expected a JSON object", code="invalid_body")
    for name in data:
        if name not in required and name not in optional:
            raise BadRequest(f"unknown field {name!r}", field=name, code="unknown_field")
    for name, kind in {**required, **optional}.items():
        if name not in data or data[name] is None:
            if name in required:
                raise BadRequest(f"{name} is required", field=name, code="missing_field")
            continue
        if not isinstance(data[name], kind) or isinstance(data[name], bool) and kind is not bool:
            raise BadRequest(f"{name} must be a {kind.__name__}", field=name, code="invalid_type")
    return data


def normalize_email(value: str, field: str = "email") -> str:
    try:
        return validate_email(value, check_deliverability=False).normalized.lower()
    except EmailNotValidError as exc:
        raise BadRequest(f"{field} is not a valid e-mail address: {exc}", field=field, code="invalid_email") from None


def normalize_mobile(value: str, region: str = "", field: str = "mobile") -> str:
    try:
        number = phonenumbers.parse(value, region or None)
    except phonenumbers.NumberParseException:
        number = None
    if number is None or not phonenumbers.is_valid_number(number):
        hint = "" if region else " in international form, e.g. +447911123456"
        raise BadRequest(f"{field} is not a valid mobile number{hint}", field=field, code="invalid_mobile")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def check_password(value: str, field: str = "password") -> str:
    if not 8 <= len(value) <= 256:
        raise BadRequest(f"{field} must be 8 to 256 characters long", field=field, code="weak_password")
    return value


class Accounts:
    def __init__(self, engine: sa.Engine, settings: Settings, mailer: Sender, sms: Sender):
        self.engine, self.settings, self.mailer, self.sms = engine, settings, mailer, sms

    # -- shapes ---------------------------------------------------------------------------
    def profile(self, conn, user_id: str) -> dict:
        u = conn.execute(sa.select(users).where(users.c.id == user_id)).mappings().one()
        n_floors = conn.execute(sa.select(sa.func.count()).select_from(floors).where(floors.c.owner_id == user_id)).scalar()
        n_blocks = conn.execute(sa.select(sa.func.count()).select_from(blocks).join(floors)
                                .where(floors.c.owner_id == user_id)).scalar()
        return {
            "user_id": u["id"], "name": u["name"], "email": u["email"], "mobile": u["mobile"],
            "validated": u["validated"], "created_at": _aware(u["created_at"]).isoformat(),
            "external_id": u["external_id"],
            "floor_count_info": {"permitted": u["floor_quota"], "remaining": max(0, u["floor_quota"] - n_floors)},
            "block_count_info": {"permitted": u["block_quota"], "remaining": max(0, u["block_quota"] - n_blocks)},
        }

    def pod_info(self, conn, user_id: str) -> dict:
        """The user's own floor (the first one created for them) and its blocks."""
        f = conn.execute(sa.select(floors).where(floors.c.owner_id == user_id).order_by(floors.c.created_at, floors.c.id)
                         .limit(1)).mappings().first()
        if f is None:
            return {}
        bl = conn.execute(sa.select(blocks).where(blocks.c.floor_id == f["id"]).order_by(blocks.c.created_at, blocks.c.id)
                          ).mappings().all()
        return {"floor_uid": f["id"], "title": f["title"], "is_private": f["is_private"],
                "blocks": [{"block_id": b["id"], "block_type": b["type"], "block_title": b["title"]} for b in bl]}

    # -- tokens -----------------------------------------------------------------------------
    def _issue_token(self, conn, user_id: str) -> dict:
        token = secrets.token_urlsafe(32)
        expires = now() + timedelta(hours=self.settings.token_ttl_hours)
        conn.execute(tokens.insert().values(hash=_sha(token), user_id=user_id, created_at=now(), expires_at=expires))
        return {"token": token, "token_type": "Bearer", "expires_at": expires.isoformat()}

    def authenticate(self, header: str | None) -> str:
        """The user id behind an ``Authorization: Bearer ...`` header, or 401."""
        if not header or not header.startswith("Bearer ") or len(header) > 200:
            raise Unauthorized("a bearer token is required", code="missing_token")
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(tokens).where(tokens.c.hash == _sha(header[7:].strip()))).mappings().first()
        if row is None or row["revoked_at"] is not None or _aware(row["expires_at"]) <= now():
            raise Unauthorized("the bearer token is invalid, expired or revoked", code="invalid_token")
        return row["user_id"]

    # -- codes --------------------------------------------------------------------------------
    def _code_hash(self, code: str) -> str:
        return hmac.new(self.settings.secret_key.encode(), code.encode(), hashlib.sha256).hexdigest()

    def _issue_code(self, conn, user_id: str, mode: str, destination: str, channel: Sender) -> None:
        conn.execute(codes.update().where(codes.c.user_id == user_id, codes.c.mode == mode, codes.c.used_at.is_(None))
                     .values(used_at=now()))  # one live code per user and mode
        code = f"{secrets.randbelow(10**6):06d}"
        conn.execute(codes.insert().values(
            id=new_id("c"), user_id=user_id, mode=mode, destination=destination, code_hash=self._code_hash(code),
            attempts=0, created_at=now(), expires_at=now() + timedelta(minutes=self.settings.code_ttl_minutes)))
        minutes = int(self.settings.code_ttl_minutes)
        try:
            channel.send(destination, f"Your memkit code: {code}",
                         f"Your memkit code is {code}. It is for: {MODES[mode]}.\n"
                         f"It expires in {minutes} minutes and works once.")
        except OSError:  # SMTP refused, unreachable, timed out: the transaction rolls back
            raise ApiError("the code could not be delivered; nothing was changed, try again later",
                           code="delivery_failed", status=503) from None

    def _use_code(self, user_id: str, mode: str, destination: str, code: str, field: str) -> str:
        """Check a code without consuming it; returns its id. A miss is counted at once."""
        if not isinstance(code, str) or not code.strip():
            raise BadRequest(f"{field} is required", field=field, code="missing_field")
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(codes).where(codes.c.user_id == user_id, codes.c.mode == mode)
                               .order_by(codes.c.created_at.desc()).limit(1)).mappings().first()
            problem = None
            if row is None:
                problem = ("no code was sent for this", "code_invalid")
            elif row["used_at"] is not None:
                problem = ("this code was already used or replaced", "code_used")
            elif row["attempts"] >= self.settings.code_max_attempts:
                problem = ("this code is burned after too many wrong tries; ask for a new one", "code_burned")
            elif _aware(row["expires_at"]) <= now():
                problem = ("this code has expired; ask for a new one", "code_expired")
            elif not hmac.compare_digest(row["destination"], destination):
                problem = ("this code was not sent to that address", "code_invalid")
            elif not hmac.compare_digest(row["code_hash"], self._code_hash(code.strip())):
                conn.execute(codes.update().where(codes.c.id == row["id"]).values(attempts=codes.c.attempts + 1))
                problem = ("the code is wrong", "code_invalid")
        if problem:
            raise BadRequest(problem[0], field=field, code=problem[1])
        return row["id"]

    def _consume(self, conn, code_id: str, field: str) -> None:
        """Mark a checked code used; a concurrent request that used it first wins."""
        done = conn.execute(codes.update().where(codes.c.id == code_id, codes.c.used_at.is_(None)).values(used_at=now()))
        if done.rowcount != 1:
            raise BadRequest("this code was already used or replaced", field=field, code="code_used")

    # -- operations ---------------------------------------------------------------------------
    def sign_up(self, data: dict) -> dict:
        check_fields(data, {"name": str, "password": str}, {"email": str, "mobile": str})
        if not data.get("email") and not data.get("mobile"):
            raise BadRequest("an e-mail address or a mobile number is required", field="email", code="missing_field")
        name = data["name"].strip()
        if not 1 <= len(name) <= 200:
            raise BadRequest("name must be 1 to 200 characters", field="name", code="invalid_name")
        email = normalize_email(data["email"]) if data.get("email") else None
        mobile = normalize_mobile(data["mobile"], self.settings.phone_region) if data.get("mobile") else None
        password = check_password(data["password"])
        with self.engine.begin() as conn:
            if email and conn.execute(sa.select(users.c.id).where(users.c.email == email)).first():
                raise Conflict("this e-mail address is already registered", field="email", code="email_in_use")
            if mobile and conn.execute(sa.select(users.c.id).where(users.c.mobile == mobile)).first():
                raise Conflict("this mobile number is already registered", field="mobile", code="mobile_in_use")
            uid = new_id("u")
            conn.execute(users.insert().values(
                id=uid, name=name, email=email, mobile=mobile, password_hash=_hasher.hash(password), validated=False,
                floor_quota=self.settings.floor_quota, block_quota=self.settings.block_quota, created_at=now()))
            self._create_own_floor(conn, uid, name)
            if email:
                self._issue_code(conn, uid, "signup", email, self.mailer)
            else:
                self._issue_code(conn, uid, "signup", mobile, self.sms)
            return {"user_id": uid, "profile": self.profile(conn, uid), "pod_info": self.pod_info(conn, uid),
                    "message": f"a validation code was sent to {email or mobile}"}

    def _create_own_floor(self, conn, user_id: str, name: str) -> None:
        fid = new_id("f")
        conn.execute(floors.insert().values(id=fid, owner_id=user_id, title=f"{name}'s floor", details="",
                                            is_private=True, created_at=now()))
        for btype, title in DEFAULT_BLOCKS:
            conn.execute(blocks.insert().values(id=new_id("b"), floor_id=fid, type=btype, title=title, details="",
                                                created_at=now()))

    def _find_user(self, conn, data: dict) -> dict | None:
        if data.get("email"):
            cond = users.c.email == normalize_email(data["email"])
        elif data.get("mobile"):
            cond = users.c.mobile == normalize_mobile(data["mobile"], self.settings.phone_region)
        else:
            raise BadRequest("an e-mail address or a mobile number is required", field="email", code="missing_field")
        return conn.execute(sa.select(users).where(cond)).mappings().first()

    def send_code(self, data: dict, user_id: str | None) -> dict:
        """Send a code for ``mode``. For signup and reset_password the answer is the same
        whether or not the account exists, so it cannot be used to find accounts."""
        check_fields(data, {"mode": str}, {"email": str, "mobile": str, "new_email_id": str, "new_mobile": str,
                                           "user_id": str, "app_id": str})
        mode = data["mode"]
        if mode not in MODES:
            raise BadRequest(f"mode must be one of {sorted(MODES)}", field="mode", code="invalid_mode")
        with self.engine.begin() as conn:
            if mode in ("signup", "reset_password"):
                user = self._find_user(conn, data)
                dest = data.get("email") or data.get("mobile")
                if user is not None and not (mode == "signup" and user["validated"]):
                    by_mail = bool(data.get("email"))
                    dest = user["email"] if by_mail else user["mobile"]
                    self._issue_code(conn, user["id"], mode, dest, self.mailer if by_mail else self.sms)
                return {"mode": mode, "message": f"if an account matches, a code was sent to {dest}"}
            if user_id is None:
                raise BadRequest("this mode needs a bearer token", field="mode", code="missing_token")
            if data.get("user_id") not in (None, user_id):
                raise BadRequest("user_id does not match the bearer token", field="user_id", code="user_mismatch")
            if mode == "change_email":
                if not data.get("new_email_id"):
                    raise BadRequest("new_email_id is required", field="new_email_id", code="missing_field")
                dest = normalize_email(data["new_email_id"], "new_email_id")
                if conn.execute(sa.select(users.c.id).where(users.c.email == dest)).first():
                    raise BadRequest("this e-mail address is already in use", field="new_email_id", code="email_in_use")
                self._issue_code(conn, user_id, mode, dest, self.mailer)
            else:
                if not data.get("new_mobile"):
                    raise BadRequest("new_mobile is required", field="new_mobile", code="missing_field")
                dest = normalize_mobile(data["new_mobile"], self.settings.phone_region, "new_mobile")
                if conn.execute(sa.select(users.c.id).where(users.c.mobile == dest)).first():
                    raise BadRequest("this mobile number is already in use", field="new_mobile", code="mobile_in_use")
                self._issue_code(conn, user_id, mode, dest, self.sms)
            return {"mode": mode, "message": f"a code was sent to {dest}"}

    def _account_code(self, data: dict, mode: str) -> tuple[dict, str]:
        """The account named by ``email`` or ``mobile`` and its checked ``code`` for ``mode``."""
        with self.engine.connect() as conn:
            user = self._find_user(conn, data)
        if user is None:
            raise BadRequest("no code was sent for this", field="code", code="code_invalid")
        dest = user["email"] if data.get("email") else user["mobile"]
        return user, self._use_code(user["id"], mode, dest, data["code"], "code")

    def validate(self, data: dict) -> dict:
        check_fields(data, {"code": str}, {"email": str, "mobile": str})
        user, code_id = self._account_code(data, "signup")
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "code")
            conn.execute(users.update().where(users.c.id == user["id"]).values(validated=True))
            return {"profile": self.profile(conn, user["id"]), **self._issue_token(conn, user["id"])}

    def sign_in(self, data: dict, by: str) -> dict:
        check_fields(data, {by: str, "password": str})
        with self.engine.begin() as conn:
            user = self._find_user(conn, {by: data[by]})
            if not verify_password(user["password_hash"] if user else None, data["password"]):
                raise Unauthorized(f"wrong {'e-mail address' if by == 'email' else 'mobile number'} or password",
                                   code="bad_credentials")
            if not user["validated"]:
                raise Forbidden("validate the account first (POST /auth-service/validate)", code="not_validated")
            return {"user_id": user["id"], "profile": self.profile(conn, user["id"]), **self._issue_token(conn, user["id"])}

    def change_password(self, user_id: str, data: dict) -> dict:
        check_fields(data, {"old_password": str, "new_password": str})
        check_password(data["new_password"], "new_password")
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(users.c.password_hash).where(users.c.id == user_id)).first()
            if not verify_password(row[0], data["old_password"]):
                raise BadRequest("old_password is wrong", field="old_password", code="bad_credentials")
            return self._set_password(conn, user_id, data["new_password"])

    def _set_password(self, conn, user_id: str, password: str) -> dict:
        conn.execute(users.update().where(users.c.id == user_id).values(password_hash=_hasher.hash(password)))
        conn.execute(tokens.update().where(tokens.c.user_id == user_id, tokens.c.revoked_at.is_(None))
                     .values(revoked_at=now()))  # every old token stops working at once
        return {"message": "password changed; every earlier token is revoked", **self._issue_token(conn, user_id)}

    def reset_password(self, data: dict) -> dict:
        check_fields(data, {"code": str, "new_password": str}, {"email": str, "mobile": str})
        check_password(data["new_password"], "new_password")
        user, code_id = self._account_code(data, "reset_password")
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "code")
            return self._set_password(conn, user["id"], data["new_password"])

    def change_email(self, user_id: str, data: dict) -> dict:
        """The seed's change of e-mail: ``new_email_id`` and ``activation_code`` (multipart
        or JSON; JSON may also carry ``user_id`` and ``app_id``). Every failure is a 400."""
        check_fields(data, {"new_email_id": str, "activation_code": str}, {"user_id": str, "app_id": str})
        if data.get("user_id") not in (None, user_id):
            raise BadRequest("user_id does not match the bearer token", field="user_id", code="user_mismatch")
        email = normalize_email(data["new_email_id"], "new_email_id")
        with self.engine.connect() as conn:
            if conn.execute(sa.select(users.c.id).where(users.c.email == email)).first():
                raise BadRequest("this e-mail address is already in use", field="new_email_id", code="email_in_use")
        code_id = self._use_code(user_id, "change_email", email, data["activation_code"], "activation_code")
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "activation_code")
            try:
                conn.execute(users.update().where(users.c.id == user_id).values(email=email))
            except sa.exc.IntegrityError:
                raise BadRequest("this e-mail address is already in use", field="new_email_id",
                                 code="email_in_use") from None
            return {"profile": self.profile(conn, user_id), "pod_info": self.pod_info(conn, user_id),
                    "app_id": data.get("app_id")}

    def change_mobile(self, user_id: str, data: dict) -> dict:
        check_fields(data, {"new_mobile": str, "code": str})
        mobile = normalize_mobile(data["new_mobile"], self.settings.phone_region, "new_mobile")
        with self.engine.connect() as conn:
            if conn.execute(sa.select(users.c.id).where(users.c.mobile == mobile)).first():
                raise BadRequest("this mobile number is already in use", field="new_mobile", code="mobile_in_use")
        code_id = self._use_code(user_id, "change_mobile", mobile, data["code"], "code")
        with self.engine.begin() as conn:
            self._consume(conn, code_id, "code")
            conn.execute(users.update().where(users.c.id == user_id).values(mobile=mobile))
            return {"profile": self.profile(conn, user_id), "pod_info": self.pod_info(conn, user_id)}

    # -- applications -------------------------------------------------------------------------
    def register_app(self, name: str) -> tuple[str, str]:
        """A new application: returns (app_id, secret); the secret is shown once."""
        app_id, secret = new_id("app"), secrets.token_urlsafe(32)
        with self.engine.begin() as conn:
            conn.execute(apps.insert().values(id=app_id, name=name, secret_hash=_hasher.hash(secret), created_at=now()))
        return app_id, secret

    def authenticate_app(self, app_id: str | None, secret: str | None) -> str:
        if not app_id or not secret:
            raise Unauthorized("application credentials are required (X-App-Id and X-App-Secret)", code="missing_app")
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(apps.c.secret_hash).where(apps.c.id == app_id)).first()
        if not verify_password(row[0] if row else None, secret):
            raise Unauthorized("unknown application or wrong secret", code="bad_app_credentials")
        return app_id

    def register_external(self, app_id: str, data: dict) -> dict:
        """Register, or find, the application's user with this external id (idempotent)."""
        check_fields(data, {"external_id": str}, {"name": str})
        ext = data["external_id"].strip()
        if not 1 <= len(ext) <= 200:
            raise BadRequest("external_id must be 1 to 200 characters", field="external_id", code="invalid")
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(users.c.id).where(users.c.app_id == app_id, users.c.external_id == ext)).first()
            created = row is None
            if created:
                uid = new_id("u")
                name = (data.get("name") or ext).strip()[:200]
                conn.execute(users.insert().values(id=uid, name=name, validated=True, app_id=app_id, external_id=ext,
                                                   floor_quota=self.settings.floor_quota,
                                                   block_quota=self.settings.block_quota, created_at=now()))
                self._create_own_floor(conn, uid, name)
            else:
                uid = row[0]
            return {"user_id": uid, "created": created, "app_id": app_id, "profile": self.profile(conn, uid),
                    "pod_info": self.pod_info(conn, uid), **self._issue_token(conn, uid)}

    def delete_account(self, user_id: str, data: dict) -> dict:
        """Delete the account and everything it owns: floors, blocks, events, tokens, codes."""
        check_fields(data, {"password": str})
        with self.engine.begin() as conn:
            row = conn.execute(sa.select(users.c.password_hash).where(users.c.id == user_id)).first()
            if not verify_password(row[0] if row else None, data["password"]):
                raise BadRequest("password is wrong", field="password", code="bad_credentials")
            gone = [r[0] for r in conn.execute(sa.select(events.c.id).where(sa.or_(
                events.c.user_id == user_id,
                events.c.floor_id.in_(sa.select(floors.c.id).where(floors.c.owner_id == user_id)))))]
            log_event_changes(conn, gone)  # search indexes drop them when they catch up
            conn.execute(users.delete().where(users.c.id == user_id))  # cascades to all it owns
        return {"deleted": user_id, "events_deleted": len(gone)}

    def get_profile(self, user_id: str) -> dict:
        with self.engine.connect() as conn:
            if conn.execute(sa.select(users.c.id).where(users.c.id == user_id)).first() is None:
                raise NotFound("no such user")
            return {"profile": self.profile(conn, user_id), "pod_info": self.pod_info(conn, user_id)}


def verify_password(stored_hash: str | None, password: str) -> bool:
    """argon2 check; with no stored hash it still spends the same time, so a missing
    account and a wrong password cannot be told apart by timing."""
    if not stored_hash:
        _hasher.hash(password)
        return False
    try:
        return _hasher.verify(stored_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def _sha(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
