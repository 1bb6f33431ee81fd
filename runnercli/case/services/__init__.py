"""Service harnesses: the containers and processes a harness's cases talk to, started once per
harness version (or per case), kept warm, watched, and stopped (protocol 3).

- `topology` — the services of one version or one case, started and stopped together;
- `registry` — the runner's topologies: single-flight starts, warm while used, idle stop;
- `containers` / `engine` — containers through the Docker Engine API (`everdict[docker]`);
- `processes` / `places` — process services, where they run and what they are given;
- `probes` — readiness; `daemon` / `presence` — whether Docker answers (capability `docker`);
- `records` / `inventory` — what runs, found from outside: `services list | stop | prune`
  and the leftovers of a killed runner, removed when `run` starts.
"""

from __future__ import annotations

from runnercli.case.services.errors import NoDocker, ServiceError
from runnercli.case.services.inventory import Found, Inventory
from runnercli.case.services.places import Where
from runnercli.case.services.presence import DockerPresence
from runnercli.case.services.records import Records
from runnercli.case.services.registry import Topologies
from runnercli.case.services.runtime import Runtime
from runnercli.case.services.topology import Endpoint, Topology

__all__ = [
    "DockerPresence",
    "Endpoint",
    "Found",
    "Inventory",
    "NoDocker",
    "Records",
    "Runtime",
    "ServiceError",
    "Topologies",
    "Topology",
    "Where",
]
