"""Times `tools/call echo` through three paths to the same server-everything over streamable
HTTP, with the official MCP Python SDK as the client (the same client code for all three):

- direct: the SDK's streamable HTTP client straight to the server (the floor);
- car:    car-mcp over stdio, calling the enabled connector tool mcp_<slug>_echo;
- proxy:  mcp-remote over stdio (a stdio-to-HTTP proxy, the usual way to reach a remote server).

Rounds interleave the three paths so machine load hits them alike. Prints JSON."""
import asyncio
import json
import os
import statistics
import sys
import time

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def timed(session, tool, n, out):
    for i in range(n):
        t = time.perf_counter()
        result = await session.call_tool(tool, {"message": f"m{i}"})
        out.append((time.perf_counter() - t) * 1000)
        text = result.content[0].text
        assert text == f"Echo: m{i}", text


async def main():
    url, car_mcp, mcp_remote, slug = sys.argv[1:5]
    calls = int(os.environ.get("BENCH_CALLS", "300"))
    rounds = int(os.environ.get("BENCH_ROUNDS", "5"))
    per = calls // rounds
    env = dict(os.environ)
    samples = {"direct": [], "car": [], "proxy": []}
    quiet = open(os.devnull, "w")
    async with streamable_http_client(url) as (r1, w1, *_):
        async with ClientSession(r1, w1) as direct:
            await direct.initialize()
            car_params = StdioServerParameters(command=car_mcp, args=[], env=env)
            async with stdio_client(car_params, errlog=quiet) as (r2, w2):
                async with ClientSession(r2, w2) as car:
                    await car.initialize()
                    proxy_params = StdioServerParameters(
                        command=mcp_remote, args=[url, "--transport", "http-only"], env=env
                    )
                    async with stdio_client(proxy_params, errlog=quiet) as (r3, w3):
                        async with ClientSession(r3, w3) as proxy:
                            await proxy.initialize()
                            # Warm each path (connections, caches) before timing.
                            for s, tool in [(direct, "echo"), (car, f"mcp_{slug}_echo"), (proxy, "echo")]:
                                await timed(s, tool, 10, [])
                            for _ in range(rounds):
                                await timed(direct, "echo", per, samples["direct"])
                                await timed(car, f"mcp_{slug}_echo", per, samples["car"])
                                await timed(proxy, "echo", per, samples["proxy"])
    report = {}
    for name, values in samples.items():
        report[name] = {
            "calls": len(values),
            "p50_ms": round(statistics.median(values), 3),
            "p90_ms": round(pct(values, 0.9), 3),
            "mean_ms": round(statistics.fmean(values), 3),
        }
    floor = report["direct"]["p50_ms"]
    for name in ("car", "proxy"):
        report[name]["overhead_p50_ms"] = round(report[name]["p50_ms"] - floor, 3)
    report["proxy_over_car_p50"] = round(report["proxy"]["p50_ms"] / report["car"]["p50_ms"], 2)
    if report["car"]["overhead_p50_ms"] > 0:
        report["overhead_ratio"] = round(
            report["proxy"]["overhead_p50_ms"] / report["car"]["overhead_p50_ms"], 2
        )
    print(json.dumps(report, indent=2))


asyncio.run(main())
