"""Public write API of a "sampled" campaign's draws for other apps (analytics' active
selection decides which responses go to people and records them here). The service lives
with the campaigns, in annotation/campaigns/services.py."""

from annotation.campaigns.services import CampaignStateError, SampleRefused, campaign_sample_record

__all__ = ["CampaignStateError", "SampleRefused", "campaign_sample_record"]
