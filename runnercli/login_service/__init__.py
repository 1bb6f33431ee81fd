"""The runner as the member's login service: unit and agent text (`units`), the machine's
paths and programs (`host`), systemd (`systemd`) and launchd (`launchd`), and installing,
removing and inspecting it (`manager`)."""

from __future__ import annotations

from runnercli.login_service.host import Host, Outcome, ServicePaths
from runnercli.login_service.launchd import LaunchdAgent
from runnercli.login_service.manager import (
    Backend,
    Report,
    ServiceStatus,
    backend_for,
    install,
    service_status,
    status_lines,
    uninstall,
)
from runnercli.login_service.systemd import SystemdUser
from runnercli.login_service.units import (
    LoginServiceError,
    LoginServiceSpec,
    login_service_spec,
    render_launchd_plist,
    render_systemd_unit,
)

__all__ = [
    "Backend",
    "Host",
    "LaunchdAgent",
    "LoginServiceError",
    "LoginServiceSpec",
    "Outcome",
    "Report",
    "ServicePaths",
    "ServiceStatus",
    "SystemdUser",
    "backend_for",
    "install",
    "login_service_spec",
    "render_launchd_plist",
    "render_systemd_unit",
    "service_status",
    "status_lines",
    "uninstall",
]
