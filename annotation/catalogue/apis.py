"""REST API of the catalogue: the skills with the rubric in force."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response as ApiResponse
from rest_framework.views import APIView

from annotation import access, selectors


class SkillListApi(APIView):
    """The skill catalogue: built-in skills, and a project's own with `?project=`. Not paged:
    a catalogue holds a few dozen skills."""

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        name = serializers.CharField()
        ability = serializers.CharField()
        builtin = serializers.BooleanField(source="is_builtin")
        rubric_version = serializers.IntegerField(allow_null=True)
        rubric_label = serializers.CharField(
            allow_null=True, help_text='"built-in v1" or "project:<slug> v1"'
        )
        criterion = serializers.CharField(allow_null=True)
        anchors = serializers.ListField(child=serializers.CharField(), allow_null=True)

        class Meta:
            ref_name = "Skill"

    class FilterSerializer(serializers.Serializer):
        project = serializers.SlugField(
            required=False, allow_blank=True, help_text="a project's slug: its own skills too"
        )

        class Meta:
            ref_name = "SkillFilters"

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer(many=True))
    def get(self, request):
        params = self.FilterSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        slug = params.validated_data.get("project")
        project = access.project_get_for_user(request.user, slug)[0] if slug else None
        rubrics = selectors.rubrics_current_for_project(project=project)
        rows = []
        for skill in selectors.skill_list_for_project(project=project):
            rubric = rubrics.get(skill.pk)
            skill.rubric_version = rubric.version if rubric else None
            skill.rubric_label = rubric.label if rubric else None
            skill.criterion = rubric.criterion if rubric else None
            skill.anchors = rubric.anchors if rubric else None
            rows.append(skill)
        return ApiResponse(self.OutputSerializer(rows, many=True).data)
