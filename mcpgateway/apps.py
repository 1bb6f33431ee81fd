from __future__ import annotations

from django.apps import AppConfig


class McpGatewayConfig(AppConfig):
    name = "mcpgateway"
    verbose_name = "MCP gateway"
