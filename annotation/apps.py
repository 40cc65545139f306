from django.apps import AppConfig


class AnnotationConfig(AppConfig):
    name = "annotation"
    verbose_name = "Datasets and annotation"

    def ready(self) -> None:
        from annotation import audit  # noqa: F401  (connects the deletion audit)
