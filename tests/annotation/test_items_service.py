"""Items and responses written for other importers (annotation/services/items.py)."""

from __future__ import annotations

import pytest

from annotation.models import Domain, Item, ItemDomain, Response
from annotation.services.items import (
    ItemSpec,
    dataset_get_or_create,
    items_create,
    responses_create,
    texts_fill,
)

pytestmark = pytest.mark.django_db


def test_items_responses_and_text_fills(project):
    dataset, created = dataset_get_or_create(project=project, name="From scores")
    assert created and dataset_get_or_create(project=project, name="From scores") == (
        dataset,
        False,
    )
    history = Domain.objects.get(project__isnull=True, name="History")
    ids = items_create(
        dataset=dataset,
        items=[
            ItemSpec("a", instruction="Q a", difficulty=2, domain_ids=(history.pk,)),
            ItemSpec("b"),  # known only by its id
            ItemSpec("c", reference_answer="R c"),
        ],
        batch=2,  # two batches
    )
    assert set(ids) == {"a", "b", "c"}
    assert Item.objects.get(pk=ids["b"]).instruction == ""
    assert list(ItemDomain.objects.values_list("item_id", "domain_id")) == [(ids["a"], history.pk)]
    pks = responses_create(responses=[(ids["a"], "m1", "x"), (ids["b"], "m1", "")], batch=1)
    assert [Response.objects.get(pk=pk).model_name for pk in pks] == ["m1", "m1"]
    texts_fill(items={ids["b"]: {"instruction": "Q b"}}, responses={pks[1]: "y"})
    assert Item.objects.get(pk=ids["b"]).instruction == "Q b"
    assert Response.objects.get(pk=pks[1]).text == "y"
    with pytest.raises(ValueError, match="can be filled in"):
        texts_fill(items={ids["a"]: {"difficulty": 5}}, responses={})
    assert Item.objects.get(pk=ids["a"]).difficulty == 2
