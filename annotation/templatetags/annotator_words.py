"""The words the scoring page's scripts say to the annotator (static/js/annotate.js,
annotate_pair.js, submit_retry.js, scroll_hint.js), in the request's language.

The page renders them once as data (`{% annotator_words as words %}{{ words|json_script:
"annotate-strings" }}`: a JSON block the CSP allows, never executed) and each script reads
them, falling back to its own English when the block is missing. `{name}`-style
placeholders are filled in by the script.
"""

from __future__ import annotations

from django import template
from django.utils.translation import gettext, gettext_noop

register = template.Library()

#: key -> the English text (marked for the catalogue here, translated per request below)
WORDS = {
    "scoreMissing": gettext_noop("Please score every skill first: {name} has no score yet."),
    "scoreDone": gettext_noop("All skills scored. Press Enter to submit."),
    "na": gettext_noop("N/A"),
    "naMeans": gettext_noop("this skill does not apply to the response"),
    "answerMissing": gettext_noop("Please answer every question first: {name} has no answer yet."),
    "answerDone": gettext_noop("All questions answered. Press Enter to submit."),
    "askStrength": gettext_noop("How much better? Press 1 (slightly) or 2 (much), or move on."),
    "strengthFirst": gettext_noop("Say which response is better (A or B) before how much."),
    "retryIn": gettext_noop(
        "Connection lost — trying again in {seconds} s… Your answers are kept."
    ),
    "retrying": gettext_noop("Trying again…"),
    "serverError": gettext_noop("The server could not answer (error {status})."),
    "answersKept": gettext_noop("Your answers are still here."),
    "pressEnter": gettext_noop("Press Enter to try again, or reload the page."),
    "connected": gettext_noop("Connected again."),
    "saved": gettext_noop("Saved."),
    "frozen": gettext_noop(
        "Your answers are kept as they are while they are sent again. Press Enter to try now."
    ),
    "moreBelow": gettext_noop("More below"),
}


@register.simple_tag
def annotator_words() -> dict[str, str]:
    """WORDS in the active language."""
    return {key: gettext(text) for key, text in WORDS.items()}
