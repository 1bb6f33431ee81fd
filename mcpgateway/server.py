"""The MCP server behind /mcp: one `MCPServer`, its tools and its Streamable HTTP app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette

from mcpgateway.artifact_tools import ARTIFACT_TOOLS
from mcpgateway.auth import EverdictTokenVerifier
from mcpgateway.blob_tools import BLOB_TOOLS
from mcpgateway.calls import guarded
from mcpgateway.case_trace_tools import CASE_TRACE_TOOLS
from mcpgateway.catalog_tools import CATALOG_TOOLS
from mcpgateway.fs_tools import FS_PERSONAL_TOOLS, FS_RUNNER_TOOLS
from mcpgateway.personal_tools import PERSONAL_TOOLS
from mcpgateway.review_tools import REVIEW_TOOLS
from mcpgateway.run_tools import RUN_TOOLS
from mcpgateway.runner_tools import RUNNER_TOOLS
from mcpgateway.search_tools import SEARCH_TOOLS
from mcpgateway.trace_tools import TRACE_TOOLS
from mcpgateway.verdict_tools import VERDICT_TOOLS

MCP_PATH = "/mcp"
# Room for the largest valid result (1 MiB output + 64 KiB stderr tail) even when JSON
# escaping inflates it; anything larger is refused with 413 before it is parsed.
MAX_REQUEST_BODY_BYTES = 8 * 1024 * 1024

INSTRUCTIONS = """\
Everdict runs evaluation suites on members' own machines.
Runner tools (a runner token, rnr_…): hello, lease_job, heartbeat_job, submit_job_result,
submit_job_results, fail_job, release_job, report_case_log; have_blobs, put_blob (the
artifacts of a case, uploaded in chunks before its result), begin_upload (a URL to PUT a
large one's raw bytes to), begin_uploads (the URLs of several); report_case_trace,
report_case_screen (a running case's trace and screen). A tool error whose structured
content says `retryable` is the server's passing trouble: send the call again.
Personal tools (a personal API key, evk_…): pair_runner, list_runners, revoke_runner,
list_api_keys, approve_device_pairing; start_run, get_run, list_results, list_runs,
compare_runs, rerun, cancel_run; regrade_run, set_verdict, withdraw_verdict (score stored
outputs again; a person's verdict on a case); get_case, get_artifact (a case whole, and the files it
left); get_case_trace (what the agent did, step by step); search_runs (a literal text in a run's or
a workspace's outputs, reasons and traces); get_review_queue, review_result (what needs a
person, and a person's pass, fail, confirm or note); list_harnesses (with how often people
agreed with each judge); push_catalog (harness and dataset
files pushed as one change: a new version only where the content changed)."""


def strict_tool(fn: Callable[..., Any]) -> Tool:
    """A tool that refuses an argument it does not take (a tool error naming it) instead of
    ignoring it: `start_run(repeat=3)` must not quietly run once. Its published input schema
    says so (`additionalProperties: false`). Runner tools stay lenient, so that a newer
    runner's optional argument never breaks an older server."""
    tool = Tool.from_function(fn)
    loose = tool.fn_metadata.arg_model
    config = {**loose.model_config, "extra": "forbid"}
    strict: type[ArgModelBase] = type(loose.__name__, (loose,), {"model_config": config})
    tool.fn_metadata.arg_model = strict
    tool.parameters = strict.model_json_schema(by_alias=True)
    return tool


def build_server() -> MCPServer:
    """Create the server with every tool; each tool checks which principal may call it."""
    server: MCPServer = MCPServer(
        "everdict",
        instructions=INSTRUCTIONS,
        token_verifier=EverdictTokenVerifier(),
        auth=AuthSettings(
            # Required by the SDK; no authorization server is served here, the bearer
            # tokens are issued by Everdict itself (pairing and the account page).
            issuer_url=AnyHttpUrl(settings.EVERDICT_PUBLIC_URL or "http://127.0.0.1:8000"),
            resource_server_url=None,
        ),
        tools=[
            strict_tool(guarded(fn))
            for fn in [
                *PERSONAL_TOOLS,
                *RUN_TOOLS,
                *VERDICT_TOOLS,
                *ARTIFACT_TOOLS,
                *FS_PERSONAL_TOOLS,
                *CASE_TRACE_TOOLS,
                *SEARCH_TOOLS,
                *REVIEW_TOOLS,
                *CATALOG_TOOLS,
            ]
        ],
    )
    for tool in [*RUNNER_TOOLS, *BLOB_TOOLS, *TRACE_TOOLS, *FS_RUNNER_TOOLS]:
        server.add_tool(guarded(tool))
    return server


def allowed_hosts() -> list[str]:
    """Django's ALLOWED_HOSTS, with the localhost defaults Django itself applies under DEBUG."""
    hosts = list(settings.ALLOWED_HOSTS)
    if not hosts and settings.DEBUG:
        hosts = [".localhost", "127.0.0.1", "[::1]"]
    return hosts


def transport_security(allowed_hosts: list[str]) -> TransportSecuritySettings:
    """The transport's Host/Origin check, derived from Django's ALLOWED_HOSTS.

    The SDK matches exact hosts and `host:*` port wildcards only; Django's own wildcards
    (`*`, `.example.com`) are checked by the gateway app with Django's rules instead, so
    the SDK's check is switched off for them.
    """
    if any(host == "*" or host.startswith(".") for host in allowed_hosts):
        return TransportSecuritySettings(enable_dns_rebinding_protection=False)
    hosts = [form for host in allowed_hosts for form in (host, f"{host}:*")]
    origins = [
        form
        for host in allowed_hosts
        for scheme in ("http", "https")
        for form in (f"{scheme}://{host}", f"{scheme}://{host}:*")
    ]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )


# How far past the long-poll window a silent call goes before the transport starts pinging.
PING_AFTER_WINDOW_S = 5.0


def quiet_long_polls() -> None:
    """Let a long-poll stay silent for its whole window.

    The SDK answers a call that stays silent past its ping interval (15 s, a module
    constant with no setting) with an event stream and a ping every interval, so each 55 s
    long-poll cost a stream commit and three pings beside its answer: most of what an idle
    runner costs the server. The window `hello` offers (EVERDICT_MAX_WAIT_MS) is kept under
    the idle timeout of the proxies in front, so a poll needs no ping to survive them; it
    answers as JSON within its window, and a hang-up still cancels it at once. A call that
    outlasts the window is pinged as before.
    """
    from mcp.server import _streamable_http_modern as modern

    interval = settings.EVERDICT_MAX_WAIT_MS / 1000 + PING_AFTER_WINDOW_S
    modern._SSE_PING_INTERVAL = max(modern._SSE_PING_INTERVAL, interval)


def build_app(server: MCPServer) -> Starlette:
    """The Streamable HTTP app. Stateless: any replica can answer any call."""
    quiet_long_polls()
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        # SSE answers (the default) let the transport notice a client that hung up and
        # cancel its call at once, so a parked long-poll never claims a job for nobody.
        json_response=False,
        max_request_body_size=MAX_REQUEST_BODY_BYTES,
        transport_security=transport_security(allowed_hosts()),
    )
