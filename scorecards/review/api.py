"""REST API of the review queue: read it, and review one result."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.authentication import signed_in
from core.fields import query_int
from core.serializers import StrictSerializer
from scorecards.review.models import ReviewAction
from scorecards.review.replies import QueueReply, ReviewItem
from scorecards.review.selectors import people_agreement, review_queue
from scorecards.review.services import MAX_NOTE_CHARS, review_act


class ReviewSerializer(StrictSerializer):
    action = serializers.ChoiceField(choices=ReviewAction.values)
    note = serializers.CharField(max_length=MAX_NOTE_CHARS, required=False, allow_blank=True)


class ReviewQueueView(APIView):
    @extend_schema(
        parameters=[
            OpenApiParameter("run", int, description="One run's results."),
            OpenApiParameter("harness", str, description="The newest runs of one harness."),
        ],
        responses=QueueReply,
    )
    def get(self, request: Request, slug: str) -> Response:
        user = signed_in(request)
        run = query_int("run", request.query_params.get("run"))
        harness = request.query_params.get("harness") or None
        queue = review_queue(user=user, workspace_slug=slug, run_id=run, harness=harness)
        agreement = people_agreement(workspace=queue.workspace, harness=harness)
        return Response(QueueReply.of(queue, agreement).data())


class ReviewActView(APIView):
    @extend_schema(request=ReviewSerializer, responses=ReviewItem)
    def post(self, request: Request, result_id: int) -> Response:
        body = ReviewSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        review = review_act(user=signed_in(request), result_id=result_id, **body.validated_data)
        return Response(ReviewItem.of(review).data(), status=201)
