"""`submit --here`: the CI machine itself runs the cases.

An ephemeral runner is paired with the API key (label `ci-<host>`), the run is pinned to it,
the runner's loop (`runnercli.commands.loop`) runs in this process — consent opted out: it
only exists for this run; signals are `submit`'s, they cancel the run — and the runner is
revoked on the way out.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys

from runnercli.case.consent.settings import ConsentSettings
from runnercli.client import RunnerClient
from runnercli.client.personal import PersonalApi
from runnercli.commands.loop import RunnerLoop
from runnercli.config import detected_capabilities, os_name
from runnercli.console.status import StatusLine
from runnercli.options import RunOptions
from runnercli.submit.options import Options
from runnercli.submit.run import Follow, announce, say, start_args, verdict
from runnercli.tasks import within

HERE_WAIT_MS = 10_000


async def run_here(api: PersonalApi, options: Options) -> int:
    label = f"ci-{socket.gethostname()}"[:100]
    capabilities = detected_capabilities()
    paired = await api.call("pair_runner", label=label, os=os_name(), capabilities=capabilities)
    say(f"paired ephemeral runner {paired['id']} “{label}” for this run")
    try:
        run = await api.call("start_run", **start_args(options, f"self:{paired['id']}"))
        announce(options, run)
        runner_options = RunOptions(
            capabilities=capabilities,
            max_concurrent=options.concurrency,
            wait_ms=HERE_WAIT_MS,
            # The member asked for this run here and now: on battery too.
            on_battery="run",
        )
        client = RunnerClient(
            options.server, paired["token"], max_wait_ms=HERE_WAIT_MS, slots=options.concurrency
        )
        async with client:
            with StatusLine(stream=sys.stderr, live=False) as status:
                # Its own run, just started by this command: nothing to ask about.
                consent = ConsentSettings(allow_any=True)
                pull = RunnerLoop(client, runner_options, status, consent=consent)
                task = asyncio.create_task(pull.run())
                try:
                    finished = await Follow(api, options, run["id"]).wait(watch=task)
                finally:
                    pull.request_stop()
                    pull.request_stop()  # the second hands back what still runs
                    with contextlib.suppress(Exception):
                        await within(task, 30)
        return await verdict(api, options, finished)
    finally:
        await api.call("revoke_runner", runner_id=paired["id"])
        say(f"revoked runner {paired['id']}")
