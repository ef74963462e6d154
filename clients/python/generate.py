#!/usr/bin/env python3
"""Generates the package's protobuf and gRPC modules from the repository's proto/.

    python generate.py           # writes src/lightning_store/proto/
    python generate.py --check   # exits 1 when the checked-in modules differ

The modules are checked in so that the sdist and wheel build with nothing but
setuptools; CI runs `--check`, so they never drift from proto/. Messages come
from grpcio-tools (`--python_out`, `--pyi_out`), the service from grpcio-tools
(`--grpc_python_out`) with typed stubs from mypy-protobuf (`--mypy_grpc_out`).
protoc writes the package `lightningstore.v1`; its imports are rewritten to
`lightning_store.proto` so the generated code lives inside this package.
"""

from __future__ import annotations

import argparse
import difflib
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
TARGET = HERE / "src" / "lightning_store" / "proto"
MESSAGES = ["lightningstore/v1/types.proto", "lightningstore/v1/store.proto"]
SERVICES = ["lightningstore/v1/store.proto"]
GENERATED = [
    "types_pb2.py",
    "types_pb2.pyi",
    "store_pb2.py",
    "store_pb2.pyi",
    "store_pb2_grpc.py",
    "store_pb2_grpc.pyi",
]


def protoc(*args: str) -> None:
    plugin = Path(sys.executable).parent / "protoc-gen-mypy_grpc"
    command = [sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO_ROOT}", f"--plugin=protoc-gen-mypy_grpc={plugin}"]
    done = subprocess.run([*command, *args], check=False, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"protoc failed:\n{done.stdout}{done.stderr}")


def generate() -> dict[str, str]:
    """Returns the generated modules by file name, imports rewritten."""
    with tempfile.TemporaryDirectory() as out:
        protoc(f"--python_out={out}", f"--pyi_out={out}", *(str(PROTO_ROOT / f) for f in MESSAGES))
        protoc(f"--grpc_python_out={out}", f"--mypy_grpc_out={out}", *(str(PROTO_ROOT / f) for f in SERVICES))
        package = Path(out) / "lightningstore" / "v1"
        return {
            name: (package / name)
            .read_text()
            .replace("from lightningstore.v1 import", "from lightning_store.proto import")
            for name in GENERATED
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    modules = generate()
    if not args.check:
        for name, text in modules.items():
            (TARGET / name).write_text(text)
        print(f"generated {len(modules)} modules in {TARGET}")
        return 0
    drift = 0
    for name, text in modules.items():
        path = TARGET / name
        current = path.read_text() if path.exists() else ""
        if current != text:
            drift += 1
            sys.stdout.writelines(
                difflib.unified_diff(current.splitlines(True), text.splitlines(True), str(path), "generated")
            )
    if drift:
        print(f"{drift} generated module(s) differ from proto/: run `python clients/python/generate.py`")
        return 1
    print(f"the {len(modules)} generated modules match proto/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
