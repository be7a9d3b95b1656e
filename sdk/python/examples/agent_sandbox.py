"""The example of agent-sandboxes.md ("SDKs"), runnable against `kairon up`:

    KAIRON_URL=https://127.0.0.1:7443 KAIRON_TOKEN=$(kairon token --sub me --role admin) \
    KAIRON_CA_FILE=~/.local/state/kairon/tls/ca.crt python3 examples/agent_sandbox.py

KAIRON_IMAGE picks the VM image (default: the spec's); KAIRON_TEMPLATE=python runs the same
story in a runc sandbox of that template instead.
"""

import os

from kairon import Client, Sandbox, UIClient

KUBE_URL = os.environ["KAIRON_URL"]
KUBE_TOKEN = os.environ["KAIRON_TOKEN"]
UI_URL = os.environ.get("KAIRON_UI_URL", KUBE_URL)
UI_TOKEN = os.environ.get("KAIRON_UI_TOKEN", KUBE_TOKEN)
TEMPLATE = os.environ.get("KAIRON_TEMPLATE")
IMAGE = None if TEMPLATE else os.environ.get("KAIRON_IMAGE", "/var/lib/fluxvm/images/kairon-hw.qcow2")

kube = Client(KUBE_URL, KUBE_TOKEN, namespace="agents")
ui = UIClient(UI_URL, UI_TOKEN, namespace="agents")
with Sandbox.create(kube, ui, image=IMAGE, template=TEMPLATE,
                    idle_timeout=600, max_lifetime=3600) as sb:
    print(sb.run("uname -a", check=True).stdout)
    sb.write_file("/tmp/task.py", b"print('hi')")
    proc = sb.start("python3 /tmp/task.py")
    proc.wait()
    print(proc.logs())
    child = sb.fork()          # live copy of the sandbox
    child.close()
