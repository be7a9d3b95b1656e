"""TLS and timeouts shared by both clients."""

from __future__ import annotations

import os
import ssl

import httpx

# Long polls (`.../wait`) answer within their own timeout; the read timeout leaves room for it.
TIMEOUT = httpx.Timeout(30.0, read=660.0)


def ssl_context(ca_file: str | None) -> ssl.SSLContext:
    """Verifies the server against `ca_file`, else `KAIRON_CA_FILE`, else `SSL_CERT_FILE`, else
    the system's CAs. (`kairon up` keeps its CA in `<data dir>/tls/ca.crt`.)"""
    ca = ca_file or os.environ.get("KAIRON_CA_FILE") or os.environ.get("SSL_CERT_FILE")
    return ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
