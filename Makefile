# Everdict — `make demo` for a first run, `make test` for the suite.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
# The first Python >= 3.11 on the PATH.
PYTHON ?= $(shell for p in python3.13 python3.12 python3.11 python3; do \
	command -v $$p >/dev/null 2>&1 && $$p -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null && { echo $$p; break; }; done)

.PHONY: install test lint docs screenshots test-sqlite test-postgres test-both demo serve bench browser-deps systemd-deps node-deps oidc-deps chart-deps docker-deps agent-deps clean

$(VENV)/.installed: pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python >= 3.11 is required"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# What a failed install of a test dependency does: with its REQUIRE_ variable set (CI: the
# tests would fail instead of skipping) it stops the build; otherwise its tests are skipped.
# $(call failed_install,VARIABLE,what could not be installed,which tests are skipped)
failed_install = case "$${$(1):-0}" in \
	0) echo "$(2) could not be installed: $(3) will be skipped";; \
	*) echo "$(2) could not be installed and $(1) is set"; exit 1;; esac

# Debian's chromium for the browser tests (never a downloaded browser build).
browser-deps:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null \
		&& command -v chromium >/dev/null; } \
		|| { $(call failed_install,REQUIRE_CHROMIUM,chromium,the browser tests); }

# Debian's systemd for `systemd-analyze verify` of the runner's service unit and the real
# `systemd-inhibit` (never run as init). CI sets REQUIRE_SYSTEMD: a failed install stops it.
systemd-deps:
	@{ command -v systemd-analyze >/dev/null 2>&1 && command -v systemd-inhibit >/dev/null 2>&1; } || { \
		echo "Installing Debian's systemd to check the runner's service unit"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq systemd >/dev/null \
		&& command -v systemd-analyze >/dev/null && command -v systemd-inhibit >/dev/null; } \
		|| { $(call failed_install,REQUIRE_SYSTEMD,systemd (systemd-analyze and systemd-inhibit),the service unit and inhibitor checks); }

# Debian's docker.io (dockerd, containerd, runc and the docker CLI) for the service-harness
# tests, and busybox-static, whose one static binary the tests' images are made of (`docker
# import` of a root holding it: no registry is reachable, nothing is ever pulled). `make test`
# runs the suites under .ci/with-dockerd, which starts dockerd when none answers and stops it
# after. On the project's machines (a Firecracker VM, root, cgroup v1) dockerd runs with its
# defaults: overlay2 over ext4, iptables through nftables.
docker-deps:
	@{ command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1 \
		&& dpkg -s busybox-static >/dev/null 2>&1; } || { \
		echo "Installing Debian's docker.io and busybox-static for the service-harness tests"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io busybox-static >/dev/null \
		&& command -v dockerd >/dev/null; } \
		|| { $(call failed_install,REQUIRE_DOCKER,Docker (docker.io),the container tests); }

# Node 22, the MCP Inspector and the MCP conformance suite, under var/node (not global), for
# the third-party MCP checks. The suite is pinned to a release of its 0.2 line, which checks
# the 2026-07-28 revision the SDK speaks by default and carries each revision's frozen
# requirements (0.1.16, npm's `latest`, stops at 2025-11-25).
MCP_CONFORMANCE_VERSION := 0.2.0-alpha.12
node-deps:
	@{ test -x var/node/node_modules/.bin/mcp-inspector && test -x var/node/node_modules/.bin/node; } || { \
		mkdir -p var/node && cd var/node && \
		( test -f package.json || echo '{"private": true}' > package.json ) && \
		npm install --loglevel=error --no-audit --no-fund node@22 @modelcontextprotocol/inspector@latest >/dev/null \
		&& test -x node_modules/.bin/mcp-inspector && test -x node_modules/.bin/node; } \
		|| { $(call failed_install,REQUIRE_INSPECTOR,the MCP Inspector,its test); }
	@grep -qs '"version": "$(MCP_CONFORMANCE_VERSION)"' var/node/node_modules/@modelcontextprotocol/conformance/package.json || { \
		mkdir -p var/node && cd var/node && \
		( test -f package.json || echo '{"private": true}' > package.json ) && \
		npm install --loglevel=error --no-audit --no-fund --save-exact @modelcontextprotocol/conformance@$(MCP_CONFORMANCE_VERSION) >/dev/null \
		&& test -x node_modules/.bin/conformance; } \
		|| { $(call failed_install,REQUIRE_MCP_CONFORMANCE,the MCP conformance suite,its test); }

# The OpenID provider the sign-in tests start (npm's oidc-provider, under var/node). Unlike
# node-deps a failed install fails: CI sets REQUIRE_OIDC and must not pass without it.
# 8.8.1: neither 8.x nor 9.x declares engines, but 9.x warns on start that it wants Node 22,
# while 8.x supports Node >= 18, so it runs on the machine's Node 20 as published.
OIDC_PROVIDER_VERSION := 8.8.1
oidc-deps:
	@grep -qs '"version": "$(OIDC_PROVIDER_VERSION)"' var/node/node_modules/oidc-provider/package.json || { \
		mkdir -p var/node && cd var/node && \
		( test -f package.json || echo '{"private": true}' > package.json ) && \
		npm install --loglevel=error --no-audit --no-fund --save-exact oidc-provider@$(OIDC_PROVIDER_VERSION); }

# The agent CLIs the tests run for real (tests/agentclis): the pinned Claude Code and Codex
# from npm under var/node, their versions read from runnercli/protocol/agents.py so they are
# written once; their native binaries come as the packages' platform dependencies. Skipped when
# the pinned versions are there. Claude Code's sandbox (the `worktree` permissions) runs its
# commands in Debian's bubblewrap.
AGENT_CLIS_CHECK = $(PY) -c 'import sys; from runnercli.protocol.agents import installed_problem; \
	why = installed_problem("var/node"); why and print(why); sys.exit(why is not None)'
agent-deps: install
	@$(AGENT_CLIS_CHECK) >/dev/null || { \
		specs="$$($(PY) -c 'from runnercli.protocol.agents import npm_specs; print(*npm_specs())')" && \
		echo "Installing $$specs under var/node" && mkdir -p var/node && \
		( cd var/node && ( test -f package.json || echo '{"private": true}' > package.json ) && \
		npm install --loglevel=error --no-audit --no-fund --save-exact $$specs >/dev/null ) && \
		$(AGENT_CLIS_CHECK); } \
		|| { $(call failed_install,REQUIRE_AGENT_CLIS,the pinned agent CLIs,the real-CLI tests); }
	@command -v bwrap >/dev/null 2>&1 || { \
		echo "Installing Debian's bubblewrap for Claude Code's sandbox"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null \
		&& command -v bwrap >/dev/null; } \
		|| { $(call failed_install,REQUIRE_AGENT_CLIS,bubblewrap,the real-CLI tests); }

# Chart.js for the run page's score distribution and a harness's history, installed from npm
# under var/node and copied into the app's static files (served by the app itself: never a
# CDN). The copy is committed, so `make demo` needs no npm; this step refreshes it and fails
# loudly when npm or the expected file is missing (CI runs it).
CHARTJS_VERSION := 4.5.1
CHARTJS_STATIC := scorecards/static/scorecards/vendor/chart.umd.min.js
chart-deps:
	@grep -qs '"version": "$(CHARTJS_VERSION)"' var/node/node_modules/chart.js/package.json || { \
		mkdir -p var/node && cd var/node && \
		( test -f package.json || echo '{"private": true}' > package.json ) && \
		npm install --loglevel=error --no-audit --no-fund --save-exact chart.js@$(CHARTJS_VERSION); }
	@test -s var/node/node_modules/chart.js/dist/chart.umd.min.js || { \
		echo "chart.js $(CHARTJS_VERSION) has no dist/chart.umd.min.js"; exit 1; }
	@mkdir -p $(dir $(CHARTJS_STATIC))
	@cp var/node/node_modules/chart.js/dist/chart.umd.min.js $(CHARTJS_STATIC)
	@cp var/node/node_modules/chart.js/LICENSE.md $(dir $(CHARTJS_STATIC))chart.js-LICENSE.md
	@echo "Chart.js $(CHARTJS_VERSION) vendored into $(CHARTJS_STATIC)"

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mkdocs build --strict --quiet

# The documentation site, from docs/ into var/site (open var/site/index.html).
docs: install
	$(VENV)/bin/mkdocs build --strict

# The docs' pictures, taken again from the real pages by the browser tests that take them.
screenshots: install browser-deps agent-deps
	EVERDICT_UPDATE_SCREENSHOTS=1 $(VENV)/bin/pytest -q tests/browser/test_run_page.py \
		tests/browser/test_agent_harness.py

# Whether PostgreSQL answers at TEST_DATABASE_URL.
POSTGRES_ANSWERS = $(PY) -c "import psycopg; psycopg.connect('$(TEST_DATABASE_URL)', connect_timeout=3).close()" 2>/dev/null
# Which tests each pass runs (pytest -m): the PostgreSQL pass leaves out what runs the same on
# every engine (`once`), which the SQLite pass runs.
SQLITE_MARKS ?=
POSTGRES_MARKS ?= not once

test-sqlite: install
	$(VENV)/bin/pytest $(if $(SQLITE_MARKS),-m '$(SQLITE_MARKS)')

test-postgres: install
	@if $(POSTGRES_ANSWERS); then \
		DATABASE_URL='$(TEST_DATABASE_URL)' EVERDICT_TEST_DB_SUFFIX=_pg $(VENV)/bin/pytest -m '$(POSTGRES_MARKS)'; \
	elif [ -n "$$REQUIRE_POSTGRES" ]; then \
		echo "PostgreSQL at $(TEST_DATABASE_URL) is required (REQUIRE_POSTGRES is set) but unreachable"; exit 1; \
	else \
		echo "PostgreSQL at $(TEST_DATABASE_URL) is unreachable: skipping the PostgreSQL pass"; \
	fi

# The suites run with a Docker daemon answering (.ci/with-dockerd starts one when none does,
# and stops what it started).
test: install browser-deps systemd-deps node-deps oidc-deps chart-deps docker-deps agent-deps lint
	.ci/with-dockerd $(MAKE) --no-print-directory test-both

# The two passes side by side: most of a pass is spent waiting on the servers, runners and
# agents it starts, so they share the cores well. The `once` tests that drive chromium
# (`once_on_postgres`) go to the PostgreSQL pass, so that the two passes take about as long.
# The PostgreSQL pass writes to a log, shown whole when the SQLite pass is done; either
# failing fails the target. Without PostgreSQL the SQLite pass runs every test.
test-both: install
	@if $(POSTGRES_ANSWERS); then \
		$(MAKE) --no-print-directory test-postgres POSTGRES_MARKS='not once or once_on_postgres' \
			> var/test-postgres.log 2>&1 & postgres=$$!; \
		$(MAKE) --no-print-directory test-sqlite SQLITE_MARKS='not once_on_postgres'; sqlite=$$?; \
		wait $$postgres; pg=$$?; \
		echo "=== the PostgreSQL pass (var/test-postgres.log) ==="; cat var/test-postgres.log; \
		echo "SQLite pass: exit $$sqlite; PostgreSQL pass: exit $$pg"; \
		test $$sqlite -eq 0 -a $$pg -eq 0; \
	else \
		$(MAKE) --no-print-directory test-postgres && $(MAKE) --no-print-directory test-sqlite; \
	fi

demo: install
	$(PY) -m everdict.demo

serve: install
	$(PY) manage.py migrate --noinput
	$(VENV)/bin/daphne -b 127.0.0.1 -p 8000 everdict.asgi:application

bench: install
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) var build *.egg-info
