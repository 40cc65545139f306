"""Form fields every upload form of the project shares (annotation's dataset upload, and
analytics' score import)."""

from __future__ import annotations

from django import forms
from django.conf import settings


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, command: str = "import_dataset", **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        self.command = command  # named in the error for files over the upload limit
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        files = data if isinstance(data, (list, tuple)) else [data]
        cleaned = [single(f, initial) for f in files if f]
        if not cleaned and self.required:
            raise forms.ValidationError("choose at least one file")
        limit = settings.FLASKWEB_MAX_UPLOAD_BYTES  # all files of the request together
        total = sum(f.size for f in cleaned)
        if total > limit:
            what = (
                f"{cleaned[0].name} is {total:,} bytes"
                if len(cleaned) == 1
                else f"the {len(cleaned)} files are {total:,} bytes together"
            )
            raise forms.ValidationError(
                f"{what}; the limit is {limit:,} bytes "
                f"(use the {self.command} command for larger files)"
            )
        return cleaned
