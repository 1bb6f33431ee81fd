"""The envelopes of the personal tools' replies: a tool answers with an object, so a list
travels under a key. The items are the apps' own reply models, as on the REST API."""

from __future__ import annotations

from accounts.replies import ApiKeyItem
from core.replies import Reply
from runners.replies import RunnerItem


class RunnerList(Reply):
    runners: list[RunnerItem]


class ApiKeyList(Reply):
    keys: list[ApiKeyItem]


class Revoked(Reply):
    revoked: bool
