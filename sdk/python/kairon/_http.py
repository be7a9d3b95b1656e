"""TLS, timeouts, the User-Agent, logging and retries shared by both clients.

Every request goes through `RetryTransport`: a connection that could not be made (nothing was
sent) is retried for every method; a GET is also retried when the connection broke mid-way or
the server answered 429, 502 or 503. Anything else, a create above all, is sent once. Retries back
off exponentially with jitter. Failures to reach the server raise `KaironConnectionError`, a read
that timed out `KaironTimeoutError`. Requests are logged at DEBUG and retries at WARNING on the
`kairon` logger.
"""

from __future__ import annotations

import logging
import os
import random
import ssl
import time

import httpx

from ._version import __version__
from .errors import KaironConnectionError, KaironTimeoutError

log = logging.getLogger("kairon")

#: How long a request may wait for its answer, in seconds (`KAIRON_READ_TIMEOUT`, 660 by default):
#: long polls (`.../wait`) answer within their own timeout, and a command's run waits for the
#: command (`exec_timeout`).
READ_TIMEOUT = float(os.environ.get("KAIRON_READ_TIMEOUT") or 660.0)
TIMEOUT = httpx.Timeout(30.0, read=READ_TIMEOUT)
#: A command's timeout when its run gives none, buffered or streamed: the server's
#: `--exec-default-timeout` default.
EXEC_DEFAULT_TIMEOUT = 300
#: How much longer than its command a run waits for the answer (the server's own work).
EXEC_READ_MARGIN = 30.0


def exec_timeout(command_timeout: int | None) -> httpx.Timeout:
    """The timeout of a request that runs a command for up to `command_timeout` seconds (the
    server's default when None): it never gives up before the command could have ended."""
    seconds = command_timeout if command_timeout is not None else EXEC_DEFAULT_TIMEOUT
    return httpx.Timeout(30.0, read=max(READ_TIMEOUT, seconds + EXEC_READ_MARGIN))

USER_AGENT = f"kairon-sdk-python/{__version__}"

#: Retries after the first attempt (so up to 5 attempts), unless a client is given others.
DEFAULT_RETRIES = 4
_BACKOFF_BASE = 0.25
_BACKOFF_CAP = 8.0
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS"})
_RETRY_STATUSES = frozenset({429, 502, 503})


def ssl_context(ca_file: str | None, ca_data: str | None = None) -> ssl.SSLContext:
    """Verifies the server against `ca_data` (PEM), else `ca_file`, else `KAIRON_CA_FILE`, else
    `SSL_CERT_FILE`, else the system's CAs. (`kairon up` keeps its CA in `<data dir>/tls/ca.crt`
    and writes it into its kubeconfig.)"""
    if ca_data:
        return ssl.create_default_context(cadata=ca_data)
    ca = ca_file or os.environ.get("KAIRON_CA_FILE") or os.environ.get("SSL_CERT_FILE")
    return ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()


def backoff(attempt: int) -> float:
    """Seconds to sleep before retry `attempt` (0-based): exponential, capped, with jitter."""
    ceiling = min(_BACKOFF_CAP, _BACKOFF_BASE * (2.0**attempt))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _tls_refused(e: BaseException) -> bool:
    # A certificate the client does not trust will not become trusted by trying again.
    seen: BaseException | None = e
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: A request extension: the answer's body is handed on as it arrives instead of read whole
#: (what makes a retry of a broken read possible), for streams such as a followed log.
STREAMED = "kairon.streamed"


class RetryTransport(httpx.BaseTransport):
    """An `httpx` transport that retries what is safe to retry (see the module's docstring)."""

    def __init__(self, verify: ssl.SSLContext, retries: int = DEFAULT_RETRIES) -> None:
        self._inner = httpx.HTTPTransport(verify=verify)
        self.retries = max(0, retries)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        idempotent = request.method in _IDEMPOTENT
        attempt = 0
        while True:
            started = time.monotonic()
            try:
                resp = self._inner.handle_request(request)
                if request.extensions.get(STREAMED) and not (idempotent and resp.status_code in _RETRY_STATUSES
                                                             and attempt < self.retries):
                    # Read by the caller as it arrives (a followed log), not here.
                    return resp
                try:
                    raw = b"".join(resp.iter_raw())
                finally:
                    resp.close()
            except httpx.TimeoutException as e:
                if isinstance(e, httpx.ConnectTimeout):
                    err: httpx.TransportError = e
                    sent = False
                else:
                    raise KaironTimeoutError(
                        f"{request.method} {request.url}: no answer within the timeout ({e or type(e).__name__})"
                    ) from e
            except httpx.ConnectError as e:
                if _tls_refused(e):
                    raise KaironConnectionError(
                        f"{request.method} {request.url}: the server's certificate is not trusted ({e}); "
                        "pass ca_file or set KAIRON_CA_FILE to the CA `kairon up` printed"
                    ) from e
                err, sent = e, False
            except httpx.TransportError as e:
                # The connection broke after the request may have reached the server.
                err, sent = e, True
            else:
                log.debug("%s %s -> %d (%.0f ms)", request.method, request.url, resp.status_code,
                          (time.monotonic() - started) * 1000)
                if idempotent and resp.status_code in _RETRY_STATUSES and attempt < self.retries:
                    delay = max(backoff(attempt), _retry_after(resp.headers.get("retry-after")))
                    log.warning("%s %s answered %d; retrying in %.2f s (%d of %d)", request.method,
                                request.url, resp.status_code, delay, attempt + 1, self.retries)
                    time.sleep(delay)
                    attempt += 1
                    continue
                return httpx.Response(resp.status_code, headers=resp.headers, stream=httpx.ByteStream(raw),
                                      extensions=resp.extensions)
            if (sent and not idempotent) or attempt >= self.retries:
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise KaironConnectionError(
                    f"{request.method} {request.url}: the server is unreachable{tries}: {err or type(err).__name__}"
                ) from err
            delay = backoff(attempt)
            log.warning("%s %s failed (%s); retrying in %.2f s (%d of %d)", request.method, request.url,
                        err or type(err).__name__, delay, attempt + 1, self.retries)
            time.sleep(delay)
            attempt += 1

    def close(self) -> None:
        self._inner.close()


def _retry_after(value: str | None) -> float:
    try:
        return min(_BACKOFF_CAP, max(0.0, float(value))) if value else 0.0
    except ValueError:
        return 0.0


def http_client(base_url: str, headers: dict[str, str], verify: ssl.SSLContext, retries: int) -> httpx.Client:
    """The `httpx.Client` both clients send through."""
    return httpx.Client(
        base_url=base_url,
        headers={"User-Agent": USER_AGENT, **headers},
        transport=RetryTransport(verify, retries),
        timeout=TIMEOUT,
    )
