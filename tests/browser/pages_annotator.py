"""The pages an annotator or study participant sees, by URL name: the accessibility walk
(tests/browser/test_accessibility_annotator.py) visits each of them at 390 px and 1440 px in
every state it lists, and fails when one of these names was never visited. A URL name that is
in no list of tests/browser/pages_*.py fails tests/test_page_registry.py, so a new page
cannot be missed."""

from __future__ import annotations

#: url name -> what the walk does there
ANNOTATOR_PAGES: dict[str, str] = {
    "login": "the sign-in page, and refused with a wrong password",
    "annotation:my-campaigns": "My tasks: a study participant's and an annotator's",
    "annotation:annotate": "the scoring card (training, qualification, a task, all done, "
    "screened out), a break, the pair card before and after answering",
    "annotation:annotate-submit": "the cards its htmx answers swap in: an incomplete card's "
    "error (pointwise and pairwise), gold feedback, a break, the next card with 'Saved.'",
    "annotation:annotate-skip": "its htmx answer: a skip without a reason, refused on the card",
    "annotation:study-entry": "a study link opened without the worker's id: refused",
    "annotation:study-consent": "the consent text with agree and decline",
    "annotation:study-instructions": "the campaign's instructions before the first task",
    "annotation:study-finish": "before the work is done, when it is due, the completion code, "
    "and a screened-out participant's code",
    "annotation:study-continue": "the resume code asked on another browser, and refused",
    "annotation:study-resume": "a study page opened once the study session has ended",
}
