"""The server's memory with many `WatchEvents` subscribers:
the resident set (VmRSS of /proc/<pid>/status) of a release lightning-store
in memory, fresh for each scenario:

* idle: `--idle` subscribers (default 2,000) open while nothing happens;
* stalled: `--stalled` subscribers (default 200) that read their first
  message and then nothing while `--events` events flow (rollouts enqueued
  in batches of 1,000): the peak while the events flow, and the resident
  set once the server has cut them off (`--subscriber-timeout-secs`).

Each figure is reported beside the server's resident set before any
subscriber. Bounded: a fixed number of subscribers and events, and every
wait has a deadline.

    "$(tools/pyenv.sh agl0)/bin/python" benches/subscriber_memory.py

Needs `cargo build --release` first (or `--lightning-store PATH`).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

from _net import free_port

REPOSITORY = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPOSITORY / "clients/python/src"))

import grpc  # noqa: E402
from lightning_store.proto import store_pb2 as s  # noqa: E402
from lightning_store.proto import store_pb2_grpc  # noqa: E402

#: Subscriptions per connection (the server's default allows 1,024 streams).
PER_CONNECTION = 500
#: The longest any step may take.
DEADLINE = 120.0
#: A small HTTP/2 window, so that the client itself buffers little.
SMALL_WINDOW = [
    ("grpc.http2.bdp_probe", 0),
    ("grpc.http2.lookahead_bytes", 16384),
    # One connection per channel (channels to one address share one by default).
    ("grpc.use_local_subchannel_pool", 1),
]

#: An open `WatchEvents` call.
Subscription = grpc.aio.UnaryStreamCall[s.WatchEventsRequest, s.WatchEventsResponse]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


class Server:
    """A lightning-store in memory on a free loopback port."""

    def __init__(self, binary: str, timeout_secs: float) -> None:
        self.address = f"127.0.0.1:{free_port()}"
        command = [binary, "serve", "--store", "memory", "--listen", self.address, "--log", "warn"]
        command += ["--subscriber-timeout", f"{timeout_secs}s"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def rss(self) -> float:
        return rss_mib(self.process.pid)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


async def ready(server: Server) -> None:
    started = time.monotonic()
    while True:
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                stub = store_pb2_grpc.LightningStoreServiceStub(channel)
                await stub.GetCapabilities(s.GetCapabilitiesRequest(), timeout=1)
                return
        except grpc.aio.AioRpcError:
            if time.monotonic() - started > DEADLINE:
                raise
            await asyncio.sleep(0.2)


async def subscribe(server: Server, count: int) -> tuple[list[grpc.aio.Channel], list[Subscription]]:
    """Opens `count` subscriptions and reads each one's first message."""
    channels = [
        grpc.aio.insecure_channel(server.address, options=SMALL_WINDOW)
        for _ in range((count + PER_CONNECTION - 1) // PER_CONNECTION)
    ]
    calls: list[Subscription] = []
    for at in range(count):
        stub = store_pb2_grpc.LightningStoreServiceStub(channels[at // PER_CONNECTION])
        calls.append(stub.WatchEvents(s.WatchEventsRequest()))
    await asyncio.wait_for(asyncio.gather(*(call.read() for call in calls)), DEADLINE)
    return channels, calls


async def idle(binary: str, count: int) -> None:
    server = Server(binary, 10)
    try:
        await ready(server)
        before = server.rss()
        channels, _calls = await subscribe(server, count)
        during = server.rss()
        print(
            f"idle: {count} subscribers: RSS {during:.1f} MiB (before: {before:.1f} MiB, "
            f"{1024 * (during - before) / count:.1f} KiB per subscriber)"
        )
        for channel in channels:
            await channel.close()
    finally:
        server.stop()


async def stalled(binary: str, count: int, events: int, timeout_secs: float) -> tuple[float, float]:
    """Returns the peak resident set and the one after the cut-off (MiB)."""
    server = Server(binary, timeout_secs)
    try:
        await ready(server)
        before = server.rss()
        channels, _calls = await subscribe(server, count)
        opened = server.rss()
        peak = opened
        async with grpc.aio.insecure_channel(server.address) as channel:
            stub = store_pb2_grpc.LightningStoreServiceStub(channel)
            spec = s.RolloutSpec(input_json='"a rollout input of a few dozen bytes, as a task"')
            for _ in range(events // 1000):
                request = s.EnqueueRolloutsRequest(rollouts=[spec] * 1000, ids_only=True)
                await stub.EnqueueRollouts(request, timeout=DEADLINE)
                peak = max(peak, server.rss())
            # The subscribers are cut off once their buffers stay full for
            # the timeout; sample until then (bounded).
            settle = time.monotonic() + timeout_secs + 3
            while time.monotonic() < settle:
                peak = max(peak, server.rss())
                await asyncio.sleep(0.2)
            after = server.rss()
        print(
            f"stalled: {count} subscribers, {events} events: RSS before {before:.1f} MiB, "
            f"subscribed {opened:.1f} MiB, peak {peak:.1f} MiB, after the cut-off {after:.1f} MiB"
        )
        for channel in channels:
            await channel.close()
        return peak, after
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--lightning-store", default=str(REPOSITORY / "target/release/lightning-store"))
    parser.add_argument("--idle", type=int, default=2000, help="idle subscribers")
    parser.add_argument("--stalled", type=int, default=200, help="subscribers that stop reading")
    parser.add_argument("--events", type=int, default=20_000, help="events while they are stalled")
    parser.add_argument("--subscriber-timeout-secs", type=float, default=2.0)
    args = parser.parse_args()
    binary = args.lightning_store
    asyncio.run(idle(binary, args.idle))
    # The same events without subscribers: what the stored rollouts and the
    # event history take, to subtract.
    alone_peak, alone_after = asyncio.run(stalled(binary, 0, args.events, args.subscriber_timeout_secs))
    peak, after = asyncio.run(stalled(binary, args.stalled, args.events, args.subscriber_timeout_secs))
    print(
        f"stalled subscribers: {1024 * (peak - alone_peak) / args.stalled:.1f} KiB each at the peak, "
        f"{1024 * (after - alone_after) / args.stalled:.1f} KiB each "
        "after the cut-off (against the same run without them)"
    )


if __name__ == "__main__":
    main()
