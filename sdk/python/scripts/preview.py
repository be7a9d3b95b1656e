"""Driven by tests/tests/sdk.rs against `kairon up`: preview links (`sb.preview_url`) from the
Python SDK, fetched as a client with no header would, over TLS checked against kairon up's CA
for the link's own host name (`<capability>-<port>.localhost`, which this resolver does not know:
the connection goes to the server's address with the link's name as SNI and Host). A page comes
back with `Referrer-Policy: no-referrer`; the link on another port, after revoke, after its ttl
and after its sandbox is deleted is refused; a preview host never answers an API route. Prints
`ok <step>` for each."""

from __future__ import annotations

import os
import socket
import ssl
import time
from urllib.parse import urlsplit

from kairon import Client, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
ca = ssl.create_default_context(cafile=os.environ["KAIRON_CA_FILE"])
server = urlsplit(url)
kube = Client(url, token, namespace="previews-py")
ui = UIClient(url, token, namespace="previews-py")


def fetch(link: str, path: str = "/", *, checked: bool = True) -> tuple[int, dict[str, str], bytes]:
    """GET `path` of `link` with no header but Host: status, headers (lowercase), body. With
    `checked`, the certificate must be the CA's, for the link's name."""
    host = urlsplit(link).netloc
    raw = socket.create_connection((server.hostname, server.port), timeout=30)
    context = ca if checked else ssl._create_unverified_context()
    with context.wrap_socket(raw, server_hostname=host.split(":")[0]) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        plain = b""
        while body:
            size, _, rest = body.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            plain, body = plain + rest[:n], rest[n + 2:]
        body = plain
    return int(lines[0].split()[1]), headers, body


def other_port(link: str, port: int) -> str:
    """The same capability naming another port."""
    parts = urlsplit(link)
    label, rest = parts.netloc.split(".", 1)
    capability = label.rsplit("-", 1)[0]
    return f"{parts.scheme}://{capability}-{port}.{rest}/"


with Sandbox.create(kube, ui, template="python", ready_timeout=900) as sb:
    sb.run("mkdir -p /srv/site", check=True)
    sb.files.write("/srv/site/index.html", "<!doctype html><title>from python</title><p>served by the sandbox</p>")
    sb.start("cd /srv/site && exec python3 -m http.server 8000")
    sb.run("for i in $(seq 100); do python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8000))' 2>/dev/null && exit 0; sleep 0.1; done; exit 1")

    link = sb.preview(8000, ttl=600)
    assert link.url and link.port == 8000 and link.created_by, link
    status, headers, body = fetch(link.url)
    assert status == 200 and b"served by the sandbox" in body, (status, body)
    assert headers.get("referrer-policy") == "no-referrer", headers
    assert "content-security-policy" not in headers, "a preview's page runs its own script"
    listed = sb.previews()
    assert [p.id for p in listed] == [link.id] and not listed[0].url, listed
    print("ok page", flush=True)

    # The link opens its own port only; the API's routes are never served on its host.
    assert fetch(other_port(link.url, 8001))[0] == 404
    status, _headers, body = fetch(link.url, "/api/v1/machines/previews-py")
    assert status == 404 and b"served by the sandbox" not in body and b"apiVersion" not in body, (status, body)
    status, _headers, body = fetch(url.replace("127.0.0.1", "api.localhost"), "/api/v1/whoami", checked=False)
    assert status == 404 and b"preview link" in body, (status, body)
    print("ok port", flush=True)

    sb.revoke_preview(link)
    assert fetch(link.url)[0] == 404 and sb.previews() == []
    short = sb.preview_url(8000, ttl=2)
    assert fetch(short)[0] == 200
    time.sleep(3)
    assert fetch(short)[0] == 404
    print("ok revoked", flush=True)

    live = sb.preview_url(8000, ttl=600)
    assert fetch(live)[0] == 200
print("ok sandbox", flush=True)

assert fetch(live)[0] == 404, "the link died with its sandbox"
print("ok deleted", flush=True)
