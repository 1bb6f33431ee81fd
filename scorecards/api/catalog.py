"""REST API for harness and dataset versions: create a new immutable version, list the latest."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.parsers import BoundedJSONParser
from core.replies import data
from core.serializers import StrictSerializer
from scorecards.replies.catalog import (
    DatasetItem,
    DatasetItems,
    DatasetReply,
    HarnessItem,
    HarnessItems,
    HarnessReply,
)
from scorecards.selectors.catalog import dataset_list, harness_list
from scorecards.services import dataset_create, dataset_parse_jsonl, harness_create


class JsonLinesParser(BaseParser):
    """Hands a JSONL body over as `{"jsonl": text}`; `dataset_parse_jsonl` reads the lines."""

    media_type = "application/x-ndjson"

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> dict[str, str]:
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            return {"jsonl": stream.read().decode(encoding)}
        except (UnicodeDecodeError, LookupError) as exc:
            raise ParseError(f"The body is not valid {encoding} text: {exc}") from exc


class JsonlParser(JsonLinesParser):
    media_type = "application/jsonl"


class PlainTextLinesParser(JsonLinesParser):
    media_type = "text/plain"


_JSONL_MEDIA_TYPES = {p.media_type for p in (JsonLinesParser, JsonlParser, PlainTextLinesParser)}


class HarnessCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    spec = serializers.JSONField(
        help_text='e.g. {"command": ["python", "solve.py", "{input.prompt}"], "timeout_s": 600, '
        '"output": "json", "grader": {"type": "contains", "field": "result"}}'
    )


class DatasetCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100)
    # Validated by the service, which reports every bad case by index in one pass.
    cases = serializers.JSONField(help_text="[{key, input, expected}, …]")


def _jsonl_text(request: Request) -> str | None:
    """The JSONL body as text, or None when the body is a JSON document."""
    media_type = request.content_type.partition(";")[0].strip().lower()
    if media_type not in _JSONL_MEDIA_TYPES:
        return None
    # An empty body never reaches the parser: it is JSONL with no cases.
    return str(request.data.get("jsonl", ""))


class HarnessListView(APIView):
    @extend_schema(responses=HarnessItems)
    def get(self, request: Request, slug: str) -> Response:
        entries = harness_list(user=signed_in(request), workspace_slug=slug)
        return Response(data([HarnessItem.of_entry(entry) for entry in entries]))

    @extend_schema(request=HarnessCreateSerializer, responses={201: HarnessReply})
    def post(self, request: Request, slug: str) -> Response:
        body = HarnessCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        harness = harness_create(
            user=signed_in(request), workspace_slug=slug, **body.validated_data
        )
        return Response(HarnessReply.of(harness).data(), status=status.HTTP_201_CREATED)


class DatasetListView(APIView):
    parser_classes = [BoundedJSONParser, JsonLinesParser, JsonlParser, PlainTextLinesParser]

    @extend_schema(responses=DatasetItems)
    def get(self, request: Request, slug: str) -> Response:
        entries = dataset_list(user=signed_in(request), workspace_slug=slug)
        return Response(data([DatasetItem.of_entry(entry) for entry in entries]))

    @extend_schema(
        request={
            "application/json": DatasetCreateSerializer,
            "application/x-ndjson": OpenApiTypes.STR,
        },
        parameters=[
            OpenApiParameter("name", str, description="The dataset name, for a JSONL body.")
        ],
        responses={201: DatasetReply},
    )
    def post(self, request: Request, slug: str) -> Response:
        text = _jsonl_text(request)
        if text is None:
            body = DatasetCreateSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            name, cases = body.validated_data["name"], body.validated_data["cases"]
        else:
            name, cases = request.query_params.get("name", ""), dataset_parse_jsonl(text)
        dataset = dataset_create(
            user=signed_in(request), workspace_slug=slug, name=name, cases=cases
        )
        return Response(DatasetReply.of(dataset).data(), status=status.HTTP_201_CREATED)
