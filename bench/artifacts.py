"""Artifact upload throughput: the runner's uploader beside a plain HTTP PUT of the same
bytes to the same server in the same run.

Through a daphne over a scratch database (PostgreSQL by default), its blobs in a directory of
the scratch run: a runner paired through the services leases a job over MCP, then uploads N
distinct random blobs of S MiB with `upload_many` (`runnercli.case.artifacts.upload`) as the
Artifacts stage does (`UPLOADS_AT_ONCE` blobs at a time, each one's chunks in order). Both sides
do `raw_upload`: the blobs' URLs from one `begin_uploads` over MCP, then plain `PUT`s of
`Content-Range` chunks (the server's `EVERDICT_UPLOAD_CHUNK_BYTES`, 8 MiB: one per blob) to
them, the digest checked and the blob committed on the last — timed from the first call to the
last answer. Baseline, interleaved in rounds with it: the same bytes as plain `PUT /healthz`
bodies on one keep-alive connection (the server reads each body whole before it answers; it
keeps nothing). Target: artifacts at ≥ 80 % of the plain PUT's MiB/s (the median over rounds of
each round's ratio: a round's runs go back to back, under the same load). The plain PUT keeps
nothing of the bytes: beside it, in the same rounds, the time to write them to files on the disk
of the blob store, a note of what the upload is beside a plain PUT that kept them. Beside them,
in the same rounds: the same uploader for a runner without `raw_upload` (`put_blob` chunks of 1
MiB as base64 in MCP calls), and the same blobs again (held already: no byte sent). Then, on a
server of its own with `EVERDICT_MAX_ARTIFACT_BYTES` raised, its resident set size sampled every
2 ms while it receives one 50 MiB artifact by `PUT`s, beside its size when idle (target: no more
than 2 chunks above it).

    .venv/bin/python bench/artifacts.py [--blobs 4] [--mib 8] [--rounds 5] [--rss-mib 50] [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import time
from typing import Any

from databases import add_database_arguments, scratch_database
from report import Summary, finish, machine_line
from seeding import pair_runners, seed_member, seed_suite
from server_profile import ServerProfile
from servers import RssPeak, daphne, server_env

TARGET = 0.80
MIB = 1024 * 1024


def lease_one(url: str, token: str) -> Any:
    """Lease the run's job over MCP as a runner does; its fence."""
    from runnercli.client import RunnerClient
    from runnercli.protocol import JobFence

    async def go() -> JobFence:
        async with RunnerClient(url, token) as client:
            await client.hello(capabilities=["python"])
            batch = await client.lease_job(wait_ms=5000, capabilities=["python"], status="")
            assert batch.lease is not None, "no job leased"
            return JobFence(job_id=batch.lease.job_id, lease_epoch=batch.lease.lease_epoch)

    return asyncio.run(go())


async def _upload_all(
    url: str, token: str, fence: Any, blobs: list[bytes], raw: bool
) -> tuple[float, int]:
    """Seconds to upload every blob as the runner's Artifacts stage does (several at once,
    each one's chunks in order), and the chunks sent; `raw`: by `PUT`s, else in `put_blob`
    calls (a runner without `raw_upload`)."""
    from runnercli.case.artifacts.upload import Blob, Uploaded, upload_many
    from runnercli.client import RunnerClient

    items = [Blob(data, hashlib.sha256(data).hexdigest(), len(data)) for data in blobs]
    async with RunnerClient(url, token) as client:
        if not raw:
            client.features = [f for f in client.features if f != "raw_upload"]
        await client.hello(capabilities=["python"])
        assert client.offers("raw_upload") == raw, client.server_features
        began = time.perf_counter()
        outcomes = await upload_many(client, fence, items)
        took = time.perf_counter() - began
    done = [o for o in outcomes if isinstance(o, Uploaded)]
    assert len(done) == len(items), outcomes
    return took, sum(o.chunks for o in done)


def uploads(
    url: str, token: str, fence: Any, blobs: list[bytes], raw: bool = True
) -> tuple[float, int]:
    return asyncio.run(_upload_all(url, token, fence, blobs, raw))


def disk_writes(directory: Any, blobs: list[bytes]) -> float:
    """Seconds to write every blob to a file of its own in `directory` (on the disk the
    server's blob store is on), as the upload must keep them and the plain PUT does not;
    the files are removed after."""
    directory.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    for n, data in enumerate(blobs):
        (directory / f"{n}.bin").write_bytes(data)
    took = time.perf_counter() - began
    for n in range(len(blobs)):
        (directory / f"{n}.bin").unlink()
    return took


def plain_puts(url: str, blobs: list[bytes]) -> float:
    """Seconds to PUT every blob as a plain body on one keep-alive connection."""
    import httpx2

    headers = {"Content-Type": "application/octet-stream"}
    with httpx2.Client(base_url=url, timeout=120) as client:
        client.get("/healthz").raise_for_status()
        began = time.perf_counter()
        for data in blobs:
            reply = client.put("/healthz", content=data, headers=headers)
            assert reply.status_code < 500, reply.text[:300]
        return time.perf_counter() - began


def rss_while_receiving(
    scratch: Any, env: dict[str, str], token: str, fence: Any, mib: int
) -> tuple[int, int, float]:
    """A fresh server's resident set size when idle (after one small upload warmed it) and
    at its highest while it receives one blob of `mib` MiB by raw `PUT`s; its seconds."""
    from runnercli.protocol import RAW_UPLOAD_MIN_BYTES

    limit = {"EVERDICT_MAX_ARTIFACT_BYTES": str((mib + 1) * MIB)}
    with daphne(scratch, name="daphne-rss", **{**env, **limit}) as server:
        uploads(server.url, token, fence, [os.urandom(RAW_UPLOAD_MIN_BYTES * 2)])
        time.sleep(0.5)
        idle = server.rss_bytes()
        blob = os.urandom(mib * MIB)
        sampler = RssPeak(server)
        took, _ = uploads(server.url, token, fence, [blob])
        return idle, sampler.stop(), took


def rate(size: int, seconds: float) -> float:
    return size / MIB / seconds if seconds else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blobs", type=int, default=4, help="blobs per round (4)")
    parser.add_argument("--mib", type=float, default=8, help="MiB per blob (8)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (5)")
    parser.add_argument(
        "--rss-mib", type=int, default=50, help="MiB of the blob received for the RSS figure (50)"
    )
    parser.add_argument(
        "--profile", action="store_true", help="sample the server with py-spy during uploads"
    )
    add_database_arguments(parser)
    args = parser.parse_args()
    size = max(1, int(args.mib * MIB))

    summary = Summary("artifact upload throughput, beside a plain HTTP PUT of the same bytes")
    with scratch_database(args) as scratch:
        print(f"artifacts — {machine_line(scratch)}")
        member = seed_member()
        seed_suite(member, name="one", cases=1)
        [(runner_id, token)] = pair_runners(member.user, 1)
        from scorecards.services import run_start

        run_start(
            user=member.user,
            workspace_slug=member.slug,
            harness="one",
            dataset="one",
            runtime=f"self:{runner_id}",
        )
        storage = {"location": str(scratch.workdir / "blobs"), "allow_overwrite": True}
        env = {**server_env(args), "EVERDICT_BLOB_STORAGE_OPTIONS": json.dumps(storage)}
        with daphne(scratch, **env) as server:
            fence = lease_one(server.url, token)
            plain_puts(server.url, [os.urandom(size)])  # warm-up
            upload_s: list[float] = []
            posts_s: list[float] = []
            inline_s: list[float] = []
            disk_s: list[float] = []
            chunks = 0
            cpu = {"server": 0.0, "runner": 0.0, "server_post": 0.0, "server_inline": 0.0}
            for _ in range(args.rounds):
                blobs = [os.urandom(size) for _ in range(args.blobs)]
                began = server.cpu_seconds()
                posts_s.append(plain_puts(server.url, blobs))
                cpu["server_post"] += server.cpu_seconds() - began
                disk_s.append(disk_writes(scratch.workdir / "disk", blobs))
                began = server.cpu_seconds()
                inline_s.append(
                    uploads(server.url, token, fence, [os.urandom(size) for _ in blobs], False)[0]
                )
                cpu["server_inline"] += server.cpu_seconds() - began
                began, own = server.cpu_seconds(), time.process_time()
                spy = (
                    ServerProfile(server.pid, scratch.workdir / f"up-{len(upload_s)}.spy")
                    if args.profile
                    else None
                )
                took, made = uploads(server.url, token, fence, blobs)
                if spy is not None:
                    print(spy.stop())
                cpu["server"] += server.cpu_seconds() - began
                cpu["runner"] += time.process_time() - own
                upload_s.append(took)
                chunks += made
            again_s, again_chunks = uploads(server.url, token, fence, blobs)
        idle, peak, rss_s = rss_while_receiving(scratch, env, token, fence, args.rss_mib)
    moved = size * args.blobs
    upload_rate = rate(moved, statistics.median(upload_s))
    post_rate = rate(moved, statistics.median(posts_s))
    inline_rate = rate(moved, statistics.median(inline_s))
    inline_ratio = statistics.median(p / u for p, u in zip(posts_s, inline_s, strict=True))
    # Each round's pair ran back to back, under the same load from the rest of the machine.
    ratio = statistics.median(p / u for p, u in zip(posts_s, upload_s, strict=True))
    summary.add(
        benchmark="artifacts",
        figure=f"artifact upload, {args.blobs} x {args.mib:g} MiB (median of {args.rounds})",
        value=f"{upload_rate:.1f} MiB/s",
        baseline=f"plain HTTP PUT {post_rate:.1f} MiB/s",
        ratio=f"{ratio:.0%}",
        target=f">= {TARGET:.0%}",
        met=ratio >= TARGET,
    )
    from django.conf import settings

    chunk = settings.EVERDICT_UPLOAD_CHUNK_BYTES
    above = peak - idle
    summary.add(
        benchmark="artifacts",
        figure=f"server RSS while receiving a {args.rss_mib} MiB artifact by PUT, above idle",
        value=f"{above / MIB:.1f} MiB",
        baseline=f"idle {idle / MIB:.0f} MiB; a chunk {chunk / MIB:.0f} MiB",
        ratio=f"{above / chunk:.1f} chunks",
        target="<= 2 chunks",
        met=above <= 2 * chunk,
    )
    stored_ratio = statistics.median(
        (p + d) / u for p, d, u in zip(posts_s, disk_s, upload_s, strict=True)
    )
    summary.notes.append(
        f"the plain PUT keeps nothing: with the same bytes also written to files on the "
        f"blob store's disk ({rate(moved, statistics.median(disk_s)):.0f} MiB/s alone), "
        f"the upload is {stored_ratio:.0%} of it"
    )
    summary.notes.append(
        f"the {args.rss_mib} MiB artifact took {rss_s:.2f} s "
        f"({rate(args.rss_mib * MIB, rss_s):.1f} MiB/s) on a server of its own"
    )
    total_mib = moved * args.rounds / MIB
    summary.notes.append(
        f"without raw_upload (put_blob, 1 MiB base64 chunks): {inline_rate:.1f} MiB/s, "
        f"{inline_ratio:.0%} of the plain PUT"
    )
    summary.notes.append(
        f"CPU per MiB uploaded by PUT: server {cpu['server'] / total_mib * 1000:.1f} ms, runner "
        f"{cpu['runner'] / total_mib * 1000:.1f} ms; in put_blob calls: server "
        f"{cpu['server_inline'] / total_mib * 1000:.1f} ms; per MiB PUT plainly: server "
        f"{cpu['server_post'] / total_mib * 1000:.1f} ms"
    )
    summary.notes.append(
        f"{chunks / (args.rounds * args.blobs):.1f} chunks per blob; the same "
        f"{args.blobs} blobs again (held already): {again_s * 1000:.0f} ms, "
        f"{again_chunks} chunks sent"
    )
    finish(summary, args)


if __name__ == "__main__":
    main()
