#!/usr/bin/env python3
"""Makes the client-only wheel (`py3-none-any`) of the package from one of its platform wheels.

    python client_only_wheel.py dist/lightning_store-0.2.0-py3-none-manylinux_2_17_x86_64.whl --out dist

Where no platform wheel fits (a platform the release builds no server for),
pip takes this wheel rather than the sdist, whose build needs Rust and about
fifteen minutes: such users get the client at once. Its `lightning-store`
command says how to get the server (`lightning_store.binary.client_only_main`).
The wheel is the platform wheel's Python package and metadata, byte for byte,
without the server binary (the `.data/scripts` entry) and the SBOM of its Rust
dependencies, tagged `py3-none-any`, with that console script added to the
entry points.
"""

from __future__ import annotations

import argparse
import base64
import configparser
import hashlib
import io
import sys
import zipfile
from pathlib import Path

CONSOLE_SCRIPT = "lightning-store = lightning_store.binary:client_only_main"
TAG = "py3-none-any"


def record_line(name: str, data: bytes) -> str:
    """Returns the RECORD line of a file (PEP 376: urlsafe base64 sha256 without padding, size)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def wheel_metadata(text: str) -> str:
    """Returns the WHEEL file of the client-only wheel: pure Python, one tag."""
    lines = [line for line in text.splitlines() if not line.startswith(("Tag:", "Root-Is-Purelib:"))]
    return "\n".join([*lines, "Root-Is-Purelib: true", f"Tag: {TAG}", ""])


def entry_points(text: str) -> str:
    """Returns the entry points with the `lightning-store` console script added."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names are case-sensitive
    parser.read_string(text)
    if not parser.has_section("console_scripts"):
        parser.add_section("console_scripts")
    name, target = (part.strip() for part in CONSOLE_SCRIPT.split("="))
    parser.set("console_scripts", name, target)
    out = io.StringIO()
    parser.write(out)
    return out.getvalue()


def new_file(name: str) -> zipfile.ZipInfo:
    """Returns the entry of a file this script writes, dated as maturin dates its entries (reproducible)."""
    info = zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0))
    info.external_attr, info.compress_type = 0o644 << 16, zipfile.ZIP_DEFLATED
    return info


def client_only(platform_wheel: Path, out_dir: Path) -> Path:
    """Writes the client-only wheel made from `platform_wheel` into `out_dir` and returns its path."""
    distribution, version = platform_wheel.name.split("-")[:2]
    dist_info, data = f"{distribution}-{version}.dist-info", f"{distribution}-{version}.data"
    target = out_dir / f"{distribution}-{version}-{TAG}.whl"
    records: list[str] = []
    with zipfile.ZipFile(platform_wheel) as source, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as wheel:
        names = source.namelist()
        if not any(name.startswith(f"{data}/scripts/") for name in names):
            sys.exit(f"{platform_wheel} holds no server binary ({data}/scripts/): not a platform wheel")

        def write(info: zipfile.ZipInfo, content: bytes) -> None:
            wheel.writestr(info, content)
            records.append(record_line(info.filename, content))

        for info in source.infolist():
            name = info.filename
            if name.startswith((f"{data}/scripts/", f"{dist_info}/sboms/")) or name in (
                f"{dist_info}/RECORD",
                f"{dist_info}/entry_points.txt",
            ):
                continue
            content = source.read(info)
            if name == f"{dist_info}/WHEEL":
                content = wheel_metadata(content.decode()).encode()
            write(info, content)
        existing = (
            source.read(f"{dist_info}/entry_points.txt").decode() if f"{dist_info}/entry_points.txt" in names else ""
        )
        write(new_file(f"{dist_info}/entry_points.txt"), entry_points(existing).encode())
        wheel.writestr(new_file(f"{dist_info}/RECORD"), "\n".join([*records, f"{dist_info}/RECORD,,", ""]))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("platform_wheel", type=Path, help="a platform wheel of the package (any platform)")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="the directory to write the wheel into")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(client_only(args.platform_wheel, args.out))


if __name__ == "__main__":
    main()
