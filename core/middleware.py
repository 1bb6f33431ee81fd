"""Django's middleware, run on the event loop under ASGI.

`MiddlewareMixin.__acall__` sends each hook of each middleware to a thread and back
(`sync_to_async`): with the stock stack that is a dozen hand-offs a request, most of a
`/healthz` and of a page's file request's time, for hooks that only read headers, set lazy
attributes or add response headers. These run the hooks that do no I/O on the loop and send
a hook to a thread only when it will touch the database: a session that was changed and must
be saved, messages to store, a form's CSRF check (which reads the body). Under WSGI (and the
test client) they are Django's own, unchanged.

A hook that touched the database on the loop would raise `SynchronousOnlyOperation`, never
go silently wrong.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.contrib.auth import middleware as auth
from django.contrib.messages import middleware as messages
from django.contrib.sessions import middleware as sessions
from django.http import HttpRequest, HttpResponseBase
from django.middleware import clickjacking, common, csrf, security

SAFE_METHODS = ("GET", "HEAD", "OPTIONS", "TRACE")


async def hook(call: Any, in_thread: bool, *args: Any) -> Any:
    """A middleware hook's answer: in the request's thread for sync code (as Django runs
    every hook), or on the loop."""
    if in_thread:
        return await sync_to_async(call, thread_sensitive=True)(*args)
    return call(*args)


class OnTheLoop:
    """`MiddlewareMixin.__acall__` with its hooks called on the loop (mix in first)."""

    get_response: Any

    async def __acall__(self, request: HttpRequest) -> HttpResponseBase:
        response = None
        if (process_request := getattr(self, "process_request", None)) is not None:
            in_thread = self.request_needs_thread(request)
            response = await hook(process_request, in_thread, request)
        response = response or await self.get_response(request)
        if (process_response := getattr(self, "process_response", None)) is not None:
            in_thread = self.response_needs_thread(request, response)
            response = await hook(process_response, in_thread, request, response)
        return response

    def request_needs_thread(self, request: HttpRequest) -> bool:
        """Whether `process_request` will do I/O (then it runs in the request's thread for
        sync code, as Django runs it)."""
        return False

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        """Whether `process_response` will do I/O for this request."""
        return False


class SecurityMiddleware(OnTheLoop, security.SecurityMiddleware):
    pass


class SessionMiddleware(OnTheLoop, sessions.SessionMiddleware):
    """Reading the cookie is lazy; the response's hook saves a changed session."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        session = getattr(request, "session", None)
        return session is not None and (session.modified or settings.SESSION_SAVE_EVERY_REQUEST)


class CommonMiddleware(OnTheLoop, common.CommonMiddleware):
    pass


class CsrfViewMiddleware(OnTheLoop, csrf.CsrfViewMiddleware):
    """The cookie's secret is read and set on the loop, and a safe method's or an exempt
    view's check made there; a form's check reads the body, in the request's thread."""

    def __init__(self, get_response: Any) -> None:
        super().__init__(get_response)
        if iscoroutinefunction(get_response):
            # Django adapts `process_view` to the handler's mode as it loads the stack.
            self.process_view = self._process_view_async  # type: ignore[method-assign,assignment]

    async def _process_view_async(
        self, request: HttpRequest, callback: Any, args: Any, kwargs: Any
    ) -> HttpResponseBase | None:
        on_loop = request.method in SAFE_METHODS or getattr(callback, "csrf_exempt", False)
        return await hook(super().process_view, not on_loop, request, callback, args, kwargs)

    def request_needs_thread(self, request: HttpRequest) -> bool:
        return settings.CSRF_USE_SESSIONS  # the secret is in the session

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        return settings.CSRF_USE_SESSIONS


class AuthenticationMiddleware(OnTheLoop, auth.AuthenticationMiddleware):
    """Sets `request.user` lazily: the user is read where it is used."""


class MessageMiddleware(OnTheLoop, messages.MessageMiddleware):
    """Messages read or added are stored by the response's hook (in the session, perhaps)."""

    def response_needs_thread(self, request: HttpRequest, response: HttpResponseBase) -> bool:
        storage = getattr(request, "_messages", None)
        return storage is not None and (storage.used or storage.added_new)


class XFrameOptionsMiddleware(OnTheLoop, clickjacking.XFrameOptionsMiddleware):
    pass
