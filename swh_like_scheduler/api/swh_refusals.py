"""The refusals of the doors every request passes (the token gate, the
body limit, the Host check, FastAPI's own 404 and 422) in the form
swh-scheduler's client reads, for the paths under ``/swh/``: an ASGI
middleware.

Those doors answer ``{"detail": ...}`` in JSON, which the reference's
client cannot read (it looks for the exception's ``type`` and fails with a
``KeyError``). Under ``/swh/``, such an answer becomes the reference's
``SchedulerException`` with the same message, in msgpack, its status and
headers (``Retry-After``, ``WWW-Authenticate``) kept; the client re-raises
it. Other paths pass untouched."""

from __future__ import annotations

import json
from typing import Any

from . import swh_codec

PREFIX = "/swh/"


def _message(body: bytes) -> str:
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        return body.decode("utf-8", "replace")[:500]
    if isinstance(detail, list):  # FastAPI's validation errors
        return "; ".join(
            f"{'.'.join(map(str, d.get('loc', ())))}: {d.get('msg')}"
            for d in detail
            if isinstance(d, dict)
        )
    return str(detail)


class SwhRefusals:
    """Under :data:`PREFIX`, a JSON error answer as the reference's exception."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not path.startswith(PREFIX) or not swh_codec.AVAILABLE:
            await self.app(scope, receive, send)
            return
        held: dict[str, Any] | None = None
        chunks: list[bytes] = []

        async def sending(message: dict[str, Any]) -> None:
            nonlocal held
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", ()))
                kind = headers.get(b"content-type", b"").split(b";")[0].strip()
                if int(message["status"]) >= 400 and kind == b"application/json":
                    held = message
                    return
                await send(message)
                return
            if held is None:
                await send(message)
                return
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            refusal = swh_codec.RemoteError("SchedulerException", _message(b"".join(chunks)))
            body = swh_codec.dumps(refusal)
            kept = [
                (k, v)
                for k, v in held.get("headers", ())
                if k.lower() not in (b"content-type", b"content-length")
            ]
            await send(
                {
                    "type": "http.response.start",
                    "status": held["status"],
                    "headers": [
                        (b"content-type", b"application/x-msgpack"),
                        (b"content-length", str(len(body)).encode()),
                        *kept,
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, sending)
