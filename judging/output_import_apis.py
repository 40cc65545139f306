"""REST API: import judge outputs made elsewhere as named judges of a project
(docs/JUDGE_OUTPUT_IMPORTS.md). Same service as the `import_judge_outputs` command, same
access rules as the other judging APIs (admins and researchers; annotators 403, non-members
404). Every 400 has one shape: {"detail", "code", "problems": [{file, line, field, code,
message}]}."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation.selectors import dataset_list_for_project
from flaskweb.api_errors import ProblemsErrorSerializer, field_problems, problems_response
from judging import access
from judging.apis import RunOutputSerializer
from judging.output_imports import FORMATS, JudgeOutputImportRejected, judge_outputs_import

#: Files are read in the request: larger inputs go through the command.
MAX_INPUT_BYTES = 256 * 1024 * 1024


class ImportedRunSerializer(serializers.Serializer):
    already_imported = serializers.BooleanField(
        help_text="This input was imported as this judge before: nothing was written."
    )
    judgments = serializers.IntegerField()
    scores = serializers.IntegerField()
    run = RunOutputSerializer()

    class Meta:
        ref_name = "JudgingOutputImportRun"


class JudgeOutputImportApi(APIView):
    """Import judge outputs (multipart: `dataset`, one or more `files`, optional `judge`,
    `format`, `model`). 201 with one run per judge; 200 when every run existed already (the
    same input imported before: nothing written); 400 with every problem, nothing written."""

    parser_classes = [MultiPartParser, FormParser]

    class InputSerializer(serializers.Serializer):
        dataset = serializers.CharField(max_length=200, help_text="The dataset's name.")
        files = serializers.ListField(child=serializers.FileField(), allow_empty=False)
        judge = serializers.CharField(
            max_length=200,
            required=False,
            default="",
            help_text="flask-review: the judge's name (required). long: import only this "
            "rater's rows (default: every rater becomes a judge).",
        )
        format = serializers.ChoiceField(choices=FORMATS, required=False, default="")
        model = serializers.CharField(
            max_length=200,
            required=False,
            default="",
            help_text="flask-review: the judged model (default: the file name without _review).",
        )

        class Meta:
            ref_name = "JudgingOutputImport"

    class OutputSerializer(serializers.Serializer):
        format = serializers.CharField()
        input_sha256 = serializers.CharField()
        human_rows_ignored = serializers.IntegerField(source="human_rows")
        other_rater_rows_ignored = serializers.IntegerField(source="other_rater_rows")
        runs = ImportedRunSerializer(many=True)

        class Meta:
            ref_name = "JudgingOutputImportResult"

    @extend_schema(
        request={"multipart/form-data": InputSerializer},
        responses={201: OutputSerializer, 200: OutputSerializer, 400: ProblemsErrorSerializer},
    )
    def post(self, request, slug: str):
        project = access.project_get_for_staff(request.user, slug)
        data = request.data.dict() if hasattr(request.data, "dict") else dict(request.data)
        serializer = self.InputSerializer(data={**data, "files": request.FILES.getlist("files")})
        if not serializer.is_valid():
            return problems_response(
                "the request is not valid", "invalid", field_problems(serializer.errors)
            )
        v = serializer.validated_data
        limit = min(MAX_INPUT_BYTES, settings.FLASKWEB_MAX_UPLOAD_BYTES)
        if sum(f.size or 0 for f in v["files"]) > limit:
            return problems_response(
                f"the files are larger than {limit:,} bytes together: use the "
                "import_judge_outputs command",
                "too_large",
                [],
            )
        dataset = dataset_list_for_project(project=project).filter(name=v["dataset"]).first()
        if dataset is None:
            return problems_response(
                f"the project has no dataset named {v['dataset']!r}", "unknown_dataset", []
            )
        try:
            result = judge_outputs_import(
                project=project,
                dataset=dataset,
                files=[(f.name, f.read()) for f in v["files"]],
                fmt=v["format"],
                judge_name=v["judge"],
                model=v["model"],
                created_by=request.user,
            )
        except JudgeOutputImportRejected as exc:
            return problems_response(str(exc), exc.code, [p.as_dict() for p in exc.problems])
        body = self.OutputSerializer(result, context={}).data
        return ApiResponse(
            body, status=status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
        )
