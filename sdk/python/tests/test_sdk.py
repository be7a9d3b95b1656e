from __future__ import annotations

import datetime
import os
import pathlib
import queue
import threading
import time
import uuid
from collections.abc import Callable

import httpx
import pytest

from kairon import (
    BadRequestError,
    Client,
    CommandError,
    ConflictError,
    GuestAgentDisabledError,
    KaironError,
    KaironTimeoutError,
    MachineSuspendedError,
    NotFoundError,
    Output,
    PayloadTooLargeError,
    PowerStateUnsupportedError,
    Reason,
    Sandbox,
    UIClient,
    UnauthorizedError,
    WatchEvent,
)
from kairon._http import ssl_context


def test_run_returns_output_and_exit_code(sandbox: Sandbox) -> None:
    r = sandbox.run("echo out; echo err >&2; exit 3")
    assert (r.stdout, r.stderr, r.exit_code) == ("out\n", "err\n", 3)
    assert sandbox.run(["echo", "a b"]).stdout == "a b\n"
    assert sandbox.run("cat", stdin="fed").stdout == "fed"


def test_run_check_raises_with_the_output(sandbox: Sandbox) -> None:
    with pytest.raises(CommandError) as e:
        sandbox.run("echo boom >&2; exit 7", check=True)
    assert e.value.exit_code == 7
    assert e.value.stderr == "boom\n"
    assert "exited with 7" in str(e.value) and "boom" in str(e.value)


def test_a_run_waits_as_long_as_its_command_may_whatever_the_base_read_timeout(
    monkeypatch: pytest.MonkeyPatch, kube: Client, sandbox: Sandbox
) -> None:
    import kairon._http
    import kairon.client

    short = httpx.Timeout(30.0, read=2.0)
    monkeypatch.setattr(kairon._http, "READ_TIMEOUT", 2.0)
    monkeypatch.setattr(kairon._http, "TIMEOUT", short)
    monkeypatch.setattr(kairon.client, "TIMEOUT", short)
    quick = UIClient(os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"], namespace=sandbox.namespace)
    sb = Sandbox.connect(kube, quick, sandbox.name, namespace=sandbox.namespace)
    r = sb.run("sleep 5; echo ok", timeout=10)
    assert (r.stdout, r.exit_code, r.timed_out) == ("ok\n", 0, False)
    # The 2 s base read timeout is in force elsewhere: a 5 s long poll gives up.
    p = quick.start_process(sandbox.name, ["sleep", "30"], namespace=sandbox.namespace)
    with pytest.raises(KaironTimeoutError):
        quick.wait_process(sandbox.name, p.id, timeout=5, namespace=sandbox.namespace)
    quick.kill_process(sandbox.name, p.id, namespace=sandbox.namespace)


def _recorded_end(sb: Sandbox) -> datetime.datetime:
    deadline = time.monotonic() + 30
    while (at := sb.expires_at) is None:
        assert time.monotonic() < deadline, "no end recorded"
        time.sleep(0.2)
    return at


def test_a_sandbox_ends_after_300_s_unless_told_and_set_timeout_moves_its_end(
    kube: Client, ui: UIClient, template: str
) -> None:
    now = datetime.datetime.now(datetime.timezone.utc)
    with Sandbox.create(kube, ui, template=template) as sb:
        ends = _recorded_end(sb)
        assert abs((ends - now).total_seconds() - 300) < 15, ends
    with Sandbox.create(kube, ui, template=template, timeout=None) as sb:
        assert sb.expires_at is None, "timeout=None: no deadline"
        now = datetime.datetime.now(datetime.timezone.utc)
        moved = sb.set_timeout(1200)
        assert abs((moved - now).total_seconds() - 1200) < 5, moved
        assert abs((_recorded_end(sb) - moved).total_seconds()) < 1.5
        sb.set_timeout(2)
        deadline = time.monotonic() + 60
        while sb.name in [m.name for m in Sandbox.list(kube, ui)]:
            assert time.monotonic() < deadline, "the sandbox outlived its new end"
            time.sleep(0.5)


def test_files_round_trip_bytes(sandbox: Sandbox) -> None:
    data = bytes(range(256)) * 64
    sandbox.write_file("/tmp/blob.bin", data)
    assert sandbox.read_file("/tmp/blob.bin") == data
    assert sandbox.run("wc -c < /tmp/blob.bin", check=True).stdout.strip() == str(len(data))
    sandbox.write_file("/tmp/run.sh", "#!/bin/sh\necho ran\n", mode="755")
    assert sandbox.run("/tmp/run.sh", check=True).stdout == "ran\n"


def test_missing_file_is_a_typed_error(sandbox: Sandbox) -> None:
    with pytest.raises(NotFoundError) as e:
        sandbox.read_file("/no/such/file")
    assert e.value.status == 404 and e.value.reason == "NotFound" and e.value.message


def test_relative_path_is_a_bad_request(sandbox: Sandbox) -> None:
    with pytest.raises(BadRequestError) as e:
        sandbox.write_file("relative.txt", b"x")
    assert e.value.status == 400 and "absolute" in e.value.message


def test_files_list_check_remove_and_make_dirs(sandbox: Sandbox) -> None:
    root = f"/tmp/files-{uuid.uuid4().hex[:6]}"
    files = sandbox.files
    files.write_many({f"{root}/a/x.txt": "x", f"{root}/b/y.bin": b"\x00\x01", f"{root}/top.txt": "top"})
    listed = {e.name: e for e in files.list(root)}
    assert sorted(listed) == ["a", "b", "top.txt"]
    assert listed["a"].is_dir and not listed["top.txt"].is_dir and listed["top.txt"].size == 3
    assert files.read_text(f"{root}/a/x.txt") == "x" and files.read(f"{root}/b/y.bin") == b"\x00\x01"
    assert files.exists(f"{root}/a/x.txt") and files.exists(f"{root}/a") and files.exists("/")
    assert not files.exists(f"{root}/nope") and not files.exists(f"{root}/no-dir/x")
    files.remove(f"{root}/a/x.txt")
    assert not files.exists(f"{root}/a/x.txt")
    with pytest.raises(NotFoundError):
        files.remove(f"{root}/a/x.txt")
    with pytest.raises(NotFoundError):
        files.list(f"{root}/no-dir")
    files.make_dir(f"{root}/deep/er/est", f"{root}/other")
    assert files.exists(f"{root}/deep/er/est") and files.exists(f"{root}/other")
    with pytest.raises(ValueError):
        files.make_dir("relative")
    # A tree, several levels down; info with its modified time; rename; a recursive remove.
    assert sorted(e.name for e in files.list(root, depth=3)) == [
        "a", "b", "b/y.bin", "deep", "deep/er", "deep/er/est", "other", "top.txt"]
    before = files.info(f"{root}/top.txt")
    assert (before.name, before.size, before.is_dir) == ("top.txt", 3, False) and before.modified
    time.sleep(1.1)
    files.write(f"{root}/top.txt", "changed")
    after = files.info(f"{root}/top.txt")
    assert after.size == 7 and after.modified > before.modified, (before.modified, after.modified)
    assert files.info(root).is_dir
    with pytest.raises(NotFoundError):
        files.info(f"{root}/nope")
    files.rename(f"{root}/top.txt", f"{root}/deep/moved.txt")
    assert files.read_text(f"{root}/deep/moved.txt") == "changed" and not files.exists(f"{root}/top.txt")
    with pytest.raises(NotFoundError):
        files.rename(f"{root}/top.txt", f"{root}/again.txt")
    with pytest.raises(ConflictError, match="not empty"):
        files.remove(f"{root}/deep")
    files.remove(f"{root}/other")  # an empty directory needs no recursive
    files.remove(root, recursive=True)
    assert not files.exists(root)


def test_a_file_over_the_upload_limit_is_a_typed_error_that_says_the_limit(sandbox: Sandbox) -> None:
    # tests/tests/sdk.rs runs kairon up with --max-upload-bytes 120MiB.
    with pytest.raises(PayloadTooLargeError) as e:
        sandbox.files.write("/tmp/huge.bin", b"\0" * (120 * 1024 * 1024 + 1))
    assert e.value.status == 413 and "120 MiB" in e.value.message, e.value.message
    assert not sandbox.files.exists("/tmp/huge.bin")


def test_files_stream_both_ways_and_directories_copy_as_tar(sandbox: Sandbox, tmp_path: pathlib.Path) -> None:
    files = sandbox.files
    # From an iterable and from a file object, back as chunks and into a local file.
    files.write("/tmp/streamed/parts.txt", (f"part {i}\n".encode() for i in range(1000)))
    want = b"".join(f"part {i}\n".encode() for i in range(1000))
    assert b"".join(files.read_stream("/tmp/streamed/parts.txt", chunk_size=1024)) == want
    local = tmp_path / "parts.txt"
    assert files.download("/tmp/streamed/parts.txt", local) == len(want) and local.read_bytes() == want
    with open(local, "rb") as f:
        files.write("/tmp/streamed/again.txt", f, mode="600")
    files.upload(local, "/tmp/streamed/uploaded.txt")
    assert files.read("/tmp/streamed/again.txt") == want == files.read("/tmp/streamed/uploaded.txt")
    modes = {e.name: e.mode for e in files.list("/tmp/streamed")}
    assert modes["again.txt"] == 0o600, modes
    with pytest.raises(NotFoundError):
        files.download("/tmp/streamed/none.txt", tmp_path / "none.txt")
    assert not (tmp_path / "none.txt").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["parts.txt"]

    # A directory up as one tar, and down again.
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("x = 1\n")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    files.upload_dir(src, "/tmp/tree")
    assert sandbox.run("/tmp/tree/run.sh", check=True).stdout == "ran\n"
    sandbox.run("echo made-in-guest > /tmp/tree/pkg/new.txt", check=True)
    dest = tmp_path / "back"
    files.download_dir("/tmp/tree", dest)
    assert (dest / "pkg" / "mod.py").read_text() == "x = 1\n"
    assert (dest / "pkg" / "new.txt").read_text() == "made-in-guest\n"
    assert os.access(dest / "run.sh", os.X_OK)
    assert not [e.name for e in files.list("/tmp") if e.name.startswith(".kairon-")], "no archive left behind"


def test_background_process_wait_logs_kill(sandbox: Sandbox) -> None:
    p = sandbox.start("echo started; echo warn >&2; exit 4")
    assert p.wait() == 4
    assert p.logs() == "started\n"
    assert p.logs("stderr") == "warn\n"
    long = sandbox.start(["sleep", "300"])
    assert long.running()
    long.kill()
    long.wait(timeout=60)
    assert not long.running()


def test_a_process_is_iterated_as_it_runs_and_re_attached_by_pid_from_another_client(
        sandbox: Sandbox, kube: Client, ui: UIClient) -> None:
    p = sandbox.start("for i in 1 2 3; do echo line$i; sleep 1; done; echo done >&2; exit 5")
    it = iter(p)
    first = next(it)
    started = time.monotonic()
    assert first == Output("stdout", "line1\n")
    assert p.exit_code is None and not p.exited
    # Another client, as after a reconnect: the same sandbox by name, the process by its id.
    url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
    again = Sandbox.connect(Client(url, token, namespace=kube.namespace), UIClient(url, token, namespace=ui.namespace),
                            sandbox.name)
    attached = again.process(p.pid)
    assert attached.command == p.command and attached.pid in [q.pid for q in again.processes()]
    seen = list(attached)
    # Everything from the start (kept by the server), each stream in order, then the exit.
    assert "".join(o.data for o in seen if o.stream == "stdout") == "line1\nline2\nline3\n"
    assert [o.data for o in seen if o.stream == "stderr"] == ["done\n"]
    assert attached.exited and attached.exit_code == 5
    assert time.monotonic() - started >= 1.5, "the re-attached handle followed the running process"
    # The first handle goes on from where it stopped: nothing twice.
    rest = list(it)
    assert "".join(o.data for o in rest if o.stream == "stdout") == "line2\nline3\n"
    assert p.exit_code == 5 and p.offsets == {"stdout": 18, "stderr": 5}
    with pytest.raises(NotFoundError):
        sandbox.process("0123456789ab")


def test_a_process_reads_what_is_written_to_its_stdin(sandbox: Sandbox) -> None:
    p = sandbox.start("while read l; do echo got:$l; done; echo eof", stdin="first\n")
    p.write("second\n")
    p.write(b"third\n")
    p.close_stdin()
    assert p.wait(timeout=60) == 0
    assert p.logs() == "got:first\ngot:second\ngot:third\neof\n"
    with pytest.raises(ConflictError) as e:
        p.write("late\n")
    assert e.value.reason == "StdinClosed"


def test_port_forward_carries_http_to_a_server_in_the_sandbox(sandbox: Sandbox) -> None:
    sandbox.run("mkdir -p /fwd && echo hello-forward > /fwd/index.html", check=True)
    httpd = sandbox.start(["httpd", "-f", "-p", "8088", "-h", "/fwd"])
    try:
        with sandbox.port_forward(8088) as fwd:
            assert fwd.local_port > 0 and fwd.url == f"http://127.0.0.1:{fwd.local_port}"
            got: list[str] = []

            def answered() -> bool:
                try:
                    got.append(httpx.get(f"{fwd.url}/index.html", timeout=10).text)
                    return got[-1] == "hello-forward\n"
                except httpx.HTTPError:
                    return False

            _eventually("httpd through the forward", answered, timeout=60)
            # Each connection gets its own relay.
            assert httpx.get(f"{fwd.url}/index.html", timeout=10).text == "hello-forward\n"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{fwd.url}/index.html", timeout=5)
    finally:
        httpd.kill()
    with pytest.raises(NotFoundError):
        Sandbox(sandbox.kube, sandbox.ui, "no-such-sandbox").port_forward(80)


def test_a_terminal_has_a_size_resizes_interrupts_and_returns_its_exit_code(sandbox: Sandbox) -> None:
    shown: list[bytes] = []
    with sandbox.pty(on_data=shown.append) as term:
        # What is typed is echoed: a marker is whole only in the command's output.
        term.write("echo S$(stty size)E\n")
        term.read_until("S24 80E")
        term.resize(120, 40)
        term.write("echo S$(stty size)E T=$TERM\n")
        assert term.read_until("T=xterm-256color").endswith(b"S40 120E T=xterm-256color")
        term.write("echo sleep-starts; sleep 300\n")
        term.read_until("sleep-starts\r\n")
        term.write("\x03")
        term.write("echo after-$?\n")
        term.read_until("after-130", timeout=10)
        with pytest.raises(KaironTimeoutError, match="did not show"):
            term.read_until("never-shown", timeout=0.5)
        term.write("exit 3\n")
        assert term.wait(timeout=30) == 3 and term.exit_code == 3
    assert b"S40 120E" in b"".join(shown) and b"S40 120E" in term.output
    # A command of its own, its cwd, env and user; killed with what it started.
    with sandbox.pty(command=["sh", "-c", "echo $(id -u):$(pwd):$X; exit 7"], cwd="/tmp", env={"X": "y"},
                     user="1000") as term:
        assert term.wait(timeout=30) == 7
        assert b"1000:/tmp:y" in term.output
    term = sandbox.pty(command="sleep 4141 & echo started; sleep 4142")
    term.read_until("started")
    term.kill()
    assert term.wait(timeout=30) == -9
    _eventually("the killed terminal's commands end", lambda: "sleep 414" not in sandbox.run("ps").stdout, timeout=10)
    with pytest.raises(ValueError, match="cols=0"):
        sandbox.pty(0, 24)
    with pytest.raises(NotFoundError):
        Sandbox(sandbox.kube, sandbox.ui, "no-such-sandbox").pty()


def test_metrics_follow_a_busy_command_and_never_wake_the_sandbox(sandbox: Sandbox) -> None:
    busy = sandbox.start("yes > /dev/null")
    try:
        m = sandbox.metrics()
        assert m.cpu_percent > 50, m
        assert m.process_count >= 2 and m.window_millis >= 500, m
        assert 0 < m.memory_used_bytes < m.memory_limit_bytes, m
    finally:
        busy.kill()
    busy.wait(timeout=30)
    assert sandbox.metrics(window=1.0).cpu_percent < 10
    before = sandbox.metrics(window=0.1).disk_used_bytes
    sandbox.run("head -c 8388608 /dev/urandom > /tmp/metrics-blob", check=True)
    after = sandbox.metrics(window=0.1).disk_used_bytes
    assert before is not None and after is not None and after >= before + 8 * 1024 * 1024, (before, after)
    sandbox.run("rm /tmp/metrics-blob", check=True)
    samples = sandbox.metrics_stream(interval=0.2)
    assert [next(samples).window_millis >= 200 for _ in range(2)] == [True, True]
    with pytest.raises(BadRequestError, match="windowMillis=20 is out of range"):
        sandbox.metrics(window=0.02)
    # Read while paused: its memory, no CPU, and it stays paused.
    sandbox.pause()
    try:
        paused = sandbox.metrics()
        assert paused.cpu_percent == 0 and paused.memory_used_bytes > 0, paused
        assert sandbox.phase == "Paused"
    finally:
        sandbox.resume()


def test_a_recursive_watch_sees_each_change_below_within_two_seconds(sandbox: Sandbox) -> None:
    sandbox.run("rm -rf /w && mkdir -p /w/sub", check=True)
    seen: queue.Queue[WatchEvent] = queue.Queue()
    with sandbox.files.watch("/w", recursive=True, on_event=seen.put):
        def expect(command: str, kind: str, path: str, from_path: str | None = None) -> None:
            time.sleep(0.2)  # what the last command set off has come: each check sees its own
            while not seen.empty():
                seen.get_nowait()
            started = time.monotonic()
            sandbox.run(command, check=True)
            while True:
                left = started + 2 - time.monotonic()
                try:
                    e = seen.get(timeout=max(left, 0.01))
                except queue.Empty:
                    raise AssertionError(f"no {kind} of {path} within 2 s of {command!r}") from None
                if (e.type, e.path, e.from_path) == (kind, path, from_path):
                    return

        expect("echo one > /w/sub/f", "create", "/w/sub/f")
        expect("echo two >> /w/sub/f", "modify", "/w/sub/f")
        expect("mv /w/sub/f /w/sub/g", "rename", "/w/sub/g", "/w/sub/f")
        expect("rm /w/sub/g", "remove", "/w/sub/g")
        # A directory made later is watched too.
        expect("mkdir /w/sub/new && sleep 0.2 && echo x > /w/sub/new/h", "create", "/w/sub/new/h")
    # Stopped: the watcher in the guest goes with the connection.
    _eventually("the guest's watcher to end", lambda: "kairon-agent watch" not in sandbox.run("ps").stdout, timeout=10)
    # Iterated rather than handed over; stop() from another thread ends the loop.
    w = sandbox.files.watch("/w")
    threading.Timer(0.5, sandbox.run, args=("touch /w/top",)).start()
    threading.Timer(1.5, w.stop).start()
    got = [(e.type, e.path) for e in w]
    assert ("create", "/w/top") in got, got
    with pytest.raises(NotFoundError, match="is not a directory"):
        sandbox.files.watch("/no/such/dir")


def test_pause_and_resume(sandbox: Sandbox) -> None:
    sandbox.run("echo before > /tmp/state", check=True)
    sandbox.pause()
    assert sandbox.phase == "Paused"
    # A hand-paused Machine is not woken on connect: the server says how to resume it.
    with pytest.raises(ConflictError) as e:
        sandbox.run("true")
    assert e.value.reason == "MachineSuspended" and "resume" in e.value.message
    assert isinstance(e.value, MachineSuspendedError) and e.value.reason is Reason.MACHINESUSPENDED
    sandbox.resume()
    assert sandbox.phase == "Running"
    assert sandbox.run("cat /tmp/state", check=True).stdout == "before\n"


def test_run_streams_output_as_it_is_produced_and_keeps_it_on_a_timeout(sandbox: Sandbox) -> None:
    seen: list[tuple[float, str, str]] = []
    r = sandbox.run("echo first; sleep 2; echo second; echo oops >&2",
                    on_stdout=lambda t: seen.append((time.monotonic(), "out", t)),
                    on_stderr=lambda t: seen.append((time.monotonic(), "err", t)))
    assert (r.stdout, r.stderr, r.exit_code, r.timed_out) == ("first\nsecond\n", "oops\n", 0, False)

    def at(word: str) -> float:
        return next(t for t, _, text in seen if word in text)

    assert at("second") - at("first") >= 1.5, f"lines came as printed: {seen}"
    assert "".join(text for _, stream, text in seen if stream == "err") == "oops\n"
    t = time.monotonic()
    slow = sandbox.run("echo early; sleep 60", on_stdout=lambda _: None, timeout=3)
    assert slow.timed_out and slow.stdout == "early\n"
    assert time.monotonic() - t < 30, "the timeout ended it"
    with pytest.raises(ValueError, match="no stdin"):
        sandbox.run("cat", stdin="x", on_stdout=lambda _: None)


def test_labels_url_restart_and_vm_only_power(sandbox: Sandbox) -> None:
    assert sandbox.labels.get("kairon.zyvor.dev/sandbox") == "true"
    assert sandbox.set_labels({"team": "a"})["team"] == "a"
    assert sandbox.labels["team"] == "a"
    assert "team" not in sandbox.set_labels({"team": None})

    # url(port): a server in the sandbox, through Kairon's proxy, with the same token.
    sandbox.files.make_dir("/www")
    sandbox.files.write("/www/index.html", "hello from the sandbox\n")
    sandbox.start(["httpd", "-f", "-p", "8080", "-h", "/www"])
    url = sandbox.url(8080, "/index.html")
    assert url.endswith(f"/api/v1/machines/{sandbox.namespace}/{sandbox.name}/sandbox-http/8080/index.html")
    verify = ssl_context(os.environ.get("KAIRON_CA_FILE"), None)
    headers = {"Authorization": f"Bearer {os.environ['KAIRON_TOKEN']}"}
    deadline = time.monotonic() + 30
    while True:
        r = httpx.get(url, headers=headers, verify=verify)
        if r.status_code == 200 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert r.status_code == 200 and r.text == "hello from the sandbox\n", r.text
    with pytest.raises(ValueError):
        sandbox.url(0)

    # A command as another user, buffered and streamed.
    assert sandbox.run("id -u", user="1000").stdout == "1000\n"
    seen: list[str] = []
    assert sandbox.run("id -u", user="1000:1000", on_stdout=seen.append).exit_code == 0 and "".join(seen) == "1000\n"
    # Hibernate and halt need a VM: refused at once, with the reason.
    for verb in (sandbox.hibernate, sandbox.halt):
        with pytest.raises(PowerStateUnsupportedError) as e:
            verb()
        assert isinstance(e.value, ConflictError) and e.value.reason is Reason.POWERSTATEUNSUPPORTED, e.value
    # restart: the processes end, the files stay, commands run again.
    sandbox.restart()
    assert sandbox.run("cat /www/index.html", check=True).stdout == "hello from the sandbox\n"
    assert sandbox.run("pgrep httpd").exit_code != 0


def test_fork_copies_the_filesystem(sandbox: Sandbox) -> None:
    sandbox.run("echo parent > /tmp/forked", check=True)
    child = sandbox.fork()
    try:
        assert child.name != sandbox.name
        assert child.run("cat /tmp/forked", check=True).stdout == "parent\n"
        child.run("echo child > /tmp/forked", check=True)
        assert sandbox.run("cat /tmp/forked", check=True).stdout == "parent\n"
    finally:
        child.close()
    with pytest.raises(NotFoundError):
        child.machine()


def test_api_errors_carry_reason_and_message(kube: Client, ui: UIClient) -> None:
    missing = f"missing-{uuid.uuid4().hex[:6]}"
    with pytest.raises(NotFoundError) as e:
        ui.get_machine(missing)
    assert e.value.reason == "NotFound" and missing in e.value.message
    # The Kubernetes side raises the same types from its Status bodies.
    with pytest.raises(NotFoundError) as k:
        kube.get_machine(missing)
    assert k.value.reason == "NotFound" and missing in k.value.message
    bad = UIClient(ui.url, "not-a-token", namespace=ui.namespace)
    with pytest.raises(UnauthorizedError) as u:
        bad.get_machine(missing)
    assert u.value.status == 401 and u.value.message


def test_guest_agent_disabled_is_a_conflict(kube: Client, ui: UIClient, template: str) -> None:
    name = f"noagent-{uuid.uuid4().hex[:6]}"
    kube.create_machine({"metadata": {"name": name}, "spec": {"sandbox": {"templateName": template}}})
    try:
        with pytest.raises(ConflictError) as e:
            ui.exec(name, ["true"])
        assert e.value.reason == "GuestAgentDisabled" and "spec.guestAgent" in e.value.message
        assert isinstance(e.value, GuestAgentDisabledError) and e.value.reason is Reason.GUESTAGENTDISABLED
    finally:
        kube.delete_machine(name)
        ui.wait_machine(name, deleted=True)


def test_create_with_a_bad_lifecycle_is_refused(kube: Client, ui: UIClient, template: str) -> None:
    with pytest.raises(BadRequestError) as e:
        Sandbox.create(kube, ui, template=template, idle_timeout=5)
    assert e.value.status in (400, 422) and "idleTimeoutSeconds" in e.value.message


def _eventually(what: str, check: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def test_extend_moves_the_end_and_expires_at_follows(sandbox: Sandbox, kube: Client, ui: UIClient,
                                                     template: str) -> None:
    # The session's sandbox has a max lifetime of an hour from its creation.
    _eventually("expires_at to be recorded", lambda: sandbox.expires_at is not None)
    before = sandbox.expires_at
    assert before is not None and before.tzinfo is not None
    new = sandbox.extend(600)
    assert new == before + datetime.timedelta(seconds=600)
    _eventually("expires_at to follow the extension", lambda: sandbox.expires_at == new)
    with Sandbox.create(kube, ui, template=template, env={"MODE": "fast", "B": "sandbox"},
                        timeout=None) as forever:
        # The sandbox's env reaches every command; a run's own env wins.
        assert forever.run('echo "$MODE $B"', env={"B": "run"}, check=True).stdout == "fast run\n"
        assert forever.expires_at is None
        with pytest.raises(ConflictError) as e:
            forever.extend(60)
        assert e.value.reason == "NoDeadline" and "nothing to extend" in e.value.message
    with pytest.raises(BadRequestError) as bad:
        sandbox.extend(0)
    assert bad.value.status == 422 and "must be 1 to" in bad.value.message


def test_claim_from_a_paused_pool_and_close_releases_it(kube: Client, ui: UIClient, template: str) -> None:
    pool = f"warm-{uuid.uuid4().hex[:6]}"
    kube.create_pool({
        "metadata": {"name": pool},
        "spec": {
            "replicas": 1, "warmPowerState": "Paused", "warmupSeconds": 1,
            "template": {
                "metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                "spec": {"sandbox": {"templateName": template}, "guestAgent": {"console": True},
                         "env": {"T": "template", "X": "template"}},
            },
        },
    })
    try:
        _eventually(f"pool {pool} to have a warm member",
                    lambda: (kube.get_pool(pool).get("status") or {}).get("warm", 0) >= 1)
        with Sandbox.claim_from(kube, ui, pool, env={"X": "claim"}) as sb:
            assert sb.claim is not None and sb.name.startswith(f"{pool}-")
            assert sb.run("echo claimed", check=True).stdout == "claimed\n"
            # The claim's env over the template's, on a member that was already warm.
            assert sb.run('echo "$T $X"', check=True).stdout == "template claim\n"
            claim = kube.get_claim(sb.claim)
            assert claim["status"]["phase"] == "Bound" and claim["status"]["machineName"] == sb.name
            member, claim_name = sb.name, sb.claim

        def released() -> bool:
            try:
                kube.get_claim(claim_name)
                return False
            except NotFoundError:
                pass
            try:
                kube.get_machine(member)
                return False
            except NotFoundError:
                return True

        _eventually("the claim and its member to be gone", released)
    finally:
        kube.delete_pool(pool)

        def pool_gone() -> bool:
            try:
                kube.get_pool(pool)
                return False
            except NotFoundError:
                return True

        _eventually(f"pool {pool} and its members to be gone", pool_gone)


def test_a_code_context_needs_its_interpreter_in_the_guest(sandbox: Sandbox) -> None:
    # Busybox has no python3: the context says so, and what to use (scripts/code_context.py runs
    # contexts on the python template).
    with pytest.raises(KaironError, match="no python3 to run python in: use a template that has it"):
        sandbox.code_context("python")
    with pytest.raises(KaironError, match="use python or javascript"):
        sandbox.code_context("cobol")


def test_a_relay_the_server_never_opens_times_out_over_tls(tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A WebSocket whose upgrade is never answered raises KaironTimeoutError at the deadline
    (websockets' own open_timeout, over TLS, closed the socket and then waited forever for its
    reader)."""
    import socket
    import ssl
    import subprocess

    import kairon.client

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    held: list[ssl.SSLSocket] = []

    def silent() -> None:  # completes TLS, reads the upgrade request, never answers it
        conn, _ = listener.accept()
        s = tls.wrap_socket(conn, server_side=True)
        s.recv(4096)
        held.append(s)

    threading.Thread(target=silent, daemon=True).start()
    monkeypatch.setattr(kairon.client, "RELAY_OPEN_TIMEOUT", 1.0)
    ui = UIClient(f"https://127.0.0.1:{port}", "token", namespace="ns", ca_file=str(cert))
    started = time.monotonic()
    with pytest.raises(KaironTimeoutError, match="did not open the WebSocket within 1 s"):
        ui.relay("m", "console")
    assert time.monotonic() - started < 10
    listener.close()
