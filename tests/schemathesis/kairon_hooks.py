"""Schemathesis hooks of the fuzz test (tests/tests/fuzz.rs sets SCHEMATHESIS_HOOKS to this file).

The stateful phase follows the document's links from a create to the get, replace and delete of
the object created. Its creates are made real here, so the chain has an object to follow: a
fresh valid name, and a spec the server takes whose Machines never boot (pinned to a node that
does not exist, so they stay Pending: no runtime work, no wake for a guest call to wait on). The
other phases send what schemathesis generates, untouched.
"""

import itertools

import schemathesis

_serial = itertools.count()

# A Machine that the scheduler leaves Pending: its node is not there.
_NEVER_BOOTS = {"sandbox": {"templateName": "busybox"}, "nodeName": "no-such-node"}


def _fresh_name(kind):
    return f"stateful-{kind}-{next(_serial)}"


@schemathesis.hook
def before_call(ctx, case, kwargs):
    if case.meta is None or case.meta.phase.name.value != "stateful":
        return
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
