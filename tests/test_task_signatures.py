"""Every Celery task takes only JSON primitives, and is routed to a declared queue."""

import inspect

from django.conf import settings

from flaskweb.celery import app

JSON_PRIMITIVES = {int, str, float, bool, "int", "str", "float", "bool", "int | None", "str | None"}


def _project_tasks():
    app.loader.import_default_modules()
    return {
        n: t
        for n, t in app.tasks.items()
        if n.split(".")[0] in {"annotation", "judging", "analytics"}
    }


def test_there_are_tasks_to_check():
    assert "annotation.tasks.dataset_import_task" in _project_tasks()


def test_every_task_argument_is_a_json_primitive():
    for name, task in _project_tasks().items():
        for param in inspect.signature(task.run).parameters.values():
            assert param.annotation in JSON_PRIMITIVES, f"{name}({param.name}: {param.annotation})"


def test_imports_go_to_the_imports_queue():
    route = settings.CELERY_TASK_ROUTES["annotation.tasks.dataset_import_task"]
    assert route == {"queue": "imports"}
