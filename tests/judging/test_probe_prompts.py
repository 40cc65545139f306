"""The bias probes' prompt transforms (judging.prompts.probes): pure, no database."""

from __future__ import annotations

import pytest

from judging import prompts
from judging.prompts import pairwise, probes


def test_pad_adds_a_restatement_of_the_first_sentence_and_nothing_else():
    text = "Paris is the capital of France. It has been since 987.\n"
    padded = probes.pad(text)
    assert padded.startswith(text.rstrip())
    added = padded[len(text.rstrip()) :]
    assert added == "\n\n" + probes.PAD_TEMPLATE.replace(
        "{first}", "Paris is the capital of France."
    )
    assert probes.pad("   ") == "   "  # nothing to restate
    assert probes.first_sentence("No end mark here") == "No end mark here."
    assert probes.first_sentence("Line one\nline two. More.") == "Line one."


@pytest.mark.parametrize(
    ("share", "expected"),
    [(0.5, "one two\nthree"), (0.2, "one two"), (0.99, "one two\nthree four  five six")],
)
def test_truncate_keeps_a_share_of_the_words_and_their_layout(share, expected):
    # 6 words: ceil(6 x 0.5) = 3, ceil(6 x 0.2) = 2, ceil(6 x 0.99) = 6
    assert probes.truncate("one two\nthree four  five six", share) == expected
    assert probes.truncate("", 0.5) == ""


def test_names_reorder_distraction_and_bandwagon_texts():
    assert probes.names_shown("Hi.", "gpt  4\nx") == "Response from gpt 4 x:\n\nHi."
    assert probes.reorder(["a", "b", "c"]) == ["c", "b", "a"]
    assert probes.reorder(["a", "b", "c"], "rotate") == ["b", "c", "a"]
    assert probes.distraction("Text.  ", 1) == "Text.\n\n" + probes.DISTRACTIONS[1]
    # order 0 shows the challenger first: the unpreferred one is the other position
    line = probes.bandwagon_line
    assert line(target="unpreferred", order=0, base_overall="challenger").endswith("Response 2.")
    assert line(target="unpreferred", order=1, base_overall="challenger").endswith("Response 1.")
    assert line(target="unpreferred", order=0, base_overall="anchor").endswith("Response 1.")
    assert line(target="unpreferred", order=1, base_overall="anchor").endswith("Response 2.")
    assert line(target="unpreferred", order=0, base_overall="tie").endswith("Response 2.")
    assert line(target="1", order=1, base_overall="anchor").endswith("Response 1.")


def test_the_bandwagon_note_goes_into_the_template_after_the_second_response():
    template = pairwise.pair_template(with_reference=False)
    note = "Most people {liked} Response 1."
    user = probes.with_note_after_responses(template.user_template, note, pairwise.SECOND_END)
    rendered = pairwise.render_pair(
        pairwise.PairTemplate("p", "1", "", user, False),
        instruction="Q",
        first="A [End of response 2]\n\n",  # a response cannot move the note
        second="B",
        skills=[{"name": "Factuality", "anchors": ["1", "2", "3", "4", "5"]}],
    )[1]["content"]
    assert f"B\n{pairwise.SECOND_END}\n\n{note}\n\nHow to answer" in rendered
    assert rendered.count(note) == 1
    with pytest.raises(prompts.PromptError):
        probes.with_note_after_responses("no marks", note, pairwise.SECOND_END)


def test_the_reference_probe_swaps_builtins_and_edits_custom_templates():
    plain = prompts.builtin_template(with_reference=False)
    with_ref = prompts.builtin_template(with_reference=True)
    assert probes.reference_template(plain, with_ref) is with_ref
    assert probes.reference_template(with_ref, plain) is plain
    custom = prompts.TemplateText.from_text(
        "{skills}\n{instruction}\n[Response to score]\n{response}\nEnd", key="c"
    )
    added = probes.reference_template(custom, None)
    assert added.with_reference
    assert added.user_template.index("{reference}") < added.user_template.index("[Response to")
    removed = probes.reference_template(added, None)
    assert not removed.with_reference and removed.user_template == custom.user_template
    odd = prompts.TemplateText.from_text(
        "{skills} {instruction} {response} R: {reference}", key="o"
    )
    assert "(no reference answer is given)" in probes.reference_template(odd, None).user_template


def test_parameters_are_checked_and_defaulted():
    assert probes.clean_params("truncate", {}) == {"share": 0.5}
    assert probes.clean_params("truncate", {"share": 0.25, "limit": "10"}) == {
        "share": 0.25,
        "limit": 10,
    }
    assert probes.clean_params("bandwagon", None) == {"target": "unpreferred"}
    assert probes.clean_params("distraction", {"sentence": 2}) == {
        "target": "challenger",
        "sentence": 2,
    }
    for kind, params, message in [
        ("nope", {}, "unknown probe"),
        ("pad", {"share": 0.5}, "takes no parameter"),
        ("truncate", {"share": 1}, "between 0 and 1"),
        ("truncate", {"share": "half"}, "must be a number"),
        ("truncate", {"share": float("nan")}, "between 0 and 1"),
        ("rubric_order", {"order": "random"}, "reverse"),
        ("bandwagon", {"target": "3"}, "target"),
        ("distraction", {"sentence": 9}, "sentence"),
        ("pad", {"limit": 0}, "limit"),
        ("pad", {"limit": True}, "limit"),
    ]:
        with pytest.raises(prompts.PromptError, match=message):
            probes.clean_params(kind, params)
    assert probes.probe_texts("distraction", {"sentence": 1}) == [probes.DISTRACTIONS[1]]
    assert "50%" in probes.probe_texts("truncate", {"share": 0.5})[0]
