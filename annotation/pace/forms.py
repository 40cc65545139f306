"""The pace and wage settings form (the campaign's own settings form stays as it was)."""

from __future__ import annotations

from decimal import Decimal

from django import forms
from django.core.validators import RegexValidator

MAX_WAGE = Decimal("999999.99")  # the column holds 8 digits, 2 after the point


class CampaignPaceForm(forms.Form):
    hourly_wage = forms.DecimalField(
        required=False,
        min_value=Decimal("0"),
        max_value=MAX_WAGE,
        max_digits=8,
        decimal_places=2,
        help_text="Paid per hour of focused work; empty: no cost estimate.",
    )
    wage_currency = forms.CharField(
        min_length=3,
        max_length=3,
        initial="USD",
        validators=[
            RegexValidator(r"^[A-Za-z]{3}$", "A currency is a three-letter code such as USD.")
        ],
        help_text="A three-letter code (ISO 4217): USD, EUR, GBP…",
    )
    break_every = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=1000,
        help_text="Suggest a break after every N submitted tasks; empty: no breaks.",
    )
    break_minutes = forms.IntegerField(
        min_value=1, max_value=120, initial=5, help_text="How long a break to suggest."
    )

    def clean_wage_currency(self) -> str:
        return self.cleaned_data["wage_currency"].upper()
