"""Every refusal in OpenAI's JSON error shape: {"error": {"message", "type", "param", "code"}}, one line each.

Clients built for OpenAI's API read `error.message`; the status says what kind of problem it is."""

from __future__ import annotations

from starlette.responses import JSONResponse

from engine import as_sentence

TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "invalid_request_error",
         405: "invalid_request_error", 408: "invalid_request_error", 413: "invalid_request_error",
         415: "invalid_request_error", 429: "rate_limit_error", 500: "server_error", 503: "server_error",
         504: "server_error"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str | None = None, param: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = as_sentence(" ".join(str(message).split()))  # one line, in the house voice
        self.code = code
        self.param = param
        self.headers = headers or {}

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": TYPES.get(self.status, "invalid_request_error"),
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)
