"""The disk's sync time, the figure the performance pages state of their machine:
`fdatasync` after each 4 KiB append to a file in a directory of that disk
(default: the current one; /tmp is often a tmpfs, where a sync costs
nothing), the way SQLite syncs its write-ahead log before a commit returns.

    python3 benches/fsync_probe.py [--dir target] [--count 500]

Prints the median, p90 and largest of `--count` syncs in milliseconds.
Bounded: a fixed number of syncs of a file it removes.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", default=".", help="a directory on the disk to measure (default: the current one)"
    )
    parser.add_argument("--count", type=int, default=500, help="syncs to time (default: 500)")
    args = parser.parse_args()

    times: list[float] = []
    with tempfile.NamedTemporaryFile(dir=args.dir, prefix="fsync-probe-") as f:
        block = b"x" * 4096
        for _ in range(args.count):
            os.write(f.fileno(), block)
            start = time.perf_counter()
            os.fdatasync(f.fileno())
            times.append(time.perf_counter() - start)
    times.sort()

    def ms(q: float) -> str:
        return f"{times[min(len(times) - 1, int(q * len(times)))] * 1e3:.2f}"

    print(f"fdatasync of a 4 KiB append, {len(times)} times in {os.path.abspath(args.dir)}:")
    print(f"p50 {ms(0.5)} ms, p90 {ms(0.9)} ms, max {times[-1] * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
