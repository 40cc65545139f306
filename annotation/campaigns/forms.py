"""Forms of the campaign pages. They validate and translate input into service arguments;
the services (annotation/campaigns/services.py) decide and write."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib.auth.models import Group, User

from annotation.campaigns import selectors as cs
from annotation.campaigns.services import (
    CAMPAIGN_STRUCTURE,
    MAX_LEASE_SECONDS,
    pair_choices_of,
)
from annotation.models import (
    Campaign,
    CampaignMode,
    CampaignSelection,
    CampaignStatus,
    Dataset,
    Domain,
    PairAsk,
    PairChoice,
    PairDesign,
    Project,
    ProjectRole,
    Response,
    Skill,
    SkillMode,
    TaskKind,
)
from annotation.parsers import score_read
from annotation.selectors import (
    PARTICIPANTS_EXCLUDE,
    domain_list_for_project,
    skill_list_for_project,
    study_group_list,
)

LEASE_UNITS = {"minutes": 60, "seconds": 1}


class CampaignForm(forms.Form):
    """Create a campaign, or edit one (structure fields are locked once it is active)."""

    name = forms.CharField(max_length=200)
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), empty_label=None)
    model_names = forms.MultipleChoiceField(
        required=False,
        label="Models whose responses are scored",
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked = every model of the dataset.",
    )
    skill_mode = forms.ChoiceField(
        choices=SkillMode.choices, initial=SkillMode.ITEM, widget=forms.RadioSelect, label="Skills"
    )
    fixed_skills: forms.ModelMultipleChoiceField[Skill] = forms.ModelMultipleChoiceField(
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Fixed set of skills",
        help_text="Only for a fixed set: every response is scored on these skills.",
    )
    overlap = forms.IntegerField(
        min_value=1, max_value=50, initial=3, label="Annotators per response (K)"
    )
    show_reference = forms.BooleanField(
        required=False, initial=True, label="Show the reference answer"
    )
    selection = forms.ChoiceField(
        choices=CampaignSelection.choices,
        initial=CampaignSelection.ALL,
        required=False,  # absent: every response (as before the choice existed)
        widget=forms.RadioSelect,
        label="Responses for people",
        help_text="Sampled (pointwise only): people score only the responses drawn for them "
        "on the campaign's Active selection page, which favours those a finished judge run is "
        "unsure of and records each one's probability.",
    )
    annotators: forms.ModelMultipleChoiceField[User] = forms.ModelMultipleChoiceField(
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The project's members with the annotator role (study participants below).",
    )
    # A study link makes an account per crowd worker: thousands of them. They are offered
    # a study at a time, as a count, never one checkbox each.
    studies = forms.TypedMultipleChoiceField(
        coerce=int,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Include the participants of a study",
        help_text="Every participant of a ticked study (but those who declined consent) is "
        "in the pool, as of each save. A study session opens only its own campaign's tasks.",
    )
    groups = forms.ModelMultipleChoiceField(
        queryset=Group.objects.none(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Members of a ticked group who hold a role in this project are in the pool too.",
    )
    route_by_domain = forms.BooleanField(
        required=False,
        label="Route by domain expertise",
        help_text="Annotators who declared domains get items of those domains only.",
    )
    quota_per_annotator = forms.IntegerField(
        min_value=1, required=False, label="Quota per annotator", help_text="Empty = no quota."
    )
    lease_value = forms.IntegerField(min_value=1, initial=15, label="Lease time")
    lease_unit = forms.ChoiceField(
        choices=[(u, u) for u in LEASE_UNITS], initial="minutes", label="Unit"
    )
    instructions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 6}),
        label="Instructions and guidelines",
        help_text="Markdown; shown to annotators with every task.",
    )
    gold_percent = forms.DecimalField(
        min_value=0, max_value=50, decimal_places=1, initial=0, label="Gold / attention tasks (%)"
    )
    repeat_percent = forms.DecimalField(
        min_value=0,
        max_value=50,
        decimal_places=1,
        initial=0,
        label="Hidden repeats, test-retest (%)",
    )
    gold_feedback = forms.BooleanField(
        required=False,
        label="Gold feedback",
        help_text="Show annotators the known score after they submit a gold task.",
    )
    mode = forms.ChoiceField(
        choices=CampaignMode.choices,
        initial=CampaignMode.POINTWISE,
        required=False,  # absent: pointwise (as before the mode existed)
        widget=forms.RadioSelect,
        label="Mode",
    )
    pair_design = forms.ChoiceField(
        choices=PairDesign.choices,
        initial=PairDesign.ALL_PAIRS,
        required=False,
        label="Which pairs",
    )
    pair_anchor = forms.CharField(
        max_length=200,
        required=False,
        label="Anchor model",
        help_text="For the anchor design: every other model is compared with this one.",
    )
    pair_budget = forms.IntegerField(
        min_value=1,
        required=False,
        label="Budget (pairs)",
        help_text="For the sampled design: how many pairs, each model appearing equally often.",
    )
    pair_choices = forms.MultipleChoiceField(
        choices=PairChoice.choices,
        initial=[PairChoice.A, PairChoice.B, PairChoice.TIE],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Choices offered",
    )
    pair_ask = forms.ChoiceField(
        choices=PairAsk.choices,
        initial=PairAsk.BOTH,
        required=False,
        label="Ask",
        widget=forms.RadioSelect,
    )
    pair_strength = forms.BooleanField(
        required=False, label="Ask how much better (slightly or much)"
    )
    pair_rationale = forms.BooleanField(required=False, label="Offer a rationale box")

    def __init__(
        self,
        *args,
        project: Project,
        instance: Campaign | None = None,
        dataset_id: Any = None,
        **kwargs,
    ) -> None:
        if instance is not None:
            kwargs.setdefault("initial", _initial_from(instance))
        super().__init__(*args, **kwargs)
        self.project = project
        self.instance = instance
        datasets = project.datasets.order_by("name")
        self.fields["dataset"].queryset = datasets  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
        self.fields["fixed_skills"].queryset = skill_list_for_project(project=project)  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
        self.fields["annotators"].queryset = cs.project_annotator_list(  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
            project=project, participants=PARTICIPANTS_EXCLUDE
        )
        self._studies_offer(project, instance)
        keep = instance.groups.values_list("pk", flat=True) if instance is not None else ()
        self.fields["groups"].queryset = cs.group_list_for_project(project=project, keep=keep)  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
        # (not `self.dataset`: templates would resolve that to the bound field)
        self.chosen_dataset = self._chosen_dataset(datasets, dataset_id)
        if self.chosen_dataset is not None and not self.is_bound:
            self.initial["dataset"] = self.chosen_dataset.pk
        chosen = self.chosen_dataset
        names = cs.dataset_model_names(dataset=chosen) if chosen else []
        self.fields["model_names"].choices = [(n, n) for n in names]  # type: ignore[attr-defined]  # a ChoiceField
        self.locked = instance is not None and instance.status != CampaignStatus.DRAFT
        if self.locked:
            for name in CAMPAIGN_STRUCTURE:
                self.fields[name].disabled = True

    def _studies_offer(self, project: Project, instance: Campaign | None) -> None:
        """The other campaigns' studies as one checkbox each (a count, not the people);
        the campaign's own participants are counted apart: they stay in its pool."""
        studies = [
            s
            for s in study_group_list(project=project, roles=[ProjectRole.ANNOTATOR])
            if instance is None or s.campaign_id != instance.pk
        ]
        self.fields["studies"].choices = [  # type: ignore[attr-defined]  # a ChoiceField
            (s.campaign_id, f"{s.campaign_name} ({s.participants:,} participants)") for s in studies
        ]
        self.own_participants = 0
        if instance is not None:
            self.own_participants = cs.campaign_own_participant_count(campaign=instance)
            if studies and not self.is_bound:
                self.initial["studies"] = cs.campaign_pool_study_ids(campaign=instance)

    def _chosen_dataset(self, datasets, dataset_id) -> Dataset | None:
        """The dataset whose models are offered: posted, asked for (?dataset=), the
        instance's, or the first one (as the select shows it)."""
        if self.instance is not None and self.instance.status != CampaignStatus.DRAFT:
            return self.instance.dataset
        wanted: Any = self.data.get("dataset") if self.is_bound else dataset_id
        wanted = wanted or self.initial.get("dataset")
        try:
            if wanted:
                return datasets.filter(pk=int(getattr(wanted, "pk", wanted))).first()
        except (TypeError, ValueError):
            return None
        return datasets.first()

    def clean_name(self) -> str:
        name = self.cleaned_data["name"].strip()
        taken = Campaign.objects.filter(project=self.project, name=name)
        if self.instance is not None:
            taken = taken.exclude(pk=self.instance.pk)
        if taken.exists():
            raise forms.ValidationError("this project already has a campaign with that name")
        return name

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (its stub allows None)
        if data.get("skill_mode") == SkillMode.FIXED and not data.get("fixed_skills"):
            self.add_error("fixed_skills", "tick at least one skill for a fixed set")
        value, unit = data.get("lease_value"), data.get("lease_unit")
        if value and unit:
            seconds = value * LEASE_UNITS[unit]
            if not 30 <= seconds <= MAX_LEASE_SECONDS:
                self.add_error("lease_value", "a lease lasts between 30 seconds and 24 hours")
            data["lease_seconds"] = seconds
        data["mode"] = data.get("mode") or CampaignMode.POINTWISE
        data["selection"] = data.get("selection") or CampaignSelection.ALL
        if data["mode"] == CampaignMode.PAIRWISE and data["selection"] == CampaignSelection.SAMPLED:
            self.add_error(
                "selection", "only a pointwise campaign has its responses drawn for people"
            )
        data["pair_design"] = data.get("pair_design") or PairDesign.ALL_PAIRS
        data["pair_ask"] = data.get("pair_ask") or PairAsk.BOTH
        if data["mode"] == CampaignMode.PAIRWISE:
            design = data["pair_design"]
            if len(data.get("pair_choices") or []) < 2:
                self.add_error("pair_choices", "tick at least two choices")
            if design == PairDesign.ANCHOR and not data.get("pair_anchor"):
                self.add_error("pair_anchor", "name the anchor model for the anchor design")
            if design == PairDesign.SAMPLED and not data.get("pair_budget"):
                self.add_error("pair_budget", "give a budget (number of pairs) to sample")
        return data

    def campaign_settings(self) -> dict[str, Any]:
        """Keyword arguments for campaign_create / campaign_update."""
        data = self.cleaned_data
        fixed = data["skill_mode"] == SkillMode.FIXED
        settings = {
            "name": data["name"],
            "dataset": data["dataset"],
            "model_names": list(data["model_names"]),
            "skill_mode": data["skill_mode"],
            "fixed_skills": list(data["fixed_skills"]) if fixed else [],
            "overlap": data["overlap"],
            "show_reference": data["show_reference"],
            "annotators": [
                *data["annotators"],
                *cs.study_participant_ids(project=self.project, study_ids=data["studies"]),
            ],
            "groups": list(data["groups"]),
            "route_by_domain": data["route_by_domain"],
            "quota_per_annotator": data["quota_per_annotator"],
            "lease_seconds": data["lease_seconds"],
            "instructions": data["instructions"],
            "gold_rate": float(data["gold_percent"] / 100),
            "repeat_rate": float(data["repeat_percent"] / 100),
            "gold_feedback": data["gold_feedback"],
            "mode": data["mode"],
            "selection": data["selection"],
            "pair_strength": data["pair_strength"],
            "pair_rationale": data["pair_rationale"],
        }
        if data["mode"] == CampaignMode.PAIRWISE:
            design = data["pair_design"]
            settings |= {
                "pair_design": design,
                "pair_anchor": data["pair_anchor"] if design == PairDesign.ANCHOR else "",
                "pair_budget": data["pair_budget"] if design == PairDesign.SAMPLED else None,
                "pair_choices": list(data["pair_choices"]),
                "pair_ask": data["pair_ask"],
            }
        if self.locked:
            for name in CAMPAIGN_STRUCTURE:
                settings.pop(name, None)
        return settings


def _initial_from(campaign: Campaign) -> dict[str, Any]:
    minutes = campaign.lease_seconds % 60 == 0
    return {
        "name": campaign.name,
        "dataset": campaign.dataset_id,
        "model_names": campaign.model_names,
        "skill_mode": campaign.skill_mode,
        "fixed_skills": list(campaign.fixed_skills.values_list("pk", flat=True)),
        "overlap": campaign.overlap,
        "show_reference": campaign.show_reference,
        "selection": campaign.selection,
        "annotators": list(campaign.annotators.values_list("pk", flat=True)),
        "groups": list(campaign.groups.values_list("pk", flat=True)),
        "route_by_domain": campaign.route_by_domain,
        "quota_per_annotator": campaign.quota_per_annotator,
        "lease_value": campaign.lease_seconds // 60 if minutes else campaign.lease_seconds,
        "lease_unit": "minutes" if minutes else "seconds",
        "instructions": campaign.instructions,
        "gold_percent": Decimal(str(round(campaign.gold_rate * 100, 1))),
        "repeat_percent": Decimal(str(round(campaign.repeat_rate * 100, 1))),
        "gold_feedback": campaign.gold_feedback,
        "mode": campaign.mode,
        "pair_design": campaign.pair_design,
        "pair_anchor": campaign.pair_anchor,
        "pair_budget": campaign.pair_budget,
        "pair_choices": campaign.pair_choices or [PairChoice.A, PairChoice.B, PairChoice.TIE],
        "pair_ask": campaign.pair_ask,
        "pair_strength": campaign.pair_strength,
        "pair_rationale": campaign.pair_rationale,
    }


class CampaignStatusForm(forms.Form):
    status = forms.ChoiceField(
        choices=[
            (CampaignStatus.PAUSED, "pause"),
            (CampaignStatus.ACTIVE, "resume"),
            (CampaignStatus.FINISHED, "finish"),
        ]
    )


SCORE_CHOICES = [("", "–")] + [(str(n), str(n)) for n in range(1, 6)] + [("na", "N/A")]


class GoldTaskForm(forms.Form):
    """Mark one response of the campaign's dataset as a gold or attention-check task, with
    its known score per skill (at least one; only skills the task asks)."""

    item = forms.CharField(max_length=200, label="Item id", help_text="The item's id in the file.")
    model_name = forms.ChoiceField(label="Model")
    kind = forms.ChoiceField(
        choices=[(TaskKind.GOLD, "Gold (known scores)"), (TaskKind.ATTENTION, "Attention check")]
    )
    tolerance = forms.IntegerField(
        min_value=0, max_value=4, initial=0, help_text="How far a score may be from the known one."
    )
    explanation = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Shown to annotators when gold feedback is on.",
    )

    def __init__(
        self,
        *args,
        campaign: Campaign,
        skills: list[tuple[int, str]],
        model_names: list[str],
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        self.fields["model_name"].choices = [(n, n) for n in model_names]  # type: ignore[attr-defined]  # a ChoiceField
        for skill_id, name in skills:
            self.fields[f"skill_{skill_id}"] = forms.ChoiceField(
                choices=SCORE_CHOICES, required=False, label=name
            )

    def skill_fields(self):
        return [self[name] for name in self.fields if name.startswith("skill_")]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (its stub allows None)
        scores = {
            int(name[6:]): score_read(value)  # one of SCORE_CHOICES
            for name, value in data.items()
            if name.startswith("skill_") and value
        }
        if not scores:
            raise forms.ValidationError("give the known score of at least one skill")
        response = None
        if data.get("item") and data.get("model_name"):
            response = (
                Response.objects.filter(
                    item__dataset_id=self.campaign.dataset_id,
                    item__external_id=data["item"].strip(),
                    model_name=data["model_name"],
                )
                .select_related("item")
                .first()
            )
            if response is None:
                self.add_error("item", "no response of this model to an item with this id")
        data["response"], data["scores"] = response, scores
        return data

    def gold_settings(self) -> dict[str, Any]:
        """Keyword arguments for gold_task_set."""
        data = self.cleaned_data
        return {
            "response": data["response"],
            "scores": data["scores"],
            "kind": data["kind"],
            "tolerance": data["tolerance"],
            "explanation": data["explanation"],
        }


#: The known choices of a gold pair, as the campaign page names them (A and B: the models
#: picked as A and B on the form, whatever side annotators see them on).
PAIR_CHOICE_LABELS = {
    PairChoice.A.value: "A is better",
    PairChoice.B.value: "B is better",
    PairChoice.TIE.value: "Tie",
    PairChoice.BOTH_BAD.value: "Both are bad",
}
SHOWN_ORDERS = [("random", "At random"), ("a_left", "A on the left"), ("b_left", "B on the left")]


class GoldPairForm(forms.Form):
    """Make a pair of responses to one item of a pairwise campaign's dataset a gold pair or
    an attention check, with the known choice per question (at least one): the campaign's
    skills and/or the overall question, among the choices it offers."""

    item = forms.CharField(max_length=200, label="Item id", help_text="The item's id in the file.")
    model_a = forms.ChoiceField(label="Response A (model)")
    model_b = forms.ChoiceField(label="Response B (model)")
    kind = forms.ChoiceField(
        choices=[(TaskKind.GOLD, "Gold (known choices)"), (TaskKind.ATTENTION, "Attention check")],
        error_messages={
            "invalid_choice": "a pair is a gold pair or an attention check; training and "
            "qualification tasks are single responses (screening compares scores)"
        },
    )
    shown = forms.ChoiceField(
        choices=SHOWN_ORDERS,
        initial="random",
        label="Shown order",
        help_text="Which side annotators see A on.",
    )
    explanation = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Shown to annotators when gold feedback is on.",
    )

    def __init__(
        self,
        *args,
        campaign: Campaign,
        skills: list[tuple[int, str]],
        model_names: list[str],
        **kwargs,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.campaign = campaign
        for name in ("model_a", "model_b"):
            self.fields[name].choices = [(n, n) for n in model_names]  # type: ignore[attr-defined]  # a ChoiceField
        offered = [("", "–")] + [(c, PAIR_CHOICE_LABELS[c]) for c in pair_choices_of(campaign)]
        questions = skills if campaign.pair_ask != PairAsk.OVERALL else []
        for skill_id, name in questions:
            self.fields[f"choice_{skill_id}"] = forms.ChoiceField(
                choices=offered, required=False, label=name
            )
        if campaign.pair_ask != PairAsk.SKILLS:
            self.fields["choice_overall"] = forms.ChoiceField(
                choices=offered, required=False, label="Overall"
            )

    def choice_fields(self):
        return [self[name] for name in self.fields if name.startswith("choice_")]

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns (its stub allows None)
        choices: dict[int | None, str] = {
            None if name == "choice_overall" else int(name[7:]): value
            for name, value in data.items()
            if name.startswith("choice_") and value
        }
        if not choices:
            raise forms.ValidationError("give the known choice of at least one question")
        data["choices"] = choices
        model_a, model_b = data.get("model_a"), data.get("model_b")
        if model_a and model_a == model_b:
            self.add_error("model_b", "pick two different models")
            return data
        if data.get("item") and model_a and model_b:
            found = {
                r.model_name: r
                for r in Response.objects.filter(
                    item__dataset_id=self.campaign.dataset_id,
                    item__external_id=data["item"].strip(),
                    model_name__in=[model_a, model_b],
                ).select_related("item")
            }
            missing = [m for m in (model_a, model_b) if m not in found]
            if missing:
                self.add_error(
                    "item", f"no response of {', '.join(missing)} to an item with this id"
                )
            else:
                data["response_a"], data["response_b"] = found[model_a], found[model_b]
        return data

    def gold_settings(self) -> dict[str, Any]:
        """Keyword arguments for gold_pair_set."""
        data = self.cleaned_data
        shown = data["shown"]
        return {
            "response_a": data["response_a"],
            "response_b": data["response_b"],
            "choices": data["choices"],
            "kind": data["kind"],
            "b_left": None if shown == "random" else shown == "b_left",
            "explanation": data["explanation"],
        }


class GoldTaskRemoveForm(forms.Form):
    task = forms.IntegerField(min_value=1, max_value=2**63 - 1)


class AnnotatorExpertiseForm(forms.Form):
    """Declare an annotator's domains. Any annotator of the project is accepted; the
    select offers those the panel lists (`shown`: staff-picked annotators, or a page of a
    study's participants), never a crowd study's thousands at once."""

    annotator: forms.ModelChoiceField[User] = forms.ModelChoiceField(queryset=None)
    domains: forms.ModelMultipleChoiceField[Domain] = forms.ModelMultipleChoiceField(
        queryset=None,
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None ticked = no declared expertise (the annotator gets every item).",
    )

    def __init__(
        self, *args, project: Project, shown: list[tuple[int, str]] | None = None, **kwargs
    ) -> None:
        super().__init__(*args, **kwargs)
        self.fields["annotator"].queryset = cs.project_annotator_list(project=project)  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
        self.fields["domains"].queryset = domain_list_for_project(project=project)  # type: ignore[attr-defined]  # a ModelChoiceField: dynamic queryset
        self.show(shown or [])

    def show(self, users: list[tuple[int, str]]) -> None:
        """Offer these (id, username) in the select; validation still takes any of the
        project's annotators."""
        self.fields["annotator"].widget.choices = [("", "---------"), *users]  # type: ignore[attr-defined]  # a Select
