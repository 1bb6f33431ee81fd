"""The runner as the member's login service: unit and agent text (`units`), the machine's
paths and programs (`host`), systemd (`systemd`) and launchd (`launchd`), and installing,
removing and inspecting it (`manager`)."""

from __future__ import annotations

from runnercli.service.host import Host, Outcome, ServicePaths
from runnercli.service.launchd import LaunchdAgent
from runnercli.service.manager import (
    Backend,
    Report,
    ServiceStatus,
    backend_for,
    install,
    service_status,
    status_lines,
    uninstall,
)
from runnercli.service.systemd import SystemdUser
from runnercli.service.units import (
    ServiceError,
    ServiceSpec,
    render_launchd_plist,
    render_systemd_unit,
    service_spec,
)

__all__ = [
    "Backend",
    "Host",
    "LaunchdAgent",
    "Outcome",
    "Report",
    "ServiceError",
    "ServicePaths",
    "ServiceSpec",
    "ServiceStatus",
    "SystemdUser",
    "backend_for",
    "install",
    "render_launchd_plist",
    "render_systemd_unit",
    "service_spec",
    "service_status",
    "status_lines",
    "uninstall",
]
