"""REST API of a campaign's texts in more languages (the project's admins and researchers;
annotators get 403, non-members 404), the same services as the Languages page: GET the list,
GET / PUT / DELETE one language. docs/LANGUAGES.md has a worked example."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access
from annotation.api_parsers import StrictJSONParser
from annotation.languages import services
from annotation.languages.selectors import LEVELS, TEXT_FIELDS, site_languages
from annotation.models import CampaignTranslation
from flaskweb.api_errors import ErrorSerializer, service_error


class TranslationSerializer(serializers.Serializer):
    language = serializers.CharField(help_text="a code of the site's languages (es, ar, …)")
    consent_text = serializers.CharField(help_text="empty: the campaign's own")
    instructions = serializers.CharField(help_text="empty: the campaign's own")
    completion_message = serializers.CharField(help_text="empty: the campaign's own")
    anchors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text=f"skill key -> its {LEVELS} anchors, level 1 to {LEVELS}; skills left out "
        "keep the rubric's own",
    )
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "CampaignTranslation"


class TranslationInputSerializer(serializers.Serializer):
    """The whole of a language's texts: what is left out is empty (the campaign's own)."""

    consent_text = serializers.CharField(
        max_length=services.MAX_TEXT, allow_blank=True, required=False, default=""
    )
    instructions = serializers.CharField(
        max_length=services.MAX_TEXT, allow_blank=True, required=False, default=""
    )
    completion_message = serializers.CharField(
        max_length=services.MAX_TEXT, allow_blank=True, required=False, default=""
    )
    anchors = serializers.DictField(
        child=serializers.ListField(
            child=serializers.CharField(max_length=services.MAX_ANCHOR, allow_blank=True),
            max_length=50,
        ),
        required=False,
        default=dict,
        help_text=f"skill key -> exactly {LEVELS} non-empty anchors, level 1 to {LEVELS}",
    )

    class Meta:
        ref_name = "CampaignTranslationInput"


class CampaignTranslationListApi(APIView):
    """GET: the campaign's texts in each language it has a translation for."""

    @extend_schema(responses=TranslationSerializer(many=True))
    def get(self, request, pk: int):
        campaign = access.campaign_get_for_staff(request.user, pk)
        rows = CampaignTranslation.objects.filter(campaign=campaign)
        return ApiResponse(TranslationSerializer(rows, many=True).data)


#: the language in the path: one of the site's codes (any other is a 400 naming them)
LANGUAGE_PARAMETER = OpenApiParameter(
    "language",
    str,
    OpenApiParameter.PATH,
    enum=list(site_languages()),
    description="a code of the site's languages",
)


class CampaignTranslationApi(APIView):
    """GET the campaign's texts in one language; PUT replaces them (a running campaign's
    texts may be corrected, every change is recorded); DELETE removes them (its pages fall
    back to the campaign's own texts)."""

    parser_classes = [StrictJSONParser]

    def _campaign_and_language(self, request, pk: int, language: str):
        campaign = access.campaign_get_for_staff(request.user, pk)
        if language not in site_languages():
            known = ", ".join(site_languages())
            raise serializers.ValidationError(
                {"language": [f"unknown language {language!r}: one of {known}"]}
            )
        return campaign

    @extend_schema(
        parameters=[LANGUAGE_PARAMETER],
        responses={200: TranslationSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request, pk: int, language: str):
        campaign = self._campaign_and_language(request, pk, language)
        row = CampaignTranslation.objects.filter(campaign=campaign, language=language).first()
        if row is None:
            return ApiResponse(
                {"detail": "no texts in this language", "code": "not_found"},
                status=status.HTTP_404_NOT_FOUND,
            )
        return ApiResponse(TranslationSerializer(row).data)

    @extend_schema(
        parameters=[LANGUAGE_PARAMETER],
        request=TranslationInputSerializer,
        responses={200: TranslationSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def put(self, request, pk: int, language: str):
        campaign = self._campaign_and_language(request, pk, language)
        serializer = TranslationInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            row = services.campaign_translation_set(
                campaign=campaign,
                language=language,
                anchors=data["anchors"],
                **{name: data[name] for name in TEXT_FIELDS},
            )
        except ValidationError as exc:
            raise service_error(exc) from None
        row.refresh_from_db()
        return ApiResponse(TranslationSerializer(row).data)

    @extend_schema(
        parameters=[LANGUAGE_PARAMETER],
        request=None,
        responses={
            204: OpenApiResponse(description="removed"),
            400: ErrorSerializer,
            404: ErrorSerializer,
        },
    )
    def delete(self, request, pk: int, language: str):
        campaign = self._campaign_and_language(request, pk, language)
        if not services.campaign_translation_delete(campaign=campaign, language=language):
            return ApiResponse(
                {"detail": "no texts in this language", "code": "not_found"},
                status=status.HTTP_404_NOT_FOUND,
            )
        return ApiResponse(status=status.HTTP_204_NO_CONTENT)
