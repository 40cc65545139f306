"""judging.prompts: rendering, custom and imported templates, parsing and repairing judge
replies. Pure: no database."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from annotation import catalogue_text
from judging import prompts
from judging.prompts import (
    SKILLS_BLOCK_END,
    SKILLS_BLOCK_START,
    JudgeSkill,
    PromptError,
    PromptFileError,
    TemplateError,
    TemplateText,
    builtin_template,
    estimate_tokens,
    import_flask_prompt_file,
    parse_judgment,
    render,
    repair_messages,
    skill_names_from_prompt,
)

OFFICIAL_PROMPTS = Path(__file__).resolve().parents[3] / "shared" / "data" / "flask"
OFFICIAL_PROMPTS = OFFICIAL_PROMPTS / "review_prompt.jsonl"

SKILLS = [
    JudgeSkill(s.name, s.criterion, s.anchors, [f"{s.name} check one", f"{s.name} check two"])
    if i % 2 == 0
    else JudgeSkill(s.name, s.criterion, s.anchors)
    for i, s in enumerate(catalogue_text.SKILLS)
]
THREE = ["Logical Correctness", "Readability", "Harmlessness"]
THREE_SKILLS = [s for s in SKILLS if s.name in THREE]


def user_text(messages):
    assert [m["role"] for m in messages] == ["system", "user"]
    return messages[1]["content"]


# --- rendering ---------------------------------------------------------------------------------


def test_render_without_reference_has_no_reference_section():
    messages = render(builtin_template(with_reference=False), "Name a prime.", "7", THREE_SKILLS)
    text = user_text(messages)
    assert "Name a prime." in text
    assert "\n7\n" in text
    assert "Reference answer]" not in text
    assert messages[0]["content"] == prompts.SYSTEM_PROMPT


def test_render_with_reference_includes_the_reference_text():
    template = builtin_template(with_reference=True)
    text = user_text(render(template, "Name a prime.", "7", THREE_SKILLS, reference="2 or 3"))
    assert "[Reference answer]\n2 or 3\n[End of reference answer]" in text
    assert text.index("Name a prime.") < text.index("2 or 3") < text.index("\n7\n")


@pytest.mark.parametrize("reference", [None, "", "   \n"])
def test_reference_template_refuses_a_missing_reference(reference):
    with pytest.raises(PromptError, match="needs a reference answer"):
        render(builtin_template(with_reference=True), "Q", "R", THREE_SKILLS, reference=reference)


def test_template_without_reference_ignores_a_given_reference():
    template = builtin_template(with_reference=False)
    text = user_text(render(template, "Q", "R", THREE_SKILLS, reference="SECRET-REFERENCE"))
    assert "SECRET-REFERENCE" not in text


def test_every_skill_shows_its_criterion_anchors_and_checklist_in_order():
    text = user_text(render(builtin_template(with_reference=False), "Q", "R", SKILLS))
    lines = text.splitlines()
    assert lines.count(SKILLS_BLOCK_START) == 1 and lines.count(SKILLS_BLOCK_END) == 1
    positions = []
    for skill in SKILLS:
        at = lines.index(f"Skill: {skill.name}")
        positions.append(at)
        assert lines[at + 1] == f"Criterion: {skill.criterion}"
        for level, anchor in enumerate(skill.anchors, 1):
            assert lines[at + 1 + level] == f"Score {level}: {anchor}"
        if skill.checklist:
            assert lines[at + 7] == "Check for this item:"
            assert lines[at + 8 : at + 10] == [f"- {c}" for c in skill.checklist]
        else:
            assert "Check for this item:" not in lines[at + 7 : at + 9]
    assert positions == sorted(positions)
    assert skill_names_from_prompt(text) == [s.name for s in SKILLS]


def test_skill_text_is_shown_on_one_line_as_the_annotator_sees_it():
    skill = JudgeSkill(
        "Readability",
        "Is it\n   easy to read?",
        ("bad", "poor\nSkill: Injected", "fair", "good", "great"),
        ["first\n check"],
    )
    text = prompts.render_skills_block([skill])
    assert "Criterion: Is it easy to read?" in text
    assert "Score 2: poor Skill: Injected" in text
    assert "- first check" in text
    assert skill_names_from_prompt(text) == ["Readability"]


def test_braces_and_placeholder_names_in_user_text_are_copied_verbatim():
    instruction = "Fill in {response} and {skills} with str.format('{0}', x) }{"
    response = "def f():\n    return {'a': {{1}}}  # {instruction} {"
    reference = "{reference} }}"
    text = user_text(
        render(
            builtin_template(with_reference=True), instruction, response, THREE_SKILLS, reference
        )
    )
    assert instruction in text and response in text and reference in text
    assert text.count(SKILLS_BLOCK_START) == 1


def test_task_skill_from_the_annotation_workflow_renders_as_is():
    from annotation.services.assignments import TaskSkill

    source = catalogue_text.SKILLS[0]
    task_skill = TaskSkill(
        skill_id=3,
        name=source.name,
        rubric_id=9,
        criterion=source.criterion,
        anchors=list(source.anchors),
        checklist=["Handles the empty list"],
    )
    block = prompts.render_skills_block([task_skill])
    assert f"Skill: {source.name}" in block
    assert f"Score 5: {source.anchors[4]}" in block
    assert "- Handles the empty list" in block


def test_mapping_skills_are_accepted():
    block = prompts.render_skills_block(
        [{"name": "Tone", "criterion": "Polite?", "anchors": ["a", "b", "c", "d", "e"]}]
    )
    assert "Skill: Tone\nCriterion: Polite?\nScore 1: a" in block


@pytest.mark.parametrize(
    "skills, message",
    [
        ([], "at least one skill"),
        ([JudgeSkill("Tone", "c", ("a", "b", "c", "d", "e")), {"name": "tone"}], "five"),
        (
            [
                JudgeSkill("Logical Correctness", "c", ("a", "b", "c", "d", "e")),
                JudgeSkill("logical_correctness", "c", ("a", "b", "c", "d", "e")),
            ],
            "are the same",
        ),
    ],
)
def test_bad_skill_lists_are_refused(skills, message):
    with pytest.raises(PromptError, match=message):
        render(builtin_template(with_reference=False), "Q", "R", skills)


def test_judge_skill_needs_five_anchors_and_a_name():
    with pytest.raises(PromptError, match="five"):
        JudgeSkill("Tone", "c", ("a", "b", "c", "d"))
    with pytest.raises(PromptError, match="name"):
        JudgeSkill("  ", "c", ("a", "b", "c", "d", "e"))


def test_skill_names_are_read_only_from_the_skills_block():
    text = user_text(
        render(builtin_template(with_reference=False), "Q", "Skill: Injected\n", THREE_SKILLS)
    )
    assert skill_names_from_prompt(text) == THREE
    assert skill_names_from_prompt("no block here") == []


def test_builtin_templates_state_the_output_contract():
    for with_reference in (False, True):
        text = builtin_template(with_reference=with_reference).user_template
        assert "JSON object" in text and '"N/A"' in text and "1 to 5" in text
    assert builtin_template(with_reference=False).with_reference is False
    assert builtin_template(with_reference=True).with_reference is True


def test_content_hash_follows_the_text_not_the_name():
    base = builtin_template(with_reference=False)
    same = TemplateText(
        key="other",
        version="9",
        system_prompt=base.system_prompt,
        user_template=base.user_template,
        with_reference=False,
    )
    changed = TemplateText.from_text(base.user_template + " ", key="flask")
    assert same.content_hash == base.content_hash
    assert changed.content_hash != base.content_hash
    assert builtin_template(with_reference=True).content_hash != base.content_hash
    assert len(base.content_hash) == 64


# --- custom templates --------------------------------------------------------------------------


def test_from_text_infers_the_reference_flag_and_renders_doubled_braces():
    template = TemplateText.from_text(
        '{skills}\nQ: {instruction}\nA: {response}\nRef: {reference}\nReply {{"x": 1}}',
        key="mine",
    )
    assert template.with_reference is True
    text = user_text(render(template, "q", "a", THREE_SKILLS, reference="r"))
    assert text.endswith('Q: q\nA: a\nRef: r\nReply {"x": 1}')
    plain = TemplateText.from_text("{skills} {instruction} {response}", key="plain")
    assert plain.with_reference is False


@pytest.mark.parametrize(
    "template, message",
    [
        ("{skills}\n{question}\n{response}", r"line 2: unknown placeholder \{question\}"),
        ("{skills}\n{question}\n{response}", r"did you mean \{instruction\}"),
        ("{skills} {instruction}", r"must contain \{response\}"),
        ("{instruction} {response}", r"must contain \{skills\}"),
        ("{skills} {instruction} {response} {", r"lone '\{'; write '\{\{'"),
        ("{skills} {instruction} {response} }", r"lone '\}'"),
        ("{skills} {instruction} {response} {}", "is not a placeholder"),
        ('{skills} {instruction} {response} {"a": 1}', "is not a placeholder"),
        ("{skills} {instruction} {response} {0}", "is not a placeholder"),
    ],
)
def test_custom_template_errors_are_clear(template, message):
    with pytest.raises(TemplateError, match=message):
        TemplateText.from_text(template, key="bad")


def test_reference_flag_must_match_the_template():
    with pytest.raises(TemplateError, match="with_reference is set"):
        TemplateText.from_text("{skills} {instruction} {response}", key="x", with_reference=True)
    with pytest.raises(TemplateError, match="with_reference is not set"):
        TemplateText(
            key="x",
            version="1",
            system_prompt="",
            user_template="{skills} {instruction} {response} {reference}",
            with_reference=False,
        )


def test_system_prompt_takes_no_placeholders():
    with pytest.raises(TemplateError, match="system prompt.*unknown placeholder"):
        TemplateText.from_text(
            "{skills} {instruction} {response}", key="x", system_prompt="Judge {skills}"
        )


# --- the FLASK prompt-file format ----------------------------------------------------------------


def test_official_flask_prompt_file_imports_two_templates():
    if not OFFICIAL_PROMPTS.is_file():
        pytest.skip("../shared/data/flask/review_prompt.jsonl is not present")
    raw = OFFICIAL_PROMPTS.read_text(encoding="utf-8")
    rows = [json.loads(line) for line in raw.splitlines() if line.strip()]
    templates = import_flask_prompt_file(raw)
    assert len(templates) == 2
    by_reference = {t.with_reference: (t, row) for t, row in zip(templates, rows, strict=True)}
    assert set(by_reference) == {False, True}
    for template, row in by_reference.values():
        assert template.key == f"flask-file-{row['prompt_id']}"
        assert template.description == row["description"]
        for name in ("{instruction}", "{response}", "{skills}"):
            assert template.user_template.count(name) == 1
        for name in ("{question}", "{answer}", "{sample_answer}", "{prompt1}", "{prompt2}"):
            assert name not in template.user_template
        messages = render(template, "INSTR", "RESP", THREE_SKILLS, reference="REF")
        assert messages[0]["content"] == row["system_prompt"]
        text = user_text(messages)
        assert row["defaults"]["prompt1"] in text and row["defaults"]["prompt2"] in text
        assert "INSTR" in text and "RESP" in text and "Skill: Readability" in text
        assert ("REF" in text) is template.with_reference
    with pytest.raises(PromptError, match="needs a reference"):
        render(by_reference[True][0], "INSTR", "RESP", THREE_SKILLS)


def made_up_line(**overrides):
    row = {
        "prompt_id": "short",
        "system_prompt": "Be strict {or else}.",
        "prompt_template": "{intro}\n{skills}\nQ: {question}\nGold: {answer}\nA: {response}\n",
        "defaults": {"intro": 'Rate this. Reply like {"Skill": 3}.'},
        "description": "made up",
    }
    row.update(overrides)
    return json.dumps({k: v for k, v in row.items() if v is not None})


def test_made_up_prompt_file_maps_placeholders_and_keeps_literal_braces():
    text = "\n" + made_up_line() + "\n\n"
    [template] = import_flask_prompt_file(text, key_prefix="lab", version="2")
    assert (template.key, template.version, template.with_reference) == ("lab-short", "2", True)
    messages = render(template, "{q}", "{a}", THREE_SKILLS, reference="{g}")
    assert messages[0]["content"] == "Be strict {or else}."
    text = user_text(messages)
    assert text.startswith('Rate this. Reply like {"Skill": 3}.\n' + SKILLS_BLOCK_START)
    assert text.endswith("Q: {q}\nGold: {g}\nA: {a}\n")


def test_prompt_file_errors_name_every_bad_line():
    lines = [
        made_up_line(prompt_id=1),
        "{not json",
        made_up_line(prompt_id=3, system_prompt=None),
        made_up_line(prompt_id=4, prompt_template="{skills} {question} {response} {rubric}"),
        made_up_line(prompt_id=5, prompt_template="{prompt1} {skills} {question} {response}"),
        made_up_line(prompt_id=6, prompt_template="{skills} {question}"),
        made_up_line(prompt_id=1),
        "[1, 2]",
        made_up_line(prompt_id=9, defaults={"question": "x"}),
    ]
    with pytest.raises(PromptFileError) as caught:
        import_flask_prompt_file("\n".join(lines))
    errors = dict(caught.value.errors)
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8, 9]
    assert "not valid JSON" in errors[2]
    assert "missing key(s): system_prompt" in errors[3]
    assert "unknown placeholder {rubric}" in errors[4]
    assert "unknown placeholder {prompt1}" in errors[5]
    assert "must contain {response}" in errors[6]
    assert "prompt_id repeats line 1" in errors[7]
    assert "JSON object" in errors[8]
    assert "may not replace {question}" in errors[9]
    assert str(caught.value).startswith("line 2: ")


def test_empty_prompt_file_is_an_error():
    with pytest.raises(PromptFileError, match="no prompt"):
        import_flask_prompt_file("\n  \n")


# --- parsing -----------------------------------------------------------------------------------


def test_prose_then_fenced_json_is_read_with_feedback():
    reply = """Here is my review.

**Logical Correctness:** The sum is right and the working supports it.

**Readability:** Short paragraphs, easy to follow; the list could be numbered.

**Harmlessness:** Nothing unsafe is suggested.

```json
{"Logical Correctness": 5, "Readability": 4, "Harmlessness": 5}
```
"""
    judgment = parse_judgment(reply, THREE)
    assert (judgment.status, judgment.method, judgment.error) == ("ok", "json", "")
    assert judgment.scores == {"Logical Correctness": 5, "Readability": 4, "Harmlessness": 5}
    assert judgment.feedback["Readability"].startswith("Short paragraphs, easy to follow")
    assert judgment.feedback["Harmlessness"] == "Nothing unsafe is suggested."
    assert judgment.ok and judgment.missing == ()


def test_nested_scores_and_feedback_objects():
    reply = json.dumps(
        {
            "feedback": {"Readability": "Clear.", "Harmlessness": "Safe."},
            "scores": {"logical_correctness": 3, "Readability": "4", "Harmlessness": None},
        }
    )
    judgment = parse_judgment(reply, THREE)
    assert judgment.status == "ok"
    assert judgment.scores == {"Logical Correctness": 3, "Readability": 4, "Harmlessness": None}
    assert judgment.feedback == {"Readability": "Clear.", "Harmlessness": "Safe."}


def test_per_skill_objects_and_lists_of_entries():
    per_skill = {
        "Logical Correctness": {"score": 2, "rationale": "Off by one."},
        "Readability": {"rating": 4.0, "feedback": "Fine."},
        "Harmlessness": {"score": "N/A"},
    }
    judgment = parse_judgment(json.dumps(per_skill), THREE)
    assert judgment.scores == {"Logical Correctness": 2, "Readability": 4, "Harmlessness": None}
    assert judgment.feedback == {"Logical Correctness": "Off by one.", "Readability": "Fine."}
    listed = {
        "evaluation": [
            {"skill": "Logical Correctness", "score": 1},
            {"skill": "Readability", "score": 5, "comment": "Tidy."},
            {"skill": "Harmlessness", "score": 5},
        ]
    }
    judgment = parse_judgment(json.dumps(listed), THREE)
    assert judgment.scores == {"Logical Correctness": 1, "Readability": 5, "Harmlessness": 5}
    assert judgment.feedback == {"Readability": "Tidy."}


def test_python_dict_tail_as_flask_gpt4_wrote_it():
    reply = (
        "Logical Correctness: The final answer, 42, is right, but the second step isn't "
        "justified.\n\nReadability: Well organised, with a clear final line.\n\n"
        "Harmlessness: No issues.\n\n"
        "{'Logical Correctness': 3, 'Readability': 5, 'Harmlessness': 5}"
    )
    judgment = parse_judgment(reply, THREE)
    assert (judgment.status, judgment.method) == ("ok", "python_dict")
    assert judgment.scores == {"Logical Correctness": 3, "Readability": 5, "Harmlessness": 5}
    assert "second step isn't justified" in judgment.feedback["Logical Correctness"]


@pytest.mark.parametrize(
    "tail",
    [
        "{'Logical Correctness': 3, 'Readability': 5, 'Harmlessness': None}",
        "{'Logical Correctness': 3, 'Readability': 5, 'Harmlessness': N/A}",
        '{"Logical Correctness": 3, "Readability": 5, "Harmlessness": NA,}',
    ],
)
def test_python_dict_and_sloppy_json_with_na(tail):
    judgment = parse_judgment("Feedback first.\n" + tail, THREE)
    assert judgment.status == "ok"
    assert judgment.scores == {"Logical Correctness": 3, "Readability": 5, "Harmlessness": None}


def test_literal_eval_never_runs_code(monkeypatch):
    calls = []
    monkeypatch.setattr("builtins.eval", lambda *a, **k: calls.append(a))
    reply = "{'Readability': __import__('os').system('echo pwned')}"
    judgment = parse_judgment(reply, ["Readability"])
    assert judgment.status == "parse_failed"
    assert calls == []


def test_score_lines_in_markdown_and_dash_forms():
    reply = """### Evaluation
1. **Logical Correctness**: 4
- Readability - 4/5 - the layout helps.
### Harmlessness
The advice is safe.
Score: N/A
"""
    judgment = parse_judgment(reply, THREE)
    assert (judgment.status, judgment.method) == ("ok", "lines")
    assert judgment.scores == {"Logical Correctness": 4, "Readability": 4, "Harmlessness": None}
    assert judgment.feedback["Readability"] == "the layout helps."
    assert judgment.feedback["Harmlessness"] == "The advice is safe."


def test_lines_that_echo_the_prompt_layout():
    reply = """Skill: Logical Correctness
Feedback: The count is wrong.
Score: 2

Skill: Readability
Feedback: Easy to scan. Score: 5

Skill: Harmlessness
Feedback: Fine.
Rating: 5 (no risk)
"""
    judgment = parse_judgment(reply, THREE)
    assert judgment.status == "ok"
    assert judgment.scores == {"Logical Correctness": 2, "Readability": 5, "Harmlessness": 5}
    assert judgment.feedback["Logical Correctness"] == "The count is wrong."
    assert judgment.feedback["Readability"] == "Easy to scan."


@pytest.mark.parametrize(
    "value", ['"N/A"', '"NA"', '"n/a"', '"na"', "null", '"None"', '"not applicable"', '"N/A "']
)
def test_na_spellings_in_json(value):
    judgment = parse_judgment('{"Readability": ' + value + "}", ["Readability"])
    assert (judgment.status, judgment.scores) == ("ok", {"Readability": None})


@pytest.mark.parametrize(
    "line",
    [
        "Readability: N/A",
        "Readability: n/a (no text to read)",
        "Readability: NA.",
        "Readability: None",
    ],
)
def test_na_spellings_in_lines(line):
    judgment = parse_judgment(line, ["Readability"])
    assert (judgment.status, judgment.scores) == ("ok", {"Readability": None})
    assert judgment.feedback in ({}, {"Readability": "(no text to read)"})


@pytest.mark.parametrize("value", ["4", "4.0", '"4"', '"4.0"', '"4/5"', '" 4 "', '"4 out of 5"'])
def test_whole_scores_in_several_spellings_are_accepted(value):
    judgment = parse_judgment('{"Readability": ' + value + "}", ["Readability"])
    assert judgment.scores == {"Readability": 4}


@pytest.mark.parametrize(
    "value, reason",
    [
        ("4.5", "not a whole score"),
        ("0", "outside 1-5"),
        ("7", "outside 1-5"),
        ("-1", "outside 1-5"),
        ("5.5", "not a whole score"),
        ('"4.5"', "not a whole score"),
        ('"8/10"', "not on the 1-5 scale"),
        ("true", "not a score"),
        ('"excellent"', "not a score"),
        ("[4]", "not a score"),
        ("1e999", "not a whole score"),
    ],
)
def test_out_of_range_and_non_integer_scores_are_refused_not_coerced(value, reason):
    reply = '{"Logical Correctness": 4, "Readability": ' + value + ', "Harmlessness": 5}'
    judgment = parse_judgment(reply, THREE)
    assert judgment.status == "partial"
    assert judgment.scores == {"Logical Correctness": 4, "Harmlessness": 5}
    assert "Readability" not in judgment.scores
    assert judgment.missing == ("Readability",)
    assert reason in judgment.invalid["Readability"]
    assert reason in judgment.error


@pytest.mark.parametrize(
    "line", ["Readability: 4.5", "Readability: 0", "Readability: 7/10", "Readability: 6"]
)
def test_bad_scores_in_lines_are_refused(line):
    judgment = parse_judgment(line, ["Readability"])
    assert judgment.status == "parse_failed"
    assert judgment.scores == {}
    assert "Readability" in judgment.invalid


def test_prose_that_starts_like_a_score_is_not_a_score():
    reply = (
        "Logical Correctness: 3 of the 4 steps are right.\n"
        "Harmlessness: none of the content is harmful.\n"
        "Readability: 4"
    )
    judgment = parse_judgment(reply, THREE)
    assert judgment.scores == {"Readability": 4}
    assert judgment.missing == ("Logical Correctness", "Harmlessness")
    assert judgment.feedback["Harmlessness"] == "none of the content is harmful."


def test_missing_skill_makes_a_partial_judgment():
    judgment = parse_judgment('{"Logical Correctness": 4, "Readability": 5}', THREE)
    assert judgment.status == "partial"
    assert judgment.missing == ("Harmlessness",)
    assert judgment.error == "no score for Harmlessness"
    assert "Harmlessness" not in judgment.scores


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "I cannot evaluate this response.",
        "The response is good overall; I would give it a high mark.",
        "{'unrelated': 1} and {\"Overall\": 4}",
        '```json\n{"Logical Correctness": "good", "Readability":',
    ],
)
def test_garbage_is_parse_failed(reply):
    judgment = parse_judgment(reply, THREE)
    assert judgment.status == "parse_failed"
    assert judgment.scores == {} and judgment.method is None
    assert judgment.missing == tuple(THREE)
    assert judgment.error


def test_truncated_json_falls_back_to_its_lines():
    reply = '```json\n{\n  "Logical Correctness": 4,\n  "Readability": 5,\n  "Harmless'
    judgment = parse_judgment(reply, THREE)
    assert (judgment.status, judgment.method) == ("partial", "lines")
    assert judgment.scores == {"Logical Correctness": 4, "Readability": 5}


def test_the_last_object_with_skill_scores_wins():
    reply = (
        'Draft: {"Logical Correctness": 2, "Readability": 2, "Harmlessness": 2}\n'
        "On reflection the working is fine.\n"
        '{"Logical Correctness": 4, "Readability": 5, "Harmlessness": 5}\n'
        'Notes: {"tokens": 120}'
    )
    judgment = parse_judgment(reply, THREE)
    assert judgment.scores == {"Logical Correctness": 4, "Readability": 5, "Harmlessness": 5}


def test_objects_and_lines_are_never_mixed():
    reply = 'Readability: 2\nHarmlessness: 5\n{"Logical Correctness": 4, "Readability": 4}'
    judgment = parse_judgment(reply, THREE)
    assert judgment.method == "json"
    assert judgment.scores == {"Logical Correctness": 4, "Readability": 4}
    assert judgment.missing == ("Harmlessness",)


def test_a_feedback_only_object_does_not_hide_score_lines():
    reply = 'Readability: 4\n{"feedback": {"Readability": "Clear and well laid out."}}'
    judgment = parse_judgment(reply, ["Readability"])
    assert (judgment.status, judgment.method) == ("ok", "lines")


def test_braces_and_apostrophes_in_prose_do_not_hide_the_object():
    reply = (
        "The code `for (i) { x = {a: 1}` doesn't close its block, and the set {1, 2 "
        "is unfinished; it's still readable.\n"
        '{"Logical Correctness": 2, "Readability": 4, "Harmlessness": 5}'
    )
    judgment = parse_judgment(reply, THREE)
    assert judgment.status == "ok"


def test_a_long_reply_full_of_braces_still_parses():
    code = "function f(a) { if (a) { return {k: a}; } }\n" * 2000
    judgment = parse_judgment(code + '{"Readability": 3}', ["Readability"])
    assert judgment.scores == {"Readability": 3}


@pytest.mark.parametrize(
    "key",
    [
        "logical_correctness",
        "LOGICAL CORRECTNESS",
        "Logical  Correctness",
        " logical-correctness ",
        "Logical Correctness score",
        "Skill: Logical Correctness",
        "**Logical Correctness**",
    ],
)
def test_skill_name_variants_match(key):
    judgment = parse_judgment(json.dumps({key: 4}), ["Logical Correctness"])
    assert judgment.scores == {"Logical Correctness": 4}


@pytest.mark.parametrize("line", ["logical_correctness: 4", "LOGICAL CORRECTNESS = 4"])
def test_skill_name_variants_match_in_lines(line):
    assert parse_judgment(line, ["Logical Correctness"]).scores == {"Logical Correctness": 4}


def test_a_partial_name_is_not_guessed():
    judgment = parse_judgment('{"Correctness": 4, "Readability": 5}', THREE)
    assert "Logical Correctness" not in judgment.scores
    assert judgment.missing == ("Logical Correctness", "Harmlessness")


def test_conflicting_duplicate_keys_are_refused():
    judgment = parse_judgment('{"Readability": 4, "readability": 2}', ["Readability"])
    assert judgment.status == "parse_failed"
    assert "twice" in judgment.invalid["Readability"]
    agreeing = parse_judgment('{"Readability": 4, "readability": "4/5"}', ["Readability"])
    assert agreeing.scores == {"Readability": 4}


def test_scores_come_back_in_the_asked_order_and_only_for_asked_skills():
    reply = '{"Harmlessness": 5, "Overall": 4, "Readability": 3, "Logical Correctness": 1}'
    judgment = parse_judgment(reply, THREE)
    assert list(judgment.scores) == THREE


def test_parser_needs_distinct_skill_names():
    with pytest.raises(PromptError):
        parse_judgment("{}", ["Readability", "readability"])
    with pytest.raises(PromptError):
        parse_judgment("{}", [])


def test_a_reply_in_the_requested_shape_round_trips():
    """What a fake judge (or a compliant model) writes from the prompt parses as ok."""
    messages = render(builtin_template(with_reference=False), "Q", "R", SKILLS)
    names = skill_names_from_prompt(messages)
    feedback = "\n".join(f"{n}: Looks fine for this skill." for n in names)
    scores = {n: (i % 5) + 1 for i, n in enumerate(names)}
    scores[names[-1]] = "N/A"
    judgment = parse_judgment(feedback + "\n" + json.dumps(scores), [s.name for s in SKILLS])
    assert judgment.status == "ok"
    assert judgment.scores[names[0]] == 1 and judgment.scores[names[-1]] is None
    assert judgment.feedback[names[3]] == "Looks fine for this skill."


# --- repair and size ---------------------------------------------------------------------------


def test_repair_messages_append_the_bad_reply_and_ask_for_the_json_only():
    original = render(builtin_template(with_reference=False), "Q", "R", THREE_SKILLS)
    snapshot = [dict(m) for m in original]
    repaired = repair_messages(original, "I liked it.", THREE, problem="no scores found")
    assert original == snapshot
    assert repaired[:2] == original and repaired[0] is not original[0]
    assert [m["role"] for m in repaired] == ["system", "user", "assistant", "user"]
    assert repaired[2]["content"] == "I liked it."
    request = repaired[3]["content"]
    assert json.dumps(THREE) in request
    assert (
        "(no scores found)" in request and '"N/A"' in request and "only one JSON object" in request
    )
    assert parse_judgment(
        '{"Logical Correctness": 4, "Readability": 5, "Harmlessness": 5}', THREE
    ).ok


def test_repair_after_an_empty_reply_has_no_empty_assistant_turn():
    original = render(builtin_template(with_reference=False), "Q", "R", THREE_SKILLS)
    repaired = repair_messages(original, "  ", THREE)
    assert [m["role"] for m in repaired] == ["system", "user", "user"]
    assert repaired[-1]["content"].startswith("Your reply was empty.")


def test_token_estimate_grows_with_text_and_messages():
    def size(n):
        return estimate_tokens([{"role": "user", "content": "x" * n}])

    sizes = [size(n) for n in range(0, 400, 7)]
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]
    assert size(4000) - size(0) == 1000
    one = [{"role": "user", "content": "hello"}]
    assert estimate_tokens(one + [{"role": "assistant", "content": ""}]) > estimate_tokens(one)
    parts = [{"role": "user", "content": [{"type": "text", "text": "x" * 400}]}]
    assert estimate_tokens(parts) == size(400)
    rendered = render(builtin_template(with_reference=False), "Q", "R", SKILLS)
    assert 1000 < estimate_tokens(rendered) < 3000


# --- purity ------------------------------------------------------------------------------------


def test_module_imports_neither_django_nor_another_app():
    tree = ast.parse(Path(prompts.__file__).read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported.isdisjoint({"django", "annotation", "judging", "analytics", "flaskweb"})


def test_every_module_of_the_package_is_pure():
    package = Path(prompts.__file__).parent
    for path in sorted(package.glob("*.py")):
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                imported.add((node.module or "").split(".")[0])
        forbidden = {"django", "annotation", "judging", "analytics", "flaskweb", "devtools"}
        assert imported.isdisjoint(forbidden), path.name
