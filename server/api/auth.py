"""``/auth-service/...``: accounts. Bodies are JSON; change of e-mail also takes multipart
form parts, as the interface specification describes."""

from __future__ import annotations

from flask import Blueprint, current_app, jsonify, request

from server.errors import BadRequest, Unauthorized


def svc():
    return current_app.extensions["memkit"]["accounts"]


def json_body() -> dict:
    if not request.is_json:
        raise BadRequest("expected a JSON body (Content-Type: application/json)", code="invalid_body")
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise BadRequest("the body is not a JSON object", code="invalid_body")
    return data


def current_user() -> str:
    return svc().authenticate(request.headers.get("Authorization"))


def bearer_token() -> str | None:
    header = request.headers.get("Authorization") or ""
    return header[7:].strip() if header.startswith("Bearer ") else None


def optional_user() -> str | None:
    return current_user() if request.headers.get("Authorization") else None


def make_blueprint(limiter, settings) -> Blueprint:
    bp = Blueprint("auth", __name__, url_prefix="/auth-service")

    @bp.post("/signup")
    @limiter.limit(settings.rate_limit_sign_up, deduct_when=lambda response: response.status_code == 200)
    def signup():  # counts the sign-ups that send a message, like send/validation/code
        return jsonify(svc().sign_up(json_body()))

    @bp.post("/send/validation/code")
    @limiter.limit(settings.rate_limit_send_code)
    def send_code():
        return jsonify(svc().send_code(json_body(), optional_user()))

    @bp.post("/validate")
    @limiter.limit(settings.rate_limit_check_code)
    def validate():
        return jsonify(svc().validate(json_body()))

    @bp.post("/signin/email")
    @limiter.limit(settings.rate_limit_sign_in)
    def signin_email():
        return jsonify(svc().sign_in(json_body(), "email"))

    @bp.post("/signin/mobile")
    @limiter.limit(settings.rate_limit_sign_in)
    def signin_mobile():
        return jsonify(svc().sign_in(json_body(), "mobile"))

    @bp.post("/change/password")
    def change_password():
        return jsonify(svc().change_password(current_user(), json_body()))

    @bp.post("/reset/password")
    @limiter.limit(settings.rate_limit_check_code)
    def reset_password():
        return jsonify(svc().reset_password(json_body()))

    @bp.post("/change/email")
    @limiter.limit(settings.rate_limit_change_email)
    def change_email():
        # Every failure of this operation is a 400, a missing or bad token included.
        try:
            user = current_user()
        except Unauthorized as exc:  # a 400 here, as the specification asks; the code stays precise
            raise BadRequest(exc.message, code=exc.code) from None
        if request.mimetype == "multipart/form-data":
            unknown = [k for k in list(request.form) + list(request.files) if k not in ("new_email_id", "activation_code")]
            if unknown:
                raise BadRequest(f"unknown field {unknown[0]!r}", field=unknown[0], code="unknown_field")
            data = {k: request.form.get(k) for k in ("new_email_id", "activation_code") if k in request.form}
        else:
            data = json_body()
        return jsonify(svc().change_email(user, data, bearer_token()))

    @bp.post("/change/mobile")
    @limiter.limit(settings.rate_limit_check_code)
    def change_mobile():
        return jsonify(svc().change_mobile(current_user(), json_body(), bearer_token()))

    @bp.post("/external/register")
    def register_external():
        app_id = svc().authenticate_app(request.headers.get("X-App-Id"), request.headers.get("X-App-Secret"))
        return jsonify(svc().register_external(app_id, json_body()))

    @bp.delete("/account")
    def delete_account():
        return jsonify(svc().delete_account(current_user(), json_body()))

    @bp.get("/profile")
    def profile():
        return jsonify(svc().get_profile(current_user()))

    return bp
