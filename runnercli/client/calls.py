"""Typed calls to the runner tools, each reply parsed into the wire models and each failure
raised as what to do next (`runnercli.client.errors`).

One session (`runnercli.client.mcp_session`) serves every lease worker of a `run`; a session
that died is replaced on the next call.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, TypeVar

import httpx2
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS
from pydantic import BaseModel, ValidationError

from runnercli.client.errors import (
    RevokedError,
    RunnerError,
    ServerBusy,
    ServerUnavailable,
    ToolCallError,
    leaves,
)
from runnercli.client.grants import LeaseBatch, parse_lease_reply
from runnercli.client.mcp_session import McpSession
from runnercli.client.replies import failure_of, json_of, text_of
from runnercli.config import mcp_url
from runnercli.protocol import (
    MAX_STATUS_CHARS,
    MAX_WAIT_MS,
    PROTOCOL_VERSION,
    RUNNER_CONTEXT,
    Ack,
    BatchAck,
    CaseResult,
    HeartbeatAck,
    Hello,
    Limits,
    ResultReport,
)
from runnercli.protocol.features import RUNNER_FEATURES

# Seconds a reply may take beyond the time the server was asked to wait.
# The SDK's per-call timeout fires first: it fails one call, where the HTTP client's read
# timeout would end the whole session.
REPLY_MARGIN_S = 30.0
CALL_TIMEOUT_S = 20.0
CONNECT_TIMEOUT_S = 10.0

ModelT = TypeVar("ModelT", bound=BaseModel)

# The SDK logs a transport failure as an error with a traceback; the runner reports it on its
# status line instead, once, in words.
for _name in ("mcp", "httpx2", "httpcore"):
    logging.getLogger(_name).setLevel(logging.CRITICAL)


class RunnerClient:
    """The runner tools over one MCP session, with replies parsed into the wire models."""

    def __init__(self, server: str, token: str, *, max_wait_ms: int = MAX_WAIT_MS, slots: int = 1):
        self.url = mcp_url(server)
        # The site the MCP endpoint is on: raw uploads go to paths beside it.
        self.site = self.url.removesuffix("/mcp")
        self._headers = {"Authorization": f"Bearer {token}"}
        self._timeout = httpx2.Timeout(
            CONNECT_TIMEOUT_S, read=max_wait_ms / 1000 + REPLY_MARGIN_S, write=30.0, pool=30.0
        )
        # Each slot may hold a long-poll, a heartbeat, a log push and a result at once.
        self._limits = httpx2.Limits(max_connections=max(20, slots * 4 + 4))
        self._session: McpSession | None = None
        self._lock = asyncio.Lock()
        self._unauthorized = False
        self._last_http_error: str | None = None
        # What the server accepts per call, as its `hello` said (the protocol's until then).
        self.limits = Limits()
        # What this runner can do beyond protocol 2, said in every hello and lease.
        self.features: list[str] = list(RUNNER_FEATURES)
        # What the server does beyond the calls, as its `hello` said (nothing until then).
        self.server_features: list[str] = []
        self._raw: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> RunnerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._raw is not None:
            await self._raw.aclose()
            self._raw = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def hello(
        self, *, capabilities: list[str], status: str = "", paused_reason: str | None = None
    ) -> Hello:
        """`paused_reason`: why this runner leases nothing of its own accord ("on battery"),
        "" when it leases again; None leaves what the server has."""
        args: dict[str, object] = {
            "protocol": PROTOCOL_VERSION,
            "capabilities": capabilities,
            "status": _st(status),
            "features": self.features,
        }
        if paused_reason is not None:
            args["paused_reason"] = paused_reason[:100]
        hello = await self.call("hello", args, Hello)
        self.limits = hello.limits
        self.server_features = list(hello.features)
        if self._raw is None and self.offers("raw_upload"):
            # Made now rather than at the first chunk: loading the TLS trust store takes
            # tens of milliseconds of CPU, which the first upload would wait for.
            self._raw = self._raw_client()
        return hello

    def offers(self, feature: str) -> bool:
        """Whether this runner and the server both do `feature` (`raw_upload`)."""
        return feature in self.features and feature in self.server_features

    def _raw_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            base_url=self.site,
            headers=self._headers,
            timeout=self._timeout,
            limits=self._limits,
        )

    async def raw(
        self, method: str, path: str, *, content: bytes = b"", headers: dict[str, str] | None = None
    ) -> httpx2.Response:
        """A plain HTTP request to a path of the site with this runner's token (a raw
        upload's chunk); ServerUnavailable when it gets no answer."""
        if self._raw is None:
            self._raw = self._raw_client()
        try:
            return await self._raw.request(
                method, path, content=content or None, headers=headers or {}
            )
        except httpx2.HTTPError as exc:
            raise ServerUnavailable(f"{self.site}: {type(exc).__name__} {exc}") from exc

    async def lease_job(
        self, *, wait_ms: int, capabilities: list[str], status: str, max_jobs: int | None = None
    ) -> LeaseBatch:
        """Lease jobs, within the server's limits whatever is asked; each grant is read on
        its own, and those this runner cannot read come back in `unparsed`."""
        limits = self.limits
        wait_ms = max(0, min(wait_ms, limits.max_wait_ms))
        args: dict[str, object] = {
            "protocol": PROTOCOL_VERSION,
            "wait_ms": wait_ms,
            "capabilities": capabilities,
            "status": _st(status),
            "features": self.features,
        }
        if max_jobs is not None:
            args["max_jobs"] = max(1, min(max_jobs, limits.max_jobs_per_lease))
        payload = await self._call_raw("lease_job", args, wait_s=wait_ms / 1000)
        try:
            return parse_lease_reply(payload)
        except ValueError as exc:
            raise ToolCallError(f"lease_job answered an unexpected shape: {exc}") from exc

    async def heartbeat_job(self, *, job_id: int, lease_epoch: int, status: str) -> HeartbeatAck:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "status": _st(status)}
        return await self.call("heartbeat_job", args, HeartbeatAck)

    async def submit_job_result(self, *, job_id: int, lease_epoch: int, result: CaseResult) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "result": result.model_dump()}
        return await self.call("submit_job_result", args, Ack)

    async def submit_job_results(self, reports: list[ResultReport]) -> list[Ack]:
        """Report several results in one call; one ack per report, in the order sent."""
        args = {"results": [report.model_dump() for report in reports]}
        reply = await self.call("submit_job_results", args, BatchAck)
        if len(reply.acks) != len(reports):
            raise ToolCallError(
                f"submit_job_results answered {len(reply.acks)} acks for {len(reports)} results"
            )
        return reply.acks

    async def release_job(
        self, *, job_id: int, lease_epoch: int, reason: str, paused_until: str | None = None
    ) -> Ack:
        """Hand the job back without spending an attempt; `paused_until` (ISO-8601) pauses
        this runner until then."""
        args: dict[str, object] = {"job_id": job_id, "lease_epoch": lease_epoch, "reason": reason}
        if paused_until is not None:
            args["paused_until"] = paused_until
        return await self.call("release_job", args, Ack)

    async def fail_job(
        self, *, job_id: int, lease_epoch: int, message: str, retryable: bool = False
    ) -> Ack:
        args = {
            "job_id": job_id,
            "lease_epoch": lease_epoch,
            "message": message,
            "retryable": retryable,
        }
        return await self.call("fail_job", args, Ack)

    async def report_case_log(self, *, job_id: int, lease_epoch: int, lines: list[str]) -> Ack:
        args = {"job_id": job_id, "lease_epoch": lease_epoch, "lines": lines}
        return await self.call("report_case_log", args, Ack)

    async def call(
        self, tool: str, args: dict[str, Any], model: type[ModelT], wait_s: float = 0.0
    ) -> ModelT:
        """Call a runner tool and parse its reply as `model` (the tools of the case's world
        have their own modules that call through here)."""
        payload = await self._call_raw(tool, args, wait_s)
        try:
            # Parsed as the runner receives it: what it must refuse (an environment key), it
            # refuses itself, naming it, rather than failing to read the reply.
            return model.model_validate(payload, context=RUNNER_CONTEXT)
        except ValidationError as exc:
            raise ToolCallError(f"{tool} answered an unexpected shape: {exc}") from exc

    async def _call_raw(self, tool: str, args: dict[str, Any], wait_s: float = 0.0) -> Any:
        """Call a tool; return its structured result, or raise by what to do next."""
        session = await self._connected()
        client = session.client
        if client is None:
            raise ServerUnavailable(self._describe(session.error))
        try:
            result = await client.call_tool(
                tool, args, read_timeout_seconds=wait_s + CALL_TIMEOUT_S
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                session.dead = True
            raise self._classify(exc) from exc
        except Exception as exc:
            # A failure below the protocol (reset, timeout, a closed stream): start over with
            # a fresh session on the next call.
            session.dead = True
            raise self._classify(exc) from exc
        if result.is_error:
            failure = failure_of(result)
            if failure is not None and failure.retryable:
                raise ServerBusy(failure)
            raise ToolCallError(text_of(result) or f"{tool} failed")
        payload = result.structured_content
        if payload is None:
            payload = json_of(result)
        return payload

    async def _connected(self) -> McpSession:
        async with self._lock:
            if self._session is not None and not self._session.dead:
                return self._session
            if self._session is not None:
                await self._session.close()
            session = McpSession(self.url, self._headers, self._timeout, self._limits)
            session.response_hooks.append(self._on_response)
            self._session = session
            await session.open()
            if session.client is None:
                self._session = None
                raise self._classify(session.error)
            return session

    async def _on_response(self, response: httpx2.Response) -> None:
        # The SDK turns any non-2xx reply into a generic JSON-RPC error; the status is kept
        # here so a revoked token (401) is told apart from a failing server.
        if response.status_code == 401:
            self._unauthorized = True
        elif response.status_code >= 400:
            self._last_http_error = f"HTTP {response.status_code}"
        else:
            self._last_http_error = None

    def _classify(self, exc: BaseException | None) -> RunnerError:
        if self._unauthorized:
            return RevokedError("this runner was revoked — pair again")
        for leaf in leaves(exc) if exc is not None else []:
            if isinstance(leaf, MCPError) and leaf.code == INVALID_PARAMS:
                return ToolCallError(leaf.message)
        return ServerUnavailable(self._describe(exc))

    def _describe(self, exc: BaseException | None) -> str:
        reasons: list[str] = []
        for leaf in leaves(exc) if exc is not None else []:
            text = str(leaf) or type(leaf).__name__
            if isinstance(leaf, httpx2.ConnectError):
                text = f"connection failed ({text})"
            elif isinstance(leaf, httpx2.TimeoutException):
                text = f"timed out ({type(leaf).__name__})"
            if text not in reasons:
                reasons.append(text)
        if self._last_http_error:
            reasons.insert(0, f"server answered {self._last_http_error}")
        return f"{self.url}: {'; '.join(reasons) or 'no answer'}"


def _st(status: str) -> str:
    return status[:MAX_STATUS_CHARS]
