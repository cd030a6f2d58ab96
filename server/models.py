"""Every request and response body of the service, declared once as pydantic v2 models.

Routes validate bodies with these models (``server/api/openapi.py``: ``body()``), check
what they answer against them, and the OpenAPI document is generated from them, so the
document and the behaviour cannot drift apart. Schemas the interface specification names
keep its names (PostAdd, QueryResponse, Media, UserDetails, SignUpResponse, BlockDetails,
FloorInfo, Threads, EventResponse, 400ErrorCode, Remaining, SignInResponse; QueryRequest and
ChangeEmailRequest for its two requests); field names and shapes follow its sections 2.1
to 2.4 to the letter.

Requests are strict: no coercion (``"5"`` is not a ``k``, ``true`` is not ``"1"``) and no
unknown field. A rule the schema cannot say (an e-mail that parses, a password that
matches) stays in the services. A custom rule raises ``PydanticCustomError`` whose type is
the service's error code, so every refusal keeps its code (``errors_to_api``).

``block_type`` has one meaning everywhere: the block type's number (as the query items'
``block_type`` in the interface), with ``block_type_name`` beside it in responses.
"""

from __future__ import annotations

import json
import re
import unicodedata
from datetime import datetime
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic_core import PydanticCustomError

from memkit.core.tables import parse_time

# Block types and their numbers (0 in a response: a type this version does not know, e.g.
# one stored by another version; reported, never a failed request).
BLOCK_TYPES = {"feed": 1, "blog": 2, "forum": 3, "quiz": 4}
BLOCK_TYPE_DOC = "; ".join(f"{v} = {k}" for k, v in BLOCK_TYPES.items())
MODES = {
    "signup": "validate a new account (sent to its e-mail, else its mobile number)",
    "reset_password": "reset a forgotten password (sent to the account's e-mail or mobile number)",
    "change_email": (
        "confirm a new e-mail address (sent to the new address; bearer token and password required)"
    ),
    "change_mobile": (
        "confirm a new mobile number (sent to the new number; bearer token and password required)"
    ),
}
DEFAULT_K, MAX_K, MAX_QUERY, MAX_FLOORS = 10, 50, 2000, 50
MAX_TEXT, MAX_TAGS, MAX_BATCH, MAX_MEDIA = 20_000, 20, 1000, 20
MAX_DETAILS, MAX_AVATAR = 5000, 2000


class Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class Response(BaseModel):
    """What the service answers; ``extra="forbid"`` makes a field the model lacks a bug the
    tests catch."""

    model_config = ConfigDict(extra="forbid")


# -- field types --------------------------------------------------------------------------
def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("empty", "must not be empty or only spaces")
    return value


def _unique(values: list) -> list:
    return list(dict.fromkeys(values))


_JOINERS = "\u200c\u200d"  # zero-width non-joiner and joiner: spelling in Persian, emoji


def _shown_plainly(value: str) -> str:
    """A name or a title holds no control or format character, nor a line or paragraph
    separator: answers show them as who wrote a quote and where (memkit.answer.render), and
    a zero-width space, a bidi override or a line break makes one read as another ("Oli\u200b"
    for "Oli", an override that turns a name around, a name that starts a line of its own).
    A joiner between two characters is spelling, not a trick, and is taken."""
    for at, c in enumerate(value):
        if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            continue
        if c in _JOINERS and 0 < at < len(value) - 1:
            if not (value[at - 1].isspace() or value[at + 1].isspace()):
                continue
        raise PydanticCustomError(
            "invalid_characters",
            "expected letters, digits, spaces and punctuation, with no control or format "
            "character (line break, tab, zero-width or bidi character); found {char} at "
            "position {at}",
            {"char": f"U+{ord(c):04X} {unicodedata.name(c, '(unnamed)')}", "at": at},
        )
    return value


PLAIN = "no control or format characters (line breaks, tabs, zero-width or bidi characters)"


def _time(value, end_of_day: bool = False):
    """ISO 8601 text to an aware UTC datetime (a naive time is UTC; a date alone is the start
    of that day, or with ``end_of_day`` its last instant)."""
    if not isinstance(value, str):
        raise PydanticCustomError(
            "invalid_time", "expected an ISO 8601 time such as 2024-05-01T12:00:00Z"
        )
    try:
        return parse_time(value, end_of_day=end_of_day)
    except ValueError as exc:
        why = str(exc)  # "month must be in 1..12"; Python's "Invalid isoformat string" adds nothing
        if why.startswith("Invalid isoformat string"):
            raise PydanticCustomError(
                "invalid_time", "expected an ISO 8601 time such as 2024-05-01T12:00:00Z"
            ) from None
        raise PydanticCustomError(
            "invalid_time",
            "expected an ISO 8601 time such as 2024-05-01T12:00:00Z ({why})",
            {"why": why},
        ) from None


def _time_to(value):
    """An inclusive upper bound: a date alone ("2026-02-28") includes that whole day; a full
    time keeps its exact meaning."""
    return _time(value, end_of_day=True)


NonBlank = Annotated[str, StringConstraints(min_length=1), AfterValidator(_not_blank)]
Title = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    AfterValidator(_shown_plainly),
    Field(description=f"1 to 200 characters once outer spaces are trimmed; {PLAIN}"),
]
Name = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
    AfterValidator(_shown_plainly),
    Field(
        description=f"the name answers show: 1 to 200 characters once outer spaces are "
        f"trimmed; {PLAIN}"
    ),
]
Details = Annotated[str, StringConstraints(max_length=MAX_DETAILS)]
Password = Annotated[str, StringConstraints(min_length=8, max_length=256)]
# Addresses are bounded before anything reads them: the rate limiter's account key and the
# services normalise them (NFKC, email_validator, phonenumbers), work that grows with the
# length (a 990 kB address took 0.6 s). 254 characters is RFC 5321's path limit without its
# angle brackets; a mobile number in any spelling (spaces, an extension) fits in 32.
MAX_EMAIL, MAX_MOBILE = 254, 32
EmailAddress = Annotated[str, StringConstraints(max_length=MAX_EMAIL)]
MobileNumber = Annotated[str, StringConstraints(max_length=MAX_MOBILE)]
Time = Annotated[
    datetime,
    BeforeValidator(_time),
    WithJsonSchema(
        {"type": "string", "format": "date-time", "description": "ISO 8601; no zone means UTC"}
    ),
]
EndTime = Annotated[
    datetime,
    BeforeValidator(_time_to),
    WithJsonSchema(
        {
            "type": "string",
            "format": "date-time",
            "description": "ISO 8601; no zone means UTC; a date alone means the end of that day",
        }
    ),
]
Tags = Annotated[
    list[Annotated[str, StringConstraints(min_length=1, max_length=50)]],
    Field(max_length=MAX_TAGS),
    AfterValidator(_unique),
]
BlockTypeName = Literal["feed", "blog", "forum", "quiz"]
# What filters.types takes: the block types, and "post" (the interface's example value): the
# posts of feed blocks, the same as "feed".
FilterTypeName = Literal["feed", "blog", "forum", "quiz", "post"]
Flag = Literal["0", "1"]
FilterTags = Annotated[list[NonBlank], Field(max_length=50), AfterValidator(_unique)]
IsoTime = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


# -- errors -------------------------------------------------------------------------------
CODES = {  # pydantic error type -> the service's error code (any other type is its own code)
    "missing": "missing_field",
    "extra_forbidden": "unknown_field",
    "string_too_short": "empty",
    "string_too_long": "too_long",
    "too_short": "empty",
    "too_long": "too_many",
    "greater_than_equal": "out_of_range",
    "less_than_equal": "out_of_range",
    "literal_error": "invalid_type",
    "enum": "invalid_type",
}


JSON_TYPES = {  # pydantic's type errors -> the JSON value that was expected
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
}


def field_path(loc: tuple) -> str | None:
    """pydantic's ``("filters", "types", 0)`` as ``filters.types[0]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or None


def as_json(value) -> str:
    """A value as the request sent it, in JSON's words: a string, number, true, false or
    null as its JSON text (cut at 80 characters); an array or object by its kind."""
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _message(err: dict) -> str:
    """What was wrong, in the interface's words (JSON's types and values, not Python's)."""
    kind, ctx, got = err["type"], err.get("ctx", {}), err.get("input")
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "missing":
        return "required"
    if kind in JSON_TYPES:
        return f"expected {JSON_TYPES[kind]}, got {as_json(got)}"
    if kind == "literal_error":  # pydantic writes the choices as Python: '0' or '1'
        choices = re.sub(r"'([^']*)'", lambda c: json.dumps(c.group(1)), ctx["expected"])
        return f"expected {choices}, got {as_json(got)}"
    if kind in ("too_short", "too_long") and isinstance(got, (list, dict)):
        bound = ctx["min_length"] if kind == "too_short" else ctx["max_length"]
        most = "at least" if kind == "too_short" else "at most"
        return f"expected {most} {bound} item{'s' * (bound != 1)}, got {len(got)}"
    message = err["msg"][0].lower() + err["msg"][1:] if err["msg"] else kind
    return message if isinstance(got, (list, dict)) else f"{message} (got {as_json(got)})"


def errors_to_api(exc: ValidationError, error_class):
    """The first problem of a failed validation as the service's one error shape: its field
    path, a message that names it and says what was expected and what came instead, and the
    service's code."""
    problems = exc.errors(include_url=False)
    # an unknown field first (what was sent is wrong before what is missing), as before the models
    err = next((e for e in problems if e["type"] == "extra_forbidden"), problems[0])
    # a rule of a whole model names the field it is about in its context
    field = field_path(
        err["loc"] + ((err["ctx"]["field"],) if "field" in err.get("ctx", {}) else ())
    )
    kind = err["type"]
    code = CODES.get(kind, "invalid_type" if kind.endswith(("_type", "_parsing")) else kind)
    return error_class(f"{field or 'the body'}: {_message(err)}", field=field, code=code)


# -- requests: accounts -------------------------------------------------------------------
class SignUpRequest(Request):
    name: Name
    email: EmailAddress | None = Field(
        None, description="an e-mail address or a mobile number is required"
    )
    mobile: MobileNumber | None = Field(None, description="international form, e.g. +447911123456")
    password: Password


class SendCodeRequest(Request):
    mode: Literal["signup", "reset_password", "change_email", "change_mobile"] = Field(
        description="; ".join(f"{k}: {v}" for k, v in MODES.items())
    )
    email: EmailAddress | None = None
    mobile: MobileNumber | None = None
    new_email_id: EmailAddress | None = None
    new_mobile: MobileNumber | None = None
    user_id: str | None = None
    app_id: str | None = Field(None, description="a registered application's id (else invalid_app)")
    password: str | None = Field(
        None, description="the account's password: required by change_email and change_mobile"
    )


class ValidateRequest(Request):
    email: EmailAddress | None = None
    mobile: MobileNumber | None = None
    code: str
    password: str = Field(description="the password chosen at sign-up")


class SignInEmailRequest(Request):
    email: EmailAddress
    password: str


class SignInMobileRequest(Request):
    mobile: MobileNumber
    password: str


class ChangePasswordRequest(Request):
    old_password: str
    new_password: Password


class ResetPasswordRequest(Request):
    email: EmailAddress | None = None
    mobile: MobileNumber | None = None
    code: str
    new_password: Password


class ChangeEmailRequest(Request):
    """Interface 2.3: JSON with these four fields, or multipart form parts (the sample sends
    ``new_email_id`` and ``activation_code``)."""

    user_id: str | None = Field(None, description="if given, the bearer token's user")
    new_email_id: EmailAddress
    activation_code: str
    app_id: str | None = Field(
        None,
        description="if given, a registered application's id (else invalid_app); "
        "echoed in the answer",
    )


class ChangeMobileRequest(Request):
    new_mobile: MobileNumber
    code: str


class ExternalRegisterRequest(Request):
    external_id: Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=200),
        AfterValidator(_shown_plainly),
        Field(description=f"the user's name where no name is given; {PLAIN}"),
    ]
    name: Name | None = None


class DeleteAccountRequest(Request):
    password: str


# -- requests: floors and events ----------------------------------------------------------
class FloorCreate(Request):
    title: Title
    details: Details = ""
    avatar: Annotated[str, StringConstraints(max_length=MAX_AVATAR)] | None = None
    is_private: bool = False


def _no_default(schema: dict) -> None:
    schema.pop("default", None)


# An optional field that may not be null: absent means "unchanged" (the document shows no default).
UNCHANGED = Field(None, json_schema_extra=_no_default)


class FloorEdit(Request):
    """Only the fields given change (null is not "unchanged"; an avatar may be null: none)."""

    title: Title = UNCHANGED
    details: Details = UNCHANGED
    avatar: Annotated[str, StringConstraints(max_length=MAX_AVATAR)] | None = None

    @model_validator(mode="after")
    def _something(self):
        if not self.model_fields_set:
            raise PydanticCustomError(
                "missing_field", "nothing to change: give title, details or avatar"
            )
        return self


class FloorRename(Request):
    title: Title


class BlockCreate(Request):
    block_type: Literal[1, 2, 3, 4] = Field(description=BLOCK_TYPE_DOC)
    title: Title
    details: Details = ""


class Media(Request):
    url: Annotated[str, StringConstraints(max_length=2000)]
    type: Annotated[str, StringConstraints(max_length=50)] = "image"
    caption: Annotated[str, StringConstraints(max_length=1000)] | None = None


class PostAdd(Request):
    text: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_TEXT), AfterValidator(_not_blank)
    ]
    tags: Tags = []
    media: Annotated[list[Media], Field(max_length=MAX_MEDIA)] = []
    reply_to: str | None = Field(None, description="an event of the same floor")
    repost_of: str | None = Field(
        None, description="an event you can read; its floor becomes from_floor_uid"
    )
    created_at: Time | None = Field(None, description="the event's own time; absent: now")


class PostBatch(Request):
    events: Annotated[list[PostAdd], Field(min_length=1, max_length=MAX_BATCH)]


class EventEdit(Request):
    text: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_TEXT), AfterValidator(_not_blank)
    ] = UNCHANGED
    tags: Tags = UNCHANGED
    media: Annotated[list[Media], Field(max_length=MAX_MEDIA)] = UNCHANGED

    @model_validator(mode="after")
    def _something(self):
        if not self.model_fields_set:
            raise PydanticCustomError(
                "missing_field", "nothing to change: give text, tags or media"
            )
        return self


class RecentEvents(BaseModel):
    """The query string of recent events (text, so numbers are parsed)."""

    model_config = ConfigDict(extra="forbid")
    block_id: str | None = None
    type: BlockTypeName | None = Field(None, description="a block type name")
    limit: int = Field(20, ge=1, le=100)
    cursor: str | None = Field(None, description="next_cursor of the previous page")


# -- requests: the conversational query (interface 2.1) -----------------------------------
class QueryFilters(Request):
    time_from: Time | None = Field(
        None,
        description="inclusive, on the event's own time; no zone means UTC; a date alone "
        "(2026-02-01) means the start of that day",
    )
    time_to: EndTime | None = Field(
        None,
        description="inclusive; no zone means UTC; a date alone (2026-02-28) means the end of "
        "that day, so all of its posts are in",
    )
    types: list[FilterTypeName] | None = Field(
        None, description='block type names; "post" is the same as "feed"'
    )
    tags: FilterTags | None = Field(None, description="an event matches if it has any of them")

    @model_validator(mode="after")
    def _ordered(self):
        if self.time_from and self.time_to and self.time_from > self.time_to:
            raise PydanticCustomError(
                "invalid_range", "must not be after filters.time_to", {"field": "time_from"}
            )
        return self


class QueryRequest(Request):
    user_id: NonBlank = Field(
        description="the token's user (or the calling application's own user)"
    )
    query: Annotated[
        str, StringConstraints(min_length=1, max_length=MAX_QUERY), AfterValidator(_not_blank)
    ]
    floor_ids: Annotated[
        list[NonBlank], Field(min_length=1, max_length=MAX_FLOORS), AfterValidator(_unique)
    ]
    filters: QueryFilters = Field(default_factory=QueryFilters, description="must be an object")
    k: int = Field(DEFAULT_K, ge=1, le=MAX_K)
    min_score: float | None = Field(
        None,
        ge=0,
        le=1,
        description="items scoring below this probability of "
        "relevance are not returned; default: the served config's [relevance] "
        "min_score",
    )
    include_metadata: Flag = "0"
    summary_needed: Flag = Field("0", description='"1": a written answer; "0": a one-line account')
    app_id: NonBlank | None = Field(
        None,
        description="the calling application; a registered one (else invalid_app), "
        "the caller's own with application credentials",
    )
    filter_types: list[FilterTypeName] | None = Field(
        None, description="alias of filters.types (not both)"
    )
    filter_tags: FilterTags | None = Field(None, description="alias of filters.tags (not both)")

    @model_validator(mode="after")
    def _aliases(self):
        for alias, name in (("filter_types", "types"), ("filter_tags", "tags")):
            value = getattr(self, alias)
            if value is not None:
                if getattr(self.filters, name) is not None:
                    raise PydanticCustomError(
                        "duplicate",
                        "give {name} once: filters.{name} or {field}",
                        {"field": alias, "name": name},
                    )
                setattr(self.filters, name, value)
        return self


# -- responses ----------------------------------------------------------------------------
class ErrorDetail(Response):
    code: str
    message: str
    field: str | None = Field(description="the field to blame, e.g. filters.types[0]; null if none")


class Error400(Response):
    """Every error body, whatever the status (named 400ErrorCode in the document)."""

    error: ErrorDetail


class Remaining(Response):
    permitted: str = Field(description="a whole number, as a string (interface 2.4)")
    remaining: str = Field(description="a whole number, as a string (interface 2.4)")


class Avatar(Response):
    url: str = Field(description="the floor's avatar URL; empty if none")
    type: str = Field(description='"image" when there is a url, else empty')


class UserDetails(Response):
    """The ``profile`` of interface 2.4. memkit keeps one id per floor, so ``floor_id`` and
    ``FID`` both carry the user's own floor's id; ``title`` and ``avatar`` are that floor's."""

    floor_id: str = Field(description="the user's own floor (pod_info.floor_uid)")
    floor_count_info: Remaining
    block_count_info: Remaining
    FID: str = Field(description="memkit has one floor identifier: the same as floor_id")
    title: str = Field(description="the title of the user's own floor")
    name: str
    email: str = Field(description="empty if the account has none")
    mobile_number: str = Field(description="E.164; empty if the account has none")
    user_id: str
    avatar: Avatar = Field(description="the user's own floor's avatar")
    validated: bool
    created_at: IsoTime
    external_id: str | None = Field(description="for users an application registered")


class PodBlock(Response):
    block_id: str
    type: str = Field(description="the block type's name (block_type_name elsewhere)")
    title: str


class PodInfo(Response):
    """The user's own floor (the first one created for them), as interface 2.4 shapes it."""

    floor_id: str = Field(description="the same as floor_uid (memkit has one floor identifier)")
    is_owner: Literal["0", "1"] = Field(
        description='"1": the pod is always the user\'s own floor (a string, '
        "as the interface types it)"
    )
    app_id: str = Field(
        description="the application that registered the user; empty for users who signed up"
    )
    title: str
    details: str
    floor_uid: str
    blocks: list[PodBlock]
    avatar: Avatar


class SignUpResponse(Response):
    user_id: str
    profile: UserDetails
    pod_info: PodInfo
    message: str


class SignInResponse(Response):
    user_id: str
    profile: UserDetails
    token: str
    token_type: Literal["Bearer"]
    expires_at: IsoTime


class ProfileResponse(Response):
    profile: UserDetails
    pod_info: PodInfo


class ChangeEmailResponse(Response):
    """Interface 2.4."""

    profile: UserDetails
    pod_info: PodInfo
    app_id: str = Field(description="the request's app_id; empty if it gave none")


class ExternalUserResponse(Response):
    user_id: str
    created: bool
    app_id: str
    profile: UserDetails
    pod_info: PodInfo
    token: str
    token_type: Literal["Bearer"]
    expires_at: IsoTime


class PasswordChanged(Response):
    message: str
    token: str
    token_type: Literal["Bearer"]
    expires_at: IsoTime


class CodeSent(Response):
    mode: str
    message: str


class Deleted(Response):
    deleted: str
    events_deleted: int | None = None


TypeNumber = Annotated[
    int, Field(description=f"{BLOCK_TYPE_DOC}; 0 = a type this version does not know")
]
TypeName = Annotated[
    str,
    Field(
        description="the block type's name (any other than "
        f"{', '.join(BLOCK_TYPES)}: a type this version does not know)"
    ),
]


class BlockDetails(Response):
    block_id: str
    block_type: TypeNumber
    block_type_name: TypeName
    block_title: str
    block_details: str
    created_at: IsoTime


class FloorInfo(Response):
    floor_uid: str
    owner_id: str
    title: str
    details: str
    avatar: str | None
    is_private: bool
    created_at: IsoTime
    blocks: list[BlockDetails]


class MediaOut(Response):
    url: str
    type: str
    caption: str | None


class EventResponse(Response):
    event_id: str
    floor_uid: str
    from_floor_uid: str
    block_id: str
    block_type: TypeNumber
    block_type_name: TypeName
    user_id: str
    text: str
    tags: list[str]
    media: list[MediaOut]
    reply_to: str | None
    created_at: IsoTime
    updated_at: IsoTime


class Threads(Response):
    floor_uid: str
    events: list[EventResponse]
    next_cursor: str | None


class PostBatchResponse(Response):
    floor_uid: str
    block_id: str
    events: list[EventResponse]


class SourceOut(Response):
    floor_title: str
    block_type_name: TypeName
    reply_to: str | None
    repost: bool
    media: list[MediaOut]


class ItemMetadata(Response):
    source: SourceOut
    created_at: IsoTime | None
    updated_at: IsoTime | None
    tags: list[str]


class QueryItem(Response):
    block_type: TypeNumber
    block_id: str
    block_title: str
    block_details: str
    event_id: str
    floor_uid: str
    from_floor_uid: str = Field(
        description="the floor the event was first posted in (its own unless a re-post)"
    )
    user_id: str
    text: str
    score: float = Field(
        description="the probability (0 to 1, calibrated on held-out questions) that the item "
        "answers the question; the same meaning on every turn"
    )
    match_type: Literal["keyword", "semantic", "hybrid", "time"] = Field(
        description='"time": the question named only a time window and the item is in it'
    )
    metadata: ItemMetadata | None = Field(None, description='only when include_metadata is "1"')


class CarriedWindowOut(Response):
    from_: str = Field(alias="from", description="the first day (ISO 8601 date)")
    to: str = Field(description="the last day (ISO 8601 date)")
    text: str | None = Field(description='how the window reads ("May 2026"); null when carried')
    source: Literal["question", "previous turn"]
    phrase: str | None = Field(None, description="the question's words that named it")


class CarriedOut(Response):
    kind: Literal["alone", "new", "follow-up", "return", "unresolved"] = Field(
        description="how the question was read: on its own (no earlier turns, or naming its own "
        "subject), starting a new topic, following up the current topic, returning to an earlier "
        "one, or a bare follow-up of a new user that refers to nothing asked before"
    )
    topic: int = Field(
        description="which topic of this user's conversation it belongs to (0, 1, ...)"
    )
    words: list[str] = Field(description="words carried from earlier turns into the search")
    posts: list[str] = Field(
        description="the posts the previous answer quoted, or the one its decline named "
        "(what a pronoun may refer to)"
    )
    window: CarriedWindowOut | None = Field(
        description="the days searched: named in the question or carried"
    )


class QueryMetadata(Response):
    effective_query: str
    context_turns: int
    contextualizer: dict
    pipeline: str
    carried: CarriedOut
    declined: bool = Field(
        description="the answer says the floors hold nothing that answers the question"
    )
    quoted: list[str] = Field(description="the event ids the answer quotes, in order")


class QueryResponse(Response):
    user_id: str
    query: str
    effective_query: str = Field(description="what was searched, after follow-up handling")
    answer: str = Field(
        description='summary_needed "1": a written answer quoting the items; "0": a one-line '
        "account; a fallback when nothing relevant was found"
    )
    items: list[QueryItem] = Field(
        description="the posts that ground the answer, best first; empty when nothing "
        "relevant was found or the answer declines, but for the closest post a decline names"
    )
    app_id: str | None
    metadata: QueryMetadata | None = Field(None, description='only when include_metadata is "1"')
