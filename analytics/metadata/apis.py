"""The metadata agreement API: each proposal origin's figures (overall and per verified
domain) for a dataset. The project's researchers and admins."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from analytics.metadata.selectors import metadata_agreement_for_dataset
from annotation.access import dataset_get_for_user


class OriginAgreementSerializer(serializers.Serializer):
    origin = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a field, not Field.label
    verdicts = serializers.DictField(child=serializers.IntegerField())
    overall = serializers.DictField(source="figures.overall")
    per_domain = serializers.DictField(source="figures.per_domain")

    class Meta:
        ref_name = "MetadataOriginAgreement"


class MetadataAgreementApi(APIView):
    @extend_schema(responses=OriginAgreementSerializer(many=True))
    def get(self, request, pk: int):
        dataset, _ = dataset_get_for_user(request.user, pk)
        rows = metadata_agreement_for_dataset(dataset=dataset)
        return ApiResponse(OriginAgreementSerializer(rows, many=True).data)
