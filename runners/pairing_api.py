"""REST API of device pairing: a machine asks for a code and polls for its token (anonymous);
a member approves or denies a code (session or API key)."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from pydantic import ValidationError
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.schema import service_errors
from runnercli.protocol.device import (
    DeviceAuthorization,
    DeviceToken,
    DeviceTokenError,
    DeviceTokenRequest,
)
from runners.api import RunnerPairSerializer
from runners.pairing import (
    PollRefused,
    device_pairing_create,
    device_pairing_decide,
    device_pairing_poll,
)
from runners.replies import DevicePairingItem
from runners.throttles import DeviceCodeThrottle, DevicePairingThrottle, DeviceTokenThrottle

THROTTLED = (429, "Error", "Too many requests from here: wait the Retry-After seconds.")
DECIDED = (409, "Error", "The code expired, or its request was already decided.")


class DevicePairingRequestSerializer(RunnerPairSerializer):
    workspace = None  # type: ignore[assignment]  # a machine belongs to whoever approves it


def base_url(request: Request) -> str:
    return (settings.EVERDICT_PUBLIC_URL or request.build_absolute_uri("/")).rstrip("/")


class DevicePairingCreateView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [DevicePairingThrottle]

    @extend_schema(request=DevicePairingRequestSerializer, responses={200: DeviceAuthorization})
    @service_errors(THROTTLED)
    def post(self, request: Request) -> Response:
        body = DevicePairingRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        issued = device_pairing_create(
            **body.validated_data,
            requested_from=request.META.get("REMOTE_ADDR", ""),
            user_agent=request.headers.get("User-Agent", ""),
        )
        pairing, page = issued.pairing, f"{base_url(request)}/pair/"
        reply = DeviceAuthorization(
            device_code=issued.device_code,
            user_code=pairing.user_code,
            verification_uri=page,
            verification_uri_complete=page + pairing.user_code,
            interval=pairing.interval_s,
            expires_in=settings.EVERDICT_DEVICE_PAIRING_TTL_S,
        )
        return Response(reply.model_dump(mode="json"))


class DevicePairingTokenView(APIView):
    authentication_classes: list[type] = []
    permission_classes = [AllowAny]
    throttle_classes = [DeviceTokenThrottle]

    @extend_schema(request=DeviceTokenRequest, responses={200: DeviceToken, 400: DeviceTokenError})
    @service_errors(THROTTLED)
    def post(self, request: Request) -> Response:
        try:
            asked = DeviceTokenRequest.model_validate(request.data)
            paired = device_pairing_poll(device_code=asked.device_code)
        except (ParseError, ValidationError) as exc:
            refused = DeviceTokenError(error="invalid_request", error_description=str(exc)[:500])
        except PollRefused as exc:
            refused = DeviceTokenError(error=exc.error, error_description=exc.description)
        else:
            reply = DeviceToken(runner_id=paired.runner.pk, token=paired.token)
            return Response(reply.model_dump(mode="json"))
        return Response(refused.model_dump(mode="json"), status=status.HTTP_400_BAD_REQUEST)


class DevicePairingDecideView(APIView):
    """`approve` or `deny`, by the member signed in (a session or an `evk_` key)."""

    throttle_classes = [DeviceCodeThrottle]
    approve = True

    @extend_schema(request=None, responses={200: DevicePairingItem})
    @service_errors(DECIDED, THROTTLED)
    def post(self, request: Request, user_code: str) -> Response:
        pairing = device_pairing_decide(
            user=signed_in(request), user_code=user_code, approve=self.approve
        )
        return Response(DevicePairingItem.of(pairing).data())


class DevicePairingApproveView(DevicePairingDecideView):
    approve = True


class DevicePairingDenyView(DevicePairingDecideView):
    approve = False
