"""REST API of proposed and verified metadata (docs/METADATA.md): a dataset's proposals of
one origin with their items' latest verification, and verifying one proposal. The project's
researchers and admins (404 for non-members, 403 for annotators)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.http import Http404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.api_parsers import StrictJSONParser
from annotation.metadata import selectors as ms
from annotation.metadata.services import metadata_verify
from annotation.models import MetadataProposal, MetadataVerification, VerificationVerdict
from annotation.selectors import metadata_origins
from flaskweb.api_errors import ApiPagination


class VerificationSerializer(serializers.Serializer):
    verdict = serializers.CharField()
    domains = serializers.ListField(child=serializers.CharField())
    skills = serializers.ListField(child=serializers.CharField())
    difficulty = serializers.IntegerField(allow_null=True)
    previous = serializers.DictField()
    verified_by = serializers.CharField(
        source="verified_by.username", allow_null=True, default=None
    )
    verified_at = serializers.DateTimeField()

    class Meta:
        ref_name = "MetadataVerification"


class ProposalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    item = serializers.IntegerField(source="item_id")
    external_id = serializers.CharField(source="item.external_id")
    origin = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.source
    run_id = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    domains = serializers.ListField(child=serializers.CharField())
    skills = serializers.ListField(child=serializers.CharField())
    difficulty = serializers.IntegerField(allow_null=True)
    raw_output = serializers.CharField()
    error = serializers.CharField()
    verification = VerificationSerializer(allow_null=True)

    class Meta:
        ref_name = "MetadataProposal"


class MetadataProposalListApi(APIView):
    """The dataset's proposals of one origin ("dataset", or "run:<id>"; default: the newest
    run's), by item, each with its item's latest verification (null: not verified)."""

    pagination_class = ApiPagination

    @extend_schema(
        parameters=[
            OpenApiParameter("origin", OpenApiTypes.STR, description='"dataset" or "run:<id>"'),
            OpenApiParameter("pending", OpenApiTypes.BOOL, description="unverified items only"),
        ],
        responses=ProposalSerializer(many=True),
    )
    def get(self, request, pk: int):
        dataset, _ = access.dataset_get_for_user(request.user, pk)
        origins = [o[0] for o in metadata_origins(dataset=dataset)]
        runs = [o for o in origins if o != "dataset"]
        origin = request.query_params.get("origin") or (runs or origins or ["dataset"])[0]
        pending = request.query_params.get("pending", "false").lower() == "true"
        queue = ms.metadata_queue(dataset=dataset, origin=origin, pending_only=pending)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(queue, request, view=self) or []
        latest: dict[int, MetadataVerification] = {}
        for row in (
            MetadataVerification.objects.filter(item_id__in=[p.item_id for p in page])
            .select_related("verified_by")
            .order_by("item_id", "verified_at", "id")
        ):
            latest[row.item_id] = row
        for proposal in page:
            proposal.verification = latest.get(proposal.item_id)  # type: ignore[attr-defined]
        return paginator.get_paginated_response(ProposalSerializer(page, many=True).data)


class MetadataVerifyApi(APIView):
    """Verify one proposal: accepted (its values become the item's), edited (the values
    given do) or rejected (the item keeps its own). Refused with 400 and nothing changed for
    values outside the project's catalogue or a parse-failed proposal accepted."""

    parser_classes = [StrictJSONParser]

    class InputSerializer(serializers.Serializer):
        verdict = serializers.ChoiceField(choices=VerificationVerdict.choices)
        domains = serializers.ListField(
            child=serializers.CharField(max_length=80), required=False, max_length=20
        )
        skills = serializers.ListField(
            child=serializers.CharField(max_length=80), required=False, max_length=3
        )
        difficulty = serializers.IntegerField(min_value=1, max_value=5, required=False)

        class Meta:
            ref_name = "MetadataVerifyInput"

    @extend_schema(request=InputSerializer, responses=VerificationSerializer)
    def post(self, request, pk: int):
        try:
            proposal = ms.metadata_proposal_get(pk=pk)
        except MetadataProposal.DoesNotExist:
            raise Http404("no such proposal") from None
        access.dataset_get_for_user(request.user, proposal.item.dataset_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        edit = {}
        if values["verdict"] == VerificationVerdict.EDITED:
            edit = {
                "domains": values.get("domains", []),
                "skills": values.get("skills", []),
                "difficulty": values.get("difficulty"),
            }
        try:
            verification = metadata_verify(
                proposal=proposal, verdict=values["verdict"], user=request.user, **edit
            )
        except ValidationError as exc:
            raise serializers.ValidationError({"detail": exc.messages}) from exc
        return ApiResponse(VerificationSerializer(verification).data)
