"""Calls per second through ``agtool mcp proxy`` against the same MCP server called directly.

    python bench/bench_proxy.py                  # stdio and HTTP, 5 rounds of 3 s each
    python bench/bench_proxy.py --rounds 3 --seconds 2 --json

The server is ``bench/_mcp_upstream_server.py`` (the SDK's ``MCPServer``, one public read).
Over stdio, the client starts it directly, or starts ``agtool mcp proxy -- python
bench/_mcp_upstream_server.py``. Over HTTP, one server runs at a loopback port, and the
client reaches it directly, or through ``agtool mcp proxy --url`` (the proxy's client side is
stdio either way). Each call has arguments of its own, so the proxy's gate never answers
from its memo. ``--concurrency`` calls (4) are in flight at a time, on one session.

The client sends ``tools/call`` without the SDK client's own check of the result against
the output schema (``ClientSession.send_request``): that check costs the same on both
sides, and on two shared cores it would take CPU from the processes being compared.

Direct and proxied runs alternate, round after round, and the figure is the median of the
per-round ratios (proxied / direct), so drift on the machine falls on both sides of each
ratio. The target (issue 20) is at least 0.6x over stdio and over HTTP.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
SERVER = str(ROOT / "bench" / "_mcp_upstream_server.py")
#: Calls in flight at a time, on one session (``--concurrency``).
IN_FLIGHT = [4]
TARGET = 0.6


#: The checkout whose proxy is measured (``--root``: another one, main's for example).
PROXY_ROOT = [str(ROOT)]


def stdio_params(proxied: bool, url: str | None = None) -> StdioServerParameters:
    if not proxied:
        return StdioServerParameters(command=sys.executable, args=[SERVER])
    upstream = ["--url", url] if url else ["--", sys.executable, SERVER]
    return StdioServerParameters(
        command=sys.executable, args=["-m", "agtool._cli", "mcp", "proxy", *upstream],
        cwd=PROXY_ROOT[0], env={"PYTHONPATH": PROXY_ROOT[0]})


async def calls_per_second(session: ClientSession, seconds: float) -> float:
    """Calls answered per second, ``IN_FLIGHT`` at a time, each with its own arguments."""
    done = 0
    end = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        nonlocal done
        count = 0
        while time.perf_counter() < end:
            request = types.CallToolRequest(params=types.CallToolRequestParams(
                name="stock_level", arguments={"sku": f"sku-{index}-{count}"}))
            result = await session.send_request(request, types.CallToolResult)
            if result.is_error:
                raise RuntimeError(f"a bench call failed: {result.content}")
            count += 1
        done += count

    started = time.perf_counter()
    async with anyio.create_task_group() as group:
        for index in range(IN_FLIGHT[0]):
            group.start_soon(worker, index)
    return done / (time.perf_counter() - started)


async def measure_stdio(params: StdioServerParameters, seconds: float) -> float:
    with open(os.devnull, "w") as quiet:
        async with stdio_client(params, errlog=quiet) as (read, write), ClientSession(
                read, write) as session:
            await session.initialize()
            await calls_per_second(session, 0.3)  # warm: imports, first compile
            return await calls_per_second(session, seconds)


async def measure_http(url: str, seconds: float) -> float:
    async with streamable_http_client(url) as (read, write), ClientSession(read,
                                                                            write) as session:
        await session.initialize()
        await calls_per_second(session, 0.3)
        return await calls_per_second(session, seconds)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_server() -> tuple[subprocess.Popen[bytes], str]:
    import socket

    port = free_port()
    server = subprocess.Popen([sys.executable, SERVER, "--http", str(port)],  # noqa: S603
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return server, f"http://127.0.0.1:{port}/mcp"
        time.sleep(0.1)
    server.kill()
    raise RuntimeError("the bench's HTTP server did not start")


def bench(rounds: int, seconds: float, http: bool = True,
          roots: tuple[str, ...] = (str(ROOT),)) -> dict[str, Any]:
    """Per transport and per proxy checkout: the median ratio, each round's, and the rates."""
    ratios: dict[str, list[float]] = {}
    rates: dict[str, list[tuple[float, float]]] = {}

    def record(label: str, direct: float, proxied: float) -> None:
        ratios.setdefault(label, []).append(proxied / direct)
        rates.setdefault(label, []).append((direct, proxied))

    server, url = http_server()
    try:
        for _ in range(rounds):
            direct = anyio.run(measure_stdio, stdio_params(False), seconds)
            for root in roots:
                PROXY_ROOT[0] = root
                record(f"stdio {root}", direct, anyio.run(measure_stdio, stdio_params(True),
                                                         seconds))
            if not http:
                continue
            direct = anyio.run(measure_http, url, seconds)
            for root in roots:
                PROXY_ROOT[0] = root
                record(f"http {root}", direct, anyio.run(measure_stdio,
                                                        stdio_params(True, url), seconds))
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {label: {"median_ratio": statistics.median(values),
                    "ratios": [round(value, 3) for value in values],
                    "calls_per_second": [(round(d), round(p)) for d, p in rates[label]]}
            for label, values in ratios.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--strict", action="store_true", help="exit 1 below the target")
    parser.add_argument("--root", action="append", default=[],
                        help="measure the proxy of this checkout (repeatable: side by side, "
                        "main's and this one's, say); default this checkout")
    parser.add_argument("--concurrency", type=int, default=IN_FLIGHT[0],
                        help=f"calls in flight at a time (default {IN_FLIGHT[0]})")
    parser.add_argument("--stdio-only", action="store_true",
                        help="skip HTTP (a proxy without --url)")
    args = parser.parse_args(argv)
    IN_FLIGHT[0] = args.concurrency
    roots = tuple(os.path.abspath(root) for root in args.root) or (str(ROOT),)
    figures = bench(args.rounds, args.seconds, http=not args.stdio_only, roots=roots)
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(f"{IN_FLIGHT[0]} calls in flight, {args.rounds} rounds of {args.seconds} s")
        print("| transport, proxy | direct calls/s | proxied calls/s | proxied / direct (median) |")
        print("|---|---:|---:|---:|")
        for transport, figure in figures.items():
            direct = statistics.median(d for d, _ in figure["calls_per_second"])
            proxied = statistics.median(p for _, p in figure["calls_per_second"])
            verdict = "met" if figure["median_ratio"] >= TARGET else "NOT met"
            print(f"| {transport} | {direct:.0f} | {proxied:.0f} | "
                  f"{figure['median_ratio']:.2f} (target {TARGET}: {verdict}) |")
    missed = any(figure["median_ratio"] < TARGET for figure in figures.values())
    return 1 if args.strict and missed else 0


if __name__ == "__main__":
    sys.exit(main())
