"""The soak's chaos: what strikes the cluster while the jobs run, one event at a time.

Every event is recorded (`ChaosEvent`) with the runner it struck, so that the record check
can judge the attempts it cut off.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cluster import Cluster, RunnerProcess
from soak_record import ChaosEvent

if TYPE_CHECKING:
    from soak_report import Report, SoakConfig

# How long a stopped runner's calls sent before the stop get to settle, and how long a
# stop waits for a runner still executing a case (`Chaos._stop_holding`).
SETTLE_S = 1.0
STOP_HOLDING_S = 20.0

KINDS = (
    "kill_runner",
    "pause_runner",
    "sleep_runner",
    "restart_replica",
    "restart_scheduler",
    "revoke_runner",
)
WEIGHTS = {
    "kill_runner": 4,
    "pause_runner": 2,
    "sleep_runner": 2,
    "restart_replica": 2,
    "restart_scheduler": 2,
    "revoke_runner": 1,
}


class Chaos:
    """The chaos half of `Soak`: it strikes the cluster `Soak` started."""

    config: SoakConfig
    rng: random.Random
    report: Report
    cluster: Cluster | None
    _done: threading.Event
    _plan_done: threading.Event
    _replacements: int

    def _say(self, message: str) -> None:
        raise NotImplementedError

    def _api(self, method: str, path: str, body: Any = None, replica: int = 0) -> Any:
        raise NotImplementedError

    def _pair(self, label: str) -> tuple[int, str]:
        raise NotImplementedError

    def _scrape(self, index: int) -> None:
        raise NotImplementedError

    def _chaos(self) -> None:
        from django.db import connection

        config = self.config
        plan = list(config.plan) if config.plan is not None else self.rng.sample(KINDS, len(KINDS))
        started = time.monotonic()
        try:
            while not self._done.is_set():
                if config.plan is not None and not plan:
                    self._plan_done.set()
                    return
                if config.duration_s is not None and time.monotonic() - started > config.duration_s:
                    return
                if self._done.wait(self.rng.uniform(*config.chaos_gap_s)):
                    return
                kind = plan.pop(0) if plan else self._random_kind()
                getattr(self, f"_{kind}")()
        except Exception as exc:
            self.report.violations.append(f"the chaos itself failed: {exc!r}")
        finally:
            self._plan_done.set()
            connection.close()

    def _random_kind(self) -> str:
        kinds = list(WEIGHTS)
        return self.rng.choices(kinds, weights=[WEIGHTS[k] for k in kinds])[0]

    def _event(self, kind: str, target: str, **fields: Any) -> ChaosEvent:
        """Record an event, struck now (or `at=` when it was)."""
        fields.setdefault("at", time.time())
        event = ChaosEvent(kind=kind, target=target, **fields)
        self.report.events.append(event)
        self._say(f"{kind} {target}")
        return event

    def _pick_runner(self) -> RunnerProcess:
        """A running runner, one of those holding the most leases (the chaos cuts work short)."""
        from django.db.models import Count

        from runners.models import JobStatus, RunnerJob

        assert self.cluster is not None
        deadline = time.monotonic() + 10
        while True:
            live = [
                r
                for r in self.cluster.live_runners()
                if not r.down and r.proc is not None and r.proc.popen.poll() is None
            ]
            held = dict(
                RunnerJob.objects.filter(
                    status=JobStatus.LEASED, leased_by_id__in=[r.runner_id for r in live]
                )
                .values_list("leased_by_id")
                .annotate(n=Count("pk"))
                .order_by()
            )
            most = max((held.get(r.runner_id, 0) for r in live), default=0)
            if most or time.monotonic() > deadline or self._done.is_set():
                return self.rng.choice([r for r in live if held.get(r.runner_id, 0) == most])
            time.sleep(0.1)

    def _kill_runner(self) -> None:
        assert self.cluster is not None
        runner = self._pick_runner()
        self._event("kill_runner", f"runner {runner.runner_id}", runner_id=runner.runner_id)
        self.cluster.kill_runner(runner)
        time.sleep(self.rng.uniform(0.3, 1.5))
        self.cluster.start_runner(runner)  # the same token: the same runner comes back

    def _pause_runner(self) -> None:
        self._stop_runner(
            "pause_runner", _runner_group, self.config.pause_s, "stopped {seconds:.1f}s"
        )

    def _sleep_runner(self) -> None:
        """A laptop sleeps: the runner and the cases it runs stop together, past the lease."""
        self._stop_runner(
            "sleep_runner",
            _runner_and_cases,
            self.config.sleep_s,
            "asleep {seconds:.1f}s with {cases} case(s)",
        )

    def _stop_runner(
        self,
        kind: str,
        groups_of: Callable[[RunnerProcess], set[int]],
        seconds: float,
        note: str,
    ) -> None:
        """Stop a runner (its process groups, `groups_of` it) for `seconds` while it holds a
        case still executing. A lease whose result was on its way at the stop is settled
        meanwhile: a runner left holding only such leases is let go and another picked (a
        loaded machine answers late). After STOP_HOLDING_S, the last one picked stays. The
        event's note is `note` with the `seconds` stopped and the `cases` stopped with it."""
        deadline = time.monotonic() + STOP_HOLDING_S
        while True:
            runner = self._pick_runner()
            groups = groups_of(runner)
            at = time.time()
            _signal_groups(groups, signal.SIGSTOP)
            time.sleep(SETTLE_S)
            if (
                self._executing(runner.runner_id)
                or time.monotonic() > deadline
                or self._done.is_set()
            ):
                break
            _signal_groups(groups, signal.SIGCONT)
            time.sleep(0.1)
        event = self._event(kind, f"runner {runner.runner_id}", at=at, runner_id=runner.runner_id)
        time.sleep(max(0.0, seconds - (time.time() - at)))
        _signal_groups(groups, signal.SIGCONT)
        event.until = time.time()
        event.note = note.format(seconds=event.until - at, cases=len(groups) - 1)

    def _executing(self, runner_id: int) -> bool:
        """Whether the runner holds an attempt still executing on the server."""
        from runners.models import AttemptStatus, JobAttempt

        return JobAttempt.objects.filter(
            runner_id=runner_id, status=AttemptStatus.EXECUTING
        ).exists()

    def _restart_replica(self) -> None:
        assert self.cluster is not None
        index = self.rng.randrange(len(self.cluster.replicas))
        self._scrape(index)  # its counters die with it
        event = self._event("restart_replica", f"replica {index}")
        self.cluster.kill_replica(index)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.cluster.start_replica(index)
        event.note = f"down {time.time() - event.at:.1f}s"

    def _restart_scheduler(self) -> None:
        assert self.cluster is not None
        index = self.rng.randrange(len(self.cluster.schedulers))
        self._event("restart_scheduler", f"scheduler {index}")
        self.cluster.kill_scheduler(index)
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.cluster.start_scheduler(index)

    def _revoke_runner(self) -> None:
        assert self.cluster is not None
        runner = self._pick_runner()
        runner.retired = True
        event = self._event(
            "revoke_runner", f"runner {runner.runner_id}", runner_id=runner.runner_id
        )
        self._api("DELETE", f"/api/runners/{runner.runner_id}")
        assert runner.proc is not None
        code = runner.proc.wait(self.config.wait_ms / 1000 + 15)
        if code != 3:
            self.report.violations.append(
                f"revoked runner {runner.runner_id} did not exit with 3 (asking to pair "
                f"again) but {code}: see {runner.proc.log}"
            )
            runner.proc.stop(signal.SIGKILL)
        event.note = f"its process exited with {code}"
        # A newly paired machine takes its place, on the same replica.
        self._replacements += 1
        label = f"{runner.label}-new{self._replacements}"
        runner_id, token = self._pair(label)
        self.cluster.add_runner(
            runner_id=runner_id,
            token=token,
            label=label,
            server=runner.server,
            max_concurrent=runner.max_concurrent,
            wait_ms=runner.wait_ms,
        )


def _runner_group(runner: RunnerProcess) -> set[int]:
    """The runner's process group (its cases, each leading a group of its own, run on)."""
    assert runner.proc is not None
    return {runner.proc.pid}


def _runner_and_cases(runner: RunnerProcess) -> set[int]:
    """The runner's process group and its cases' (each case leads a group of its own)."""
    import psutil

    assert runner.proc is not None
    groups = {runner.proc.pid}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(runner.proc.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error, OSError):
                groups.add(os.getpgid(child.pid))
    return groups


def _signal_groups(groups: set[int], sig: int) -> None:
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
