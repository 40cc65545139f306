"""The raw-SQL helpers of flaskweb/db.py: `instance_from` builds the instance Django's own
`Model.from_db` builds from the same columns, whatever shapes were built before."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from annotation.models import Assignment, Campaign
from flaskweb.db import instance_from


def _from_db(model, fields: dict):
    names = [f.attname for f in model._meta.concrete_fields if f.attname in fields]
    return model.from_db("default", names, [fields[name] for name in names])


def _state(instance) -> tuple:
    return (
        type(instance),
        {f.attname: instance.__dict__.get(f.attname) for f in type(instance)._meta.concrete_fields},
        instance.get_deferred_fields(),
        instance._state.adding,
        instance._state.db,
    )


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (Assignment, {"id": 7, "task_id": 3, "status": "active"}),
        (Assignment, {"status": "active", "task_id": 3, "id": 7}),  # the same, another order
        (Assignment, {"id": 8}),
        (Campaign, {"id": 2, "skill_mode": "item", "pair_ask": "skills"}),
        (Token, {"key": "k" * 40, "user_id": 5}),
        (get_user_model(), {"id": 5, "username": "u", "is_active": True, "is_staff": False}),
    ],
)
def test_an_instance_is_what_from_db_makes(model, fields):
    for _ in range(2):  # the first call lays the shape out, the second reuses it
        made = instance_from(model, fields)
        assert _state(made) == _state(_from_db(model, fields))
        assert made.get_deferred_fields() == {
            f.attname for f in model._meta.concrete_fields if f.attname not in fields
        }


def test_every_field_given_defers_nothing():
    fields = {f.attname: None for f in Token._meta.concrete_fields}
    fields.update(key="k" * 40, user_id=1)
    assert instance_from(Token, fields).get_deferred_fields() == set()


def test_an_unknown_field_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(ValueError, match=r"Assignment has no field \['nope'\]"):
            instance_from(Assignment, {"id": 1, "nope": 2})
