"""``/auth-service/...``: accounts. Bodies are JSON; change of e-mail also takes multipart
form parts, as the interface specification describes (section 2.3)."""

from __future__ import annotations

from flask import Blueprint, current_app, request

from server import models as m
from server.api.openapi import body, operation
from server.errors import BadRequest, Unauthorized
from server.services.accounts import bearer_token


def svc():
    return current_app.extensions["memkit"]["accounts"]


def current_user() -> str:
    return svc().authenticate(request.headers.get("Authorization"))


def optional_user() -> str | None:
    return current_user() if request.headers.get("Authorization") else None


def app_caller() -> str:
    """The application of X-App-Id and X-App-Secret; wrong secrets are counted per
    application id and client address, and past their limit refused unchecked (429),
    but a secret argon2 accepted lately is known without either (Accounts.known_app)."""
    accounts, app_id, secret = (
        current_app.extensions["memkit"]["accounts"],
        request.headers.get("X-App-Id"),
        request.headers.get("X-App-Secret"),
    )
    if accounts.known_app(app_id, secret):
        return app_id
    with current_app.extensions["memkit"]["failed_credentials"].check(
        "app_secret", (app_id or "").strip()
    ):
        return accounts.authenticate_app(app_id, secret)


def password_tries(user: str):
    """Wrong passwords given with a token (stolen, say) are counted per user and client
    address, and past their limit refused unchecked (429)."""
    return current_app.extensions["memkit"]["failed_credentials"].check("password", f"user:{user}")


def _send_code_account(data: dict):
    """Sign-up and reset codes count against the address they go to; a change of address
    against the token's user (whatever new address each try names)."""
    return "token" if str(data.get("mode", "")).startswith("change_") else ("email", "mobile")


def make_blueprint(limits) -> Blueprint:
    """``limits``: the rate limits per account and per address (server/api/limits.py)."""
    bp = Blueprint("auth", __name__, url_prefix="/auth-service")

    @bp.post("/signup")
    @operation(
        summary="Sign up with e-mail and/or mobile number; sends a validation code",
        response=m.SignUpResponse,
        body=m.SignUpRequest,
        auth="none",
        errors=("400", "409", "429", "503"),
    )
    @limits(
        "sign_up", account=("email", "mobile")
    )  # every try, counted before it runs: a burst cannot pass
    def signup():
        return svc().sign_up(body())

    @bp.post("/send/validation/code")
    @operation(
        summary="Send a validation code for a mode (signup and reset_password need no token, the "
        "same answer either way)",
        response=m.CodeSent,
        body=m.SendCodeRequest,
        auth="none",
        errors=("400", "401", "429", "503"),
    )
    @limits("send_code", account=_send_code_account)
    def send_code():
        user = optional_user()
        if user is None:
            return svc().send_code(body(), None)
        with password_tries(user):  # a change of address checks the account's password
            return svc().send_code(body(), user)

    @bp.post("/validate")
    @operation(
        summary="Validate a new account with its code and the password chosen at sign-up",
        response=m.SignInResponse,
        body=m.ValidateRequest,
        auth="none",
        errors=("400", "401", "429"),
    )
    @limits("check_code", account=("email", "mobile"))
    def validate():
        return svc().validate(body())

    @bp.post("/signin/email")
    @operation(
        summary="Sign in with e-mail and password",
        response=m.SignInResponse,
        body=m.SignInEmailRequest,
        auth="none",
        errors=("400", "401", "403", "429"),
    )
    @limits("sign_in", account=("email",))
    def signin_email():
        return svc().sign_in(body(), "email")

    @bp.post("/signin/mobile")
    @operation(
        summary="Sign in with mobile number and password",
        response=m.SignInResponse,
        body=m.SignInMobileRequest,
        auth="none",
        errors=("400", "401", "403", "429"),
    )
    @limits("sign_in", account=("mobile",))
    def signin_mobile():
        return svc().sign_in(body(), "mobile")

    @bp.post("/change/password")
    @operation(
        summary="Change password; revokes every earlier token",
        response=m.PasswordChanged,
        body=m.ChangePasswordRequest,
        errors=("400", "401", "429"),
    )
    def change_password():
        user = current_user()
        with password_tries(user):
            return svc().change_password(user, body())

    @bp.post("/reset/password")
    @operation(
        summary="Reset a forgotten password with a code; revokes every token",
        response=m.PasswordChanged,
        body=m.ResetPasswordRequest,
        auth="none",
        errors=("400", "401", "429"),
    )
    @limits("check_code", account=("email", "mobile"))
    def reset_password():
        return svc().reset_password(body())

    @bp.post("/change/email")
    @operation(
        summary="Change e-mail with a code sent to the new address (JSON or multipart); revokes "
        "every other token and tells the old address; every failure is a 400",
        response=m.ChangeEmailResponse,
        body=m.ChangeEmailRequest,
        form=True,
        errors=("400", "429"),
    )
    @limits("change_email", account="token")
    def change_email():
        # Every failure of this operation is a 400, a missing or bad token included.
        try:
            user = current_user()
        except Unauthorized as exc:  # a 400 here, as the specification asks; the code stays precise
            raise BadRequest(exc.message, code=exc.code) from None
        return svc().change_email(user, body(), bearer_token(request.headers.get("Authorization")))

    @bp.post("/change/mobile")
    @operation(
        summary="Change mobile number with a code sent to it; revokes every other token and tells "
        "the old number",
        response=m.ProfileResponse,
        body=m.ChangeMobileRequest,
        errors=("400", "401", "429"),
    )
    @limits("check_code", account="token")
    def change_mobile():
        return svc().change_mobile(
            current_user(), body(), bearer_token(request.headers.get("Authorization"))
        )

    @bp.post("/external/register")
    @operation(
        summary="An application registers, or finds, its user by external id (idempotent)",
        response=m.ExternalUserResponse,
        body=m.ExternalRegisterRequest,
        auth="app",
        errors=("400", "401", "429"),
    )
    def register_external():
        return svc().register_external(app_caller(), body())

    @bp.delete("/account")
    @operation(
        summary="Delete the account and everything it owns",
        response=m.Deleted,
        body=m.DeleteAccountRequest,
        errors=("400", "401", "429"),
    )
    def delete_account():
        user = current_user()
        with password_tries(user):
            return svc().delete_account(user, body())

    @bp.get("/profile")
    @operation(summary="The signed-in user's profile and own floor", response=m.ProfileResponse)
    def profile():
        return svc().get_profile(current_user())

    return bp
