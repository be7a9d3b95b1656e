"""`Kairon()` and its configuration, connect/list/info, waits that give up on a refusal at once,
connection errors, retries and the User-Agent. The server is the real `kairon up` of conftest.py;
the retry tests count requests on a small HTTP server of their own on loopback."""

from __future__ import annotations

import base64
import builtins
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

import kairon
from kairon import (
    Client,
    ConfigError,
    GatewayTimeoutError,
    GuestAgentDisabledError,
    Kairon,
    KaironConnectionError,
    KaironError,
    KaironTimeoutError,
    NotFoundError,
    Sandbox,
    ServerError,
    UIClient,
    WakeTimeoutError,
)

from conftest import NS, _env

ENV = ("KAIRON_URL", "KAIRON_TOKEN", "KAIRON_NAMESPACE", "KAIRON_CA_FILE", "KUBECONFIG")


@pytest.fixture
def bare_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, str]]:
    """No KAIRON_* variables, no KUBECONFIG and an empty HOME; yields the server's settings."""
    real = {"url": _env("KAIRON_URL"), "token": _env("KAIRON_TOKEN"), "ca": _env("KAIRON_CA_FILE")}
    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield real


def _kubeconfig(path: Path, url: str, token: str, ca_file: str, namespace: str) -> Path:
    ca = base64.b64encode(Path(ca_file).read_bytes()).decode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- name: other
  cluster:
    server: https://127.0.0.1:1
- name: kairon
  cluster:
    server: {url}
    certificate-authority-data: {ca}
users:
- name: kairon-admin
  user:
    token: {token}
contexts:
- name: kairon
  context:
    cluster: kairon
    user: kairon-admin
    namespace: {namespace}   # the context's namespace
current-context: kairon
""")
    return path


def _works(k: Kairon) -> None:
    # Both clients reach the server, in the configured namespace.
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    with pytest.raises(NotFoundError) as e:
        k.ui.get_machine(missing)
    assert f"{NS}/{missing}" in e.value.message or missing in e.value.message
    assert isinstance(k.kube.list_machines(), list)
    assert isinstance(k.sandbox.list(), list)


def test_kairon_from_arguments(bare_env: dict[str, str]) -> None:
    with Kairon(bare_env["url"], bare_env["token"], namespace=NS, ca_file=bare_env["ca"]) as k:
        assert (k.url, k.namespace, k.config.source) == (bare_env["url"].rstrip("/"), NS, "arguments")
        _works(k)


def test_kairon_from_the_environment(bare_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIRON_URL", bare_env["url"])
    monkeypatch.setenv("KAIRON_TOKEN", bare_env["token"])
    monkeypatch.setenv("KAIRON_CA_FILE", bare_env["ca"])
    monkeypatch.setenv("KAIRON_NAMESPACE", NS)
    with Kairon() as k:
        assert (k.namespace, k.config.source) == (NS, "environment")
        _works(k)
    # An argument wins over the environment.
    assert Kairon(namespace="elsewhere").namespace == "elsewhere"


def test_kairon_from_a_kubeconfig(bare_env: dict[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # $KUBECONFIG; its CA is the only one given (no KAIRON_CA_FILE).
    kc = _kubeconfig(tmp_path / "kc" / "config", bare_env["url"], bare_env["token"], bare_env["ca"], NS)
    monkeypatch.setenv("KUBECONFIG", str(kc))
    with Kairon() as k:
        assert (k.url, k.namespace, k.config.source) == (bare_env["url"].rstrip("/"), NS, str(kc))
        assert k.config.ca_data and "BEGIN CERTIFICATE" in k.config.ca_data
        _works(k)
    monkeypatch.delenv("KUBECONFIG")
    # The file `kairon up` writes by default, under $HOME.
    home = tmp_path / "home"
    _kubeconfig(home / ".local/state/kairon/kubeconfig", bare_env["url"], bare_env["token"], bare_env["ca"], NS)
    with Kairon() as k:
        assert k.config.source.endswith(".local/state/kairon/kubeconfig")
        _works(k)
    # A token from the environment with the kubeconfig's server and CA.
    monkeypatch.setenv("KAIRON_TOKEN", "not-a-token")
    with Kairon() as k:
        with pytest.raises(kairon.UnauthorizedError):
            k.ui.get_machine("x")


def test_kairon_without_a_server_says_what_to_set(bare_env: dict[str, str]) -> None:
    with pytest.raises(ConfigError) as e:
        Kairon()
    assert "KAIRON_URL" in str(e.value) and "kubeconfig" in str(e.value)
    with pytest.raises(ConfigError):
        Kairon(kubeconfig="/nonexistent/kubeconfig")


def test_one_rule_says_what_boots_a_template_or_a_vm_image() -> None:
    assert kairon.machine_source(template="python") == {"sandbox": {"templateName": "python"}}
    vm = "/var/lib/fluxvm/images/kairon-hw.qcow2"
    assert kairon.machine_source(image=vm) == {"image": {"path": vm}}
    refusals = {
        ("python", None): "pass template='python'",
        ("ghcr.io/org/app:1", None): "k.templates.build('NAME', image='ghcr.io/org/app:1'",
        ("images/vm.qcow2", None): "is not a path on the node",
        (vm, "python"): "not both",
        (None, None): "pass template=",
        (None, "ghcr.io/org/app:1"): "is not a template name",
    }
    for (image, template), says in refusals.items():
        with pytest.raises(ValueError) as e:
            kairon.machine_source(image=image, template=template)
        assert says in str(e.value), (image, template, str(e.value))
    # Refused before any request: this client's server does not exist.
    nowhere = Client("https://127.0.0.1:9", "token", namespace=NS)
    with pytest.raises(ValueError):
        Sandbox.create(nowhere, UIClient("https://127.0.0.1:9", "token", namespace=NS), image="python")


def test_network_is_the_nodes_policy_none_or_an_allowlist() -> None:
    assert kairon.network_spec(None) is None and kairon.network_spec("internet") is None
    assert kairon.network_spec("none") == {"egress": {"mode": "None"}}
    assert kairon.network_spec(["pypi.org", ".pythonhosted.org"]) == {
        "egress": {"mode": "Allowlist", "allow": ["pypi.org", ".pythonhosted.org"]}}
    for bad, says in [("offline", "'none'"), ("pypi.org", "['pypi.org']"), ([], "network='none'")]:
        with pytest.raises(ValueError) as e:
            kairon.network_spec(bad)
        assert says in str(e.value), (bad, str(e.value))


def test_secrets_name_a_secret_and_its_key() -> None:
    assert kairon.secret_env({"OPENAI_API_KEY": "openai/api-key"}) == {
        "OPENAI_API_KEY": {"name": "openai", "key": "api-key"}}
    assert kairon.secret_env(None) == {}
    for bad in ["openai", "openai/", "/key", "a/b/c"]:
        with pytest.raises(ValueError) as e:
            kairon.secret_env({"K": bad})
        assert "SECRET/KEY" in str(e.value), bad


def test_connect_list_and_info(kube: Client, ui: UIClient, template: str) -> None:
    k = Kairon(kube.url, _env("KAIRON_TOKEN"), namespace=NS)
    suite = uuid.uuid4().hex[:8]
    sb = k.sandbox.create(template=template, labels={"suite": suite})
    try:
        info = sb.info()
        assert info.metadata.name == sb.name and str(info.status.phase) == "Running"
        assert [s.name for s in k.sandbox.list(labels={"suite": suite})] == [sb.name]
        assert [s.name for s in Sandbox.list(kube, ui, labels={"suite": f"{suite}-none"})] == []
        same = Sandbox.connect(kube, ui, sb.name, ready_timeout=60)
        assert (same.name, same.namespace, same.claim) == (sb.name, NS, None)
        assert same.run("echo attached", check=True).stdout == "attached\n"
        with pytest.raises(NotFoundError):
            k.sandbox.connect(f"missing-{suite}")
        # A connected sandbox closes as any other: the Machine is deleted.
        same.close()
        with pytest.raises(NotFoundError):
            sb.info()
    finally:
        sb.close()


def _eventually(what: str, check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _gone(get: Callable[[], object]) -> Callable[[], bool]:
    def check() -> bool:
        try:
            get()
            return False
        except NotFoundError:
            return True
    return check


def test_claim_from_a_pool_without_guest_agent_refuses_at_once(kube: Client, ui: UIClient, template: str) -> None:
    pool = f"noagent-{uuid.uuid4().hex[:6]}"
    kube.create_pool({
        "metadata": {"name": pool},
        "spec": {"replicas": 1, "warmupSeconds": 1,
                 "template": {"spec": {"sandbox": {"templateName": template}}}},
    })
    try:
        _eventually(f"pool {pool} to have a warm member",
                    lambda: (kube.get_pool(pool).get("status") or {}).get("warm", 0) >= 1)
        started = time.monotonic()
        with pytest.raises(GuestAgentDisabledError) as e:
            Sandbox.claim_from(kube, ui, pool)
        took = time.monotonic() - started
        assert took < 30, f"claim_from took {took:.1f} s to give up"
        assert "spec.guestAgent" in e.value.message
        # The claim it made is released.
        claims = kube._send("GET", kube._path("machineclaims", None)).get("items") or []
        assert not [c for c in claims if c["spec"].get("poolName") == pool and
                    not c["metadata"].get("deletionTimestamp")]
    finally:
        kube.delete_pool(pool)
        _eventually(f"pool {pool} to be gone", _gone(lambda: kube.get_pool(pool)))


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def test_an_unreachable_server_is_a_connection_error_after_retries() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    kube, ui = Client(url, "t", retries=2), UIClient(url, "t", retries=2)
    for call in (lambda: kube.get_machine("x"), lambda: ui.get_machine("x"),
                 lambda: kube.create_machine({"metadata": {"name": "x"}})):
        started = time.monotonic()
        with pytest.raises(KaironConnectionError) as e:
            call()
        assert "unreachable after 3 attempts" in str(e.value), str(e.value)
        assert isinstance(e.value, builtins.ConnectionError) and isinstance(e.value, KaironError)
        assert time.monotonic() - started < 10


class _Recorder:
    """A loopback HTTP server that answers every request with `status` (or closes the
    connection when `status` is 0) and records method, path and User-Agent."""

    def __init__(self, status: int) -> None:
        self.seen: list[tuple[str, str, str]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                if n:
                    self.rfile.read(n)
                recorder.seen.append((self.command, self.path, self.headers.get("User-Agent") or ""))
                if status == 0:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                body = b'{"reason": "ServiceUnavailable", "message": "busy"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def methods(self) -> list[str]:
        return [m for m, _, _ in self.seen]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def busy() -> Iterator[_Recorder]:
    r = _Recorder(503)
    yield r
    r.close()


@pytest.fixture
def hangs_up() -> Iterator[_Recorder]:
    r = _Recorder(0)
    yield r
    r.close()


def test_a_create_is_sent_once_and_a_get_is_retried(busy: _Recorder) -> None:
    kube, ui = Client(busy.url, "t", retries=2), UIClient(busy.url, "t", retries=2)
    with pytest.raises(ServerError) as e:
        kube.create_machine({"metadata": {"name": "x"}})
    assert e.value.status == 503 and e.value.transient
    assert busy.methods() == ["POST"]
    with pytest.raises(ServerError):
        ui.exec("x", ["true"])
    assert busy.methods() == ["POST", "POST"]
    busy.seen.clear()
    with pytest.raises(ServerError):
        kube.get_machine("x")
    with pytest.raises(ServerError):
        ui.get_machine("x")
    assert busy.methods() == ["GET"] * 6


def test_a_create_whose_connection_broke_is_not_sent_again(hangs_up: _Recorder) -> None:
    kube = Client(hangs_up.url, "t", retries=2)
    with pytest.raises(KaironConnectionError):
        kube.create_machine({"metadata": {"name": "x"}})
    assert hangs_up.methods() == ["POST"]
    with pytest.raises(KaironConnectionError):
        kube.get_machine("x")
    assert hangs_up.methods() == ["POST", "GET", "GET", "GET"]


def test_user_agent(busy: _Recorder) -> None:
    for c in (Client(busy.url, "t", retries=0), UIClient(busy.url, "t", retries=0)):
        with pytest.raises(ServerError):
            c.get_machine("x")
    want = f"kairon-sdk-python/{kairon.__version__}"
    assert [ua for _, _, ua in busy.seen] == [want, want]


def test_errors_do_not_shadow_builtins() -> None:
    names: dict[str, object] = {}
    exec("from kairon import *", names)
    assert "TimeoutError" not in names and "ConnectionError" not in names
    assert kairon.TimeoutError is GatewayTimeoutError
    assert issubclass(GatewayTimeoutError, KaironTimeoutError) and issubclass(WakeTimeoutError, GatewayTimeoutError)
    assert issubclass(KaironTimeoutError, builtins.TimeoutError)
    assert issubclass(KaironConnectionError, builtins.ConnectionError)
    e = GatewayTimeoutError(504, "Timeout", "waited")
    assert str(e) == "Timeout (504): waited" and e.transient
    assert not GuestAgentDisabledError(409, "GuestAgentDisabled", "no agent").transient
    assert kairon.ConflictError(409, "NotScheduled", "soon").transient


def test_a_quota_refusal_is_its_own_forbidden_error() -> None:
    from kairon.errors import error_from

    e = error_from(403, b'{"reason": "QuotaExceeded", "message": "exceeded quota: limits, requested: machines=1"}')
    assert isinstance(e, kairon.QuotaExceededError) and isinstance(e, kairon.ForbiddenError)
    assert e.reason is kairon.Reason.QUOTAEXCEEDED and not e.transient and "machines=1" in e.message
    assert type(error_from(403, b'{"reason": "Forbidden", "message": "no"}')) is kairon.ForbiddenError


def test_version_is_the_distributions() -> None:
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert f'name = "kairon-sdk"\nversion = "{kairon.__version__}"' in pyproject


def test_an_archive_from_the_guest_cannot_write_outside_its_destination(tmp_path: Path) -> None:
    import io
    import tarfile

    from kairon.files import _extract

    for name, kind, link in [("../evil.txt", tarfile.REGTYPE, ""), ("/abs.txt", tarfile.REGTYPE, ""),
                             ("out", tarfile.SYMTYPE, "/etc"), ("up", tarfile.SYMTYPE, "../..")]:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            tar.addfile(info, io.BytesIO(b""))
        buf.seek(0)
        dest = tmp_path / f"dest-{len(list(tmp_path.iterdir()))}"
        with tarfile.open(fileobj=buf, mode="r") as tar, pytest.raises((ValueError, tarfile.TarError)):
            _extract(tar, str(dest))
    assert not (tmp_path / "evil.txt").exists() and not Path("/abs.txt").exists()


def test_every_public_name_has_a_docstring() -> None:
    import inspect

    missing = []
    for name in kairon.__all__:
        obj = getattr(kairon, name)
        # Only what this package defines (the generated client's models are documented by the spec).
        if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not obj.__module__.startswith("kairon."):
            continue
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        if not inspect.isclass(obj) or issubclass(obj, BaseException):
            continue
        for attr, v in vars(obj).items():
            f = v.fget if isinstance(v, property) else getattr(v, "__func__", v)
            if not attr.startswith("_") and (callable(f) or isinstance(v, property)) and not (f.__doc__ or "").strip():
                missing.append(f"{name}.{attr}")
    assert not missing, f"public names without a docstring: {missing}"
