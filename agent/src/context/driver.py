# The Python code context of `kairon-agent context python` (see agent/src/context.rs): one
# long-lived interpreter whose globals outlive each run. Requests are JSON lines on stdin
# ({"id", "code", "timeoutSeconds"}); each answer is one line on stdout after the marker.
# A run's output is captured at the file descriptors, so a subprocess's is caught too.
import os, sys

try:
    import ast, json, linecache, signal, tempfile, traceback
except ImportError as e:
    # A minimal Python (Debian's python3-minimal has no json): say what is missing, by hand.
    sys.stdout.write('\x1ekairon-context {"ready": false, "error": {"name": "ContextError", "value": '
                     '"this guest\'s python has no %s module: install the full python3"}}\n' % e.name)
    sys.exit(127)

MARK = "\x1ekairon-context "
CAP = 1 << 20

proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
sys.stdin = open(os.devnull)
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
runs = 0


def say(message):
    proto_out.write(MARK + json.dumps(message) + "\n")
    proto_out.flush()


class Timeout(BaseException):
    pass


def on_alarm(signum, frame):
    raise Timeout()


signal.signal(signal.SIGALRM, on_alarm)


def run(code, filename, timeout):
    tree = ast.parse(code, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    if timeout:
        signal.alarm(timeout)
    try:
        exec(compile(tree, filename, "exec"), namespace)
        if last is not None:
            value = eval(compile(last, filename, "eval"), namespace)
            if value is not None:
                namespace["_"] = value
                return repr(value)
        return None
    finally:
        signal.alarm(0)


def read(f):
    f.seek(0)
    data = f.read(CAP + 1)
    text = data[:CAP].decode("utf-8", "replace")
    return text + ("\n[output truncated at 1 MiB]\n" if len(data) > CAP else "")


say({"ready": True, "language": "python", "version": sys.version.split()[0]})
for line in proto_in:
    try:
        req = json.loads(line)
    except ValueError as e:
        say({"id": None, "error": {"name": "ProtocolError", "value": str(e), "traceback": ""}})
        continue
    runs += 1
    filename = f"<cell {runs}>"
    code = str(req.get("code", ""))
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    answer = {"id": req.get("id"), "text": None, "error": None}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        saved = os.dup(1), os.dup(2)
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(out.fileno(), 1); os.dup2(err.fileno(), 2)
        try:
            answer["text"] = run(code, filename, int(req.get("timeoutSeconds") or 0))
        except BaseException as e:
            if isinstance(e, Timeout):
                e = TimeoutError(f"the run took longer than {req.get('timeoutSeconds')} s")
                e.__traceback__ = None
            tb = e.__traceback__
            # The driver's own frames are not the caller's business.
            while tb is not None and tb.tb_frame.f_code.co_filename != filename:
                tb = tb.tb_next
            answer["error"] = {
                "name": type(e).__name__,
                "value": str(e),
                "traceback": "".join(traceback.format_exception(type(e), e, tb)),
            }
        finally:
            sys.stdout.flush(); sys.stderr.flush()
            os.dup2(saved[0], 1); os.dup2(saved[1], 2)
            os.close(saved[0]); os.close(saved[1])
        answer["stdout"] = read(out)
        answer["stderr"] = read(err)
    say(answer)
