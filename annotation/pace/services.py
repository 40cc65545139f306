"""Writes of the campaign's pace and wage settings (break_every, break_minutes,
hourly_wage, wage_currency): a form of its own, apart from the campaign's settings form."""

from __future__ import annotations

from decimal import Decimal

from annotation.models import Campaign

PACE_FIELDS = ["break_every", "break_minutes", "hourly_wage", "wage_currency", "updated_at"]


def campaign_pace_update(
    *,
    campaign: Campaign,
    break_every: int | None,
    break_minutes: int,
    hourly_wage: Decimal | None,
    wage_currency: str,
) -> Campaign:
    """Set the pace and wage settings. They change no task or score, so any campaign status
    takes them (a finished campaign's wage still gives its cost). Raises ValidationError
    (the model's own checks) and writes nothing then."""
    campaign.break_every = break_every
    campaign.break_minutes = break_minutes
    campaign.hourly_wage = hourly_wage
    campaign.wage_currency = wage_currency.upper()
    campaign.full_clean(
        exclude=[f.name for f in Campaign._meta.fields if f.name not in PACE_FIELDS]
    )
    campaign.save(update_fields=PACE_FIELDS)
    return campaign
