#!/usr/bin/env python3
"""Fails when a generated client lacks an operation or a model of the OpenAPI document.

Generators drop things silently (openapi-python-client exits 0 after skipping an endpoint it
cannot type), so every operationId and every named object/enum schema is looked for in each
client: usage `coverage.py DOC ROOT` (ROOT holds sdk/python/kairon_api, sdk/typescript/...).
"""

import json
import re
import sys
from pathlib import Path


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def main() -> int:
    doc = json.loads(Path(sys.argv[1]).read_text())
    root = Path(sys.argv[2])
    ops = [
        (method, path, op["operationId"])
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if isinstance(op, dict) and "operationId" in op
    ]
    schemas = doc["components"]["schemas"]
    # Schemas that become classes: objects and enums (a bare `string`, like FileBytes, does not).
    models = [n for n, s in schemas.items() if s.get("type") == "object" or "enum" in s]
    missing: list[str] = []

    py = root / "sdk/python/kairon_api"
    py_ops = {p.stem: p for p in (py / "api").glob("*/*.py")}
    for _, path, op in ops:
        f = py_ops.get(op)
        if f is None or "def sync_detailed(" not in f.read_text():
            missing.append(f"python: operation {op} ({path})")
    py_models = (py / "models/__init__.py").read_text()
    for m in models:
        if not re.search(rf"^from \.{snake(m)} import {m}$", py_models, re.M):
            missing.append(f"python: model {m}")

    ts = (root / "sdk/typescript/src/generated/schema.ts").read_text()
    ts_ops = ts[ts.index("export interface operations {") :]
    ts_paths = ts[ts.index("export interface paths {") : ts.index("export interface components {")]
    for method, path, op in ops:
        if not re.search(rf"^    {re.escape(op)}: \{{", ts_ops, re.M):
            missing.append(f"typescript: operation {op}")
        if not re.search(rf'^    "{re.escape(path)}": \{{', ts_paths, re.M):
            missing.append(f"typescript: path {path}")
        elif not re.search(rf'^        {method}: operations\["{re.escape(op)}"\];', ts_paths, re.M):
            missing.append(f"typescript: {method.upper()} {path} → {op}")
    for m in schemas:
        if not re.search(rf"^        {re.escape(m)}: ", ts, re.M):
            missing.append(f"typescript: schema {m}")

    rs_file = root / "cli/src/generated.rs"
    if rs_file.exists():
        rs = rs_file.read_text()
        for _, path, op in ops:
            if not re.search(rf"pub (async )?fn {re.escape(op)}(<[^(]*>)?\(", rs):
                missing.append(f"rust: operation {op}")
        for m in models:
            if not re.search(rf"pub (struct|enum) {re.escape(m)}\b", rs):
                missing.append(f"rust: type {m}")

    if missing:
        print("a generator dropped parts of openapi/openapi.json:", file=sys.stderr)
        for m in missing:
            print(f"  {m}", file=sys.stderr)
        return 1
    print(f"coverage: {len(ops)} operations and {len(models)} models in every client")
    return 0


if __name__ == "__main__":
    sys.exit(main())
