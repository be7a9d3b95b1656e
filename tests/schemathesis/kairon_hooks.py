"""Schemathesis hooks of the fuzz test (tests/tests/fuzz.rs sets SCHEMATHESIS_HOOKS to this file).

The stateful phase follows the document's links from a create to the get, replace and delete of
the object created. Its creates are made real here, so the chain has an object to follow: a
fresh valid name, and a spec the server takes whose Machines never boot (pinned to a node that
does not exist, so they stay Pending: no runtime work, no wake for a guest call to wait on). The
other phases send what schemathesis generates, with one change: a rule between list items that
no JSON Schema can state (two volumes of a Machine spec may not share a name) is kept by renaming
a repeated name, so a schema-valid body is not refused for it (model/src/validate.rs
`volumes_and_cpusets` checks that refusal).
"""

import itertools
import json
import re
import time

import requests
import schemathesis
import urllib3

_serial = itertools.count()

# A Machine that the scheduler leaves Pending: its node is not there.
_NEVER_BOOTS = {"sandbox": {"templateName": "busybox"}, "nodeName": "no-such-node"}


def _fresh_name(kind):
    return f"stateful-{kind}-{next(_serial)}"


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def _machine_specs(path, body):
    """The Machine specs in a create or replace body of Machines or MachinePools."""
    spec = body.get("spec") if isinstance(body, dict) else None
    if not isinstance(spec, dict):
        return []
    if path in ("/api/v1/machines/{namespace}", "/api/v1/machines/{namespace}/{name}"):
        return [spec]
    if path in ("/api/v1/machinepools/{namespace}", "/api/v1/machinepools/{namespace}/{name}"):
        template = spec.get("template")
        inner = template.get("spec") if isinstance(template, dict) else None
        return [inner] if isinstance(inner, dict) else []
    return []


def _unique_volume_names(spec):
    volumes = spec.get("volumes")
    if not isinstance(volumes, list):
        return
    seen = set()
    for i, v in enumerate(volumes):
        name = v.get("name") if isinstance(v, dict) else None
        # Only a valid name is renamed (to another valid one): an invalid one stays as generated.
        if not (isinstance(name, str) and _DNS_LABEL.fullmatch(name)):
            continue
        while name in seen:
            name = f"v{i}-{len(seen)}-{name}"[:63].rstrip("-")
        seen.add(name)
        v["name"] = name


def _stateful(case):
    return case.meta is not None and case.meta.phase.name.value == "stateful"


@schemathesis.hook
def before_call(ctx, case, kwargs):
    if case.operation.method.upper() in ("POST", "PUT"):
        for spec in _machine_specs(case.operation.path, case.body):
            _unique_volume_names(spec)
    if not _stateful(case):
        return
    # Each step of a chain acts for real: a dry run leaves the next step nothing to follow.
    if isinstance(case.query, dict):
        case.query.pop("dryRun", None)
    op = case.operation.label
    if not (op.startswith("POST ") and isinstance(case.body, dict)):
        return
    path = case.operation.path
    body = case.body
    # Where the fuzz test made the pool the claims name.
    case.path_parameters = {**(case.path_parameters or {}), "namespace": "default"}
    if path == "/api/v1/machines/{namespace}":
        body["metadata"] = {"name": _fresh_name("machine")}
        body["spec"] = dict(_NEVER_BOOTS)
    elif path == "/api/v1/machinepools/{namespace}":
        body["metadata"] = {"name": _fresh_name("pool")}
        body["spec"] = {"replicas": 1, "template": {"spec": dict(_NEVER_BOOTS)}}
    elif path == "/api/v1/machineclaims/{namespace}":
        body["metadata"] = {"name": _fresh_name("claim")}
        body["spec"] = {"poolName": "stateful-pool"}
    elif path == "/api/v1/templates/{namespace}":
        # An image no node can pull (the .invalid name never resolves): its build fails at once.
        body["metadata"] = {"name": _fresh_name("template")}
        body["spec"] = {"image": "registry.invalid/none:1"}


@schemathesis.hook
def after_call(ctx, case, response):
    """A delete of an object that has finalizers answers 200 with the object still there, its
    deletionTimestamp set, as in Kubernetes: it goes once they are done (a claim's, by the claim
    controller's release). The chain's next step reads it, so the delete is followed until the
    object is gone (at most 30 s; past that the next step reports it)."""
    if not _stateful(case) or case.operation.method.upper() != "DELETE" or response.status_code != 200:
        return
    try:
        meta = json.loads(response.content).get("metadata")
    except (ValueError, AttributeError):
        return
    if not isinstance(meta, dict) or not meta.get("deletionTimestamp") or not meta.get("finalizers"):
        return
    url = response.request.url.split("?")[0]
    headers = {"Authorization": response.request.headers.get("Authorization", "")}
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        # The server's own self-signed certificate on loopback.
        if requests.get(url, headers=headers, verify=False, timeout=10).status_code == 404:
            return
        time.sleep(0.05)
