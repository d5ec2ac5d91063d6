"""HTTP callback: post a JSON payload to a URL at given instants (a job's
``http`` callback, see :mod:`swh_like_scheduler.intake.jobs`).

Each request carries an ``Idempotency-Key`` header (seed 001): the job's
key and instant turned into a UUID, the same on every attempt of that
instant — a retry after a timeout, a redelivered message, a re-published
run. A receiver that remembers the keys it has handled does the work once.
The run's Celery task id goes in ``X-Swh-Task-Id``.

Before each delivery the URL's host is resolved once and every address
checked: a callback goes to public addresses only, unless the Celery
setting ``swh_scheduler_callback_allow`` (else
``SWH_SCHEDULER_CALLBACK_ALLOW``) allows more
(:mod:`swh_like_scheduler.plumbing.reach`); a refused one is *permfailed*. The
request then goes to a checked address itself, never to the name resolved
again (a name that answers a public address to the check and a private one
to the connection reaches nothing inside): the URL's host is replaced by
the address, the ``Host`` header and the TLS server name (SNI, which the
certificate is checked against) stay the URL's. The addresses are tried in
the resolver's order when one cannot be connected to. Redirects are not
followed (a 3xx is *permfailed*), and proxies from the environment are not
used: the worker connects itself.

A 2xx answer is a success (*eventful*). A network error, a timeout, 408,
429 or a 5xx raises (*failed*: retried under the type's retry policy).
Another 4xx gives *permfailed*: sending the same request again would get
the same answer.
"""

from __future__ import annotations

import json
import os
from typing import Any

import httpx
from celery import Task, shared_task

from swh_like_scheduler.plumbing.reach import (
    ALLOW_ENV,
    Address,
    Destination,
    Reach,
    Refused,
    resolve,
)
from swh_like_scheduler.worker import SchedulerTask

TASK_NAME = "swh_like_workers.webhook.post"
IDEMPOTENCY_HEADER = "Idempotency-Key"
TASK_ID_HEADER = "X-Swh-Task-Id"
USER_AGENT = "swh-like-scheduler-webhook/0.1"
TIMEOUT = httpx.Timeout(30.0, connect=10.0)
#: 4xx answers worth trying again later
RETRIED = frozenset({408, 425, 429})
#: most addresses of a name tried, in turn, when connecting fails
MAX_ADDRESSES = 4


def reach_of(task: Task) -> Reach:
    """Where this worker may post: public addresses, plus the Celery setting
    ``swh_scheduler_callback_allow``, else ``SWH_SCHEDULER_CALLBACK_ALLOW``
    (:mod:`swh_like_scheduler.plumbing.reach`)."""
    allowed = task.app.conf.get("swh_scheduler_callback_allow")
    if allowed is None:
        allowed = os.environ.get(ALLOW_ENV, "")
    return Reach.parse(allowed)


class CallbackFailed(RuntimeError):
    """The receiver could not be reached or answered with an error worth retrying."""


def input_problem(url: Any, payload: Any, method: Any, headers: Any) -> str | None:
    """Why these arguments cannot be sent, or None."""
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return f"url must be an http:// or https:// URL, not {url!r}"
    if not isinstance(payload, dict):
        return f"payload must be a JSON object, not {type(payload).__name__}"
    if method not in ("POST", "PUT"):
        return f"method must be POST or PUT, not {method!r}"
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        return "headers must map header names to strings"
    return None


def pinned_request(
    client: httpx.Client,
    method: str,
    url: str,
    destination: Destination,
    address: Address,
    body: bytes,
    headers: dict[str, str],
) -> httpx.Request:
    """The request to ``url`` sent to ``address`` (one ``destination`` was
    judged by): the URL's host replaced by the address, the ``Host``
    header the URL's host, and for https that host as the TLS server name."""
    host = destination.host
    target = httpx.URL(url).copy_with(host=str(address))
    sending = {name: value for name, value in headers.items() if name.lower() != "host"}
    sending["Host"] = host.authority
    extensions: dict[str, Any] = {}
    if host.scheme == "https" and host.name is not None:
        extensions["sni_hostname"] = host.name
    return client.build_request(
        method, target, content=body, headers=sending, extensions=extensions
    )


def deliver(
    method: str, url: str, destination: Destination, body: bytes, headers: dict[str, str]
) -> httpx.Response:
    """Send the request to the first of ``destination``'s addresses that
    accepts a connection (:func:`pinned_request`); a redirect is answered,
    not followed."""
    failed: httpx.TransportError | None = None
    with httpx.Client(timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client:
        for address in destination.addresses[:MAX_ADDRESSES]:
            request = pinned_request(client, method, url, destination, address, body, headers)
            try:
                return client.send(request)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failed = exc
    assert failed is not None  # a destination judged with a resolver has addresses
    raise failed


@shared_task(name=TASK_NAME, bind=True, base=SchedulerTask)
def post(
    self: Task,
    url: str,
    payload: dict[str, Any],
    idempotency_key: str,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Send ``payload`` as JSON to ``url``; ``{"status": "eventful", "code": 2xx}``
    on success."""
    headers = dict(headers or {})
    problem = input_problem(url, payload, method, headers)
    if problem is not None:
        return {"status": "permfailed", "error": problem}
    try:
        # the only resolution: the request goes to one of these addresses
        destination = reach_of(self).destination(url, resolver=resolve)
    except Refused as refused:
        return {"status": "permfailed", "error": f"{url}: {refused}"}
    headers.update(
        {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            IDEMPOTENCY_HEADER: idempotency_key,
            TASK_ID_HEADER: self.request.id or "",
        }
    )
    body = json.dumps(payload, separators=(",", ":")).encode()
    try:
        answer = deliver(method, url, destination, body, headers)
    except httpx.InvalidURL as exc:
        return {"status": "permfailed", "error": f"{url}: {exc}"}
    except httpx.HTTPError as exc:
        raise CallbackFailed(f"{method} {url}: {type(exc).__name__}: {exc}") from None
    code = answer.status_code
    if 200 <= code < 300:
        return {"status": "eventful", "code": code}
    if answer.is_redirect:
        where = answer.headers.get("Location", "")[:200]
        return {
            "status": "permfailed",
            "code": code,
            "error": f"HTTP {code}: redirects are not followed (Location: {where})",
        }
    if code >= 500 or code in RETRIED:
        raise CallbackFailed(f"{method} {url}: HTTP {code}")
    return {"status": "permfailed", "code": code, "error": f"HTTP {code}: {answer.text[:200]}"}


def register() -> dict[str, Any]:
    """Entry point of the ``swh.workers`` group (see :mod:`swh_like_workers.sleep`)."""
    return {
        "task_modules": [__name__],
        "task_types": [
            {
                "type": "webhook",
                "backend_name": TASK_NAME,
                "description": "POST a JSON payload to a URL at given instants",
                "max_queue_length": 100_000,
                "num_retries": 4,
                "retry_delay": "30 seconds",
                "retry_growth": 2.0,
                "retry_cap": "10 min",
                "max_expected_duration": "30 seconds",
                "max_allowed_duration": "2 min",
            }
        ],
    }
