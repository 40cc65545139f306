"""The local judge server's bias knobs (docs/OPENAI_SERVER.md, "Biases"): each one moves the
answers exactly as documented, only when set, and bad settings are refused."""

from __future__ import annotations

import json

import httpx
import pytest

from devtools.openai_server import FakeOpenAIServer
from devtools.openai_server.answers import (
    content_key,
    core_text,
    expected_pair_choices,
    expected_scores,
    length_bonus,
    of_family,
)
from judging import prompts
from judging.prompts import pairwise
from judging.prompts import probes as transforms

SKILLS = [{"name": n, "anchors": ["a", "b", "c", "d", "e"]} for n in ("Factuality", "Readability")]


def pointwise(response: str, instruction: str = "Say hi.") -> str:
    template = prompts.builtin_template(with_reference=False)
    return prompts.render(template, instruction=instruction, response=response, skills=SKILLS)[1][
        "content"
    ]


def pair(first: str, second: str, note: str = "") -> str:
    template = pairwise.pair_template(with_reference=False)
    if note:
        user = transforms.with_note_after_responses(
            template.user_template, note, pairwise.SECOND_END
        )
        template = pairwise.PairTemplate("p", "1", "", user, False)
    messages = pairwise.render_pair(
        template, instruction="Q", first=first, second=second, skills=SKILLS
    )
    return messages[1]["content"]


TEXT = "Hello there. " + " ".join(f"Word{i}." for i in range(60))


def test_content_scores_ignore_what_the_probes_add():
    base = pointwise(TEXT)
    changed = [
        pointwise(transforms.pad(TEXT)),
        pointwise(transforms.names_shown(TEXT, "alpha-1")),
        pointwise(transforms.distraction(TEXT, 1)),
        pointwise(transforms.truncate(TEXT, 0.5)),
    ]
    assert {content_key(p) for p in changed} == {content_key(base)}
    assert core_text(transforms.names_shown(transforms.pad(TEXT), "m")) == TEXT.strip()
    for prompt in changed:
        assert expected_scores(prompt, content_scores=True) == expected_scores(
            base, content_scores=True
        )
    # without the knob, the whole prompt is the key (the documented default)
    assert content_key("no template here") == "no template here"


def test_length_bias_and_self_preference_raise_scores_as_documented():
    assert length_bonus("w " * 200, 4.0) == 4 and length_bonus("w " * 50, 4.0) == 1
    assert length_bonus("w " * 10, 4.0) == 0 and length_bonus("w " * 500, 2.0) == 2
    assert of_family("Response from Alpha-1:\n\nhi", "alpha")
    assert not of_family("alphabet soup", "alpha") and not of_family("x", "")
    prompt = pointwise("From the alpha team. " + "w " * 100)
    plain = expected_scores(prompt)
    biased = expected_scores(prompt, length_bias=4.0, self_preference="alpha")
    assert biased == {k: min(5, v + 2 + 1) for k, v in plain.items()}


def test_bandwagon_and_distraction_sway_pair_verdicts_only_when_set():
    a, b = "First answer. Long.", "Second answer. Short."
    note = transforms.BANDWAGON_TEMPLATE.replace("{n}", "2")
    names = ["Factuality", "Readability"]
    swayed = expected_pair_choices(pair(a, b, note), names, bandwagon=1.0)
    assert set(swayed.values()) == {"2"}
    assert expected_pair_choices(pair(a, b, note), names, content_scores=True) == (
        expected_pair_choices(pair(a, b), names, content_scores=True)
    )
    distracted = pair(transforms.distraction(a, 0), b)
    assert set(expected_pair_choices(distracted, names, distraction=1.0).values()) == {"2"}
    assert expected_pair_choices(distracted, names, content_scores=True) == (
        expected_pair_choices(pair(a, b), names, content_scores=True)
    )


def test_the_knobs_reach_the_wire_and_bad_settings_are_refused():
    prompt = pointwise("From the alpha team. " + "w " * 100)
    with FakeOpenAIServer(style="json", self_preference="alpha", length_bias=2.0) as server:
        reply = httpx.post(
            f"{server.url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
        ).json()
        scores = json.loads(reply["choices"][0]["message"]["content"])["scores"]
        assert scores == expected_scores(prompt, length_bias=2.0, self_preference="alpha")
        server.configure(bandwagon=0.5, distraction=0.25, content_scores=True)
        for bad, message in [
            ({"length_bias": 5}, "length_bias"),
            ({"bandwagon": -0.1}, "bandwagon"),
            ({"content_scores": "yes"}, "content_scores"),
            ({"self_preference": "a b"}, "self_preference"),
        ]:
            with pytest.raises(ValueError, match=message):
                server.configure(**bad)


def test_the_command_line_takes_the_knobs(capsys):
    from devtools.openai_server.__main__ import main

    with pytest.raises(SystemExit):
        main(["--length-bias", "9"])
    assert "length_bias must be between" in capsys.readouterr().err
