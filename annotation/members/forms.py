"""Members page forms: add a user to a project, change a member's role or remove them."""

from __future__ import annotations

from django import forms

from annotation.models import ProjectRole


class MemberAddForm(forms.Form):
    """Add an existing, active user to a project (users are made by site admins; whether
    the username can be added is membership_add_by_username's answer)."""

    username = forms.CharField(max_length=150)
    role = forms.ChoiceField(choices=ProjectRole.choices, initial=ProjectRole.ANNOTATOR)


class MemberChangeForm(forms.Form):
    """A new role for a member, or (remove ticked) the end of the membership."""

    role = forms.ChoiceField(choices=ProjectRole.choices, required=False)
    remove = forms.BooleanField(required=False)

    def clean(self):
        data = super().clean()
        if not data.get("remove") and not data.get("role"):
            raise forms.ValidationError("choose a role, or remove the member")
        return data
