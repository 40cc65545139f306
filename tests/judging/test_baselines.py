"""judging.baselines: tokenisation, token F1, ROUGE-L, the 1-5 mapping and the baseline judges.

Pure: no database. The metrics are checked against published worked examples (Lin 2004), a
hand-derived SQuAD example, transcriptions of the reference tokenisers, and a brute-force LCS.
"""

from __future__ import annotations

import math
import random
import re
import string
import subprocess
import sys
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from judging.baselines import (
    BASELINE_DESCRIPTION,
    BASELINES,
    DEFAULT_CUTS,
    MAX_TOKENS,
    NO_REFERENCE_NOTE,
    NO_REFERENCE_TOKENS_NOTE,
    ROUGE_L_JUDGE,
    ROUGE_TOKENIZATION,
    SQUAD_TOKENIZATION,
    TOKEN_F1_JUDGE,
    BaselineJudge,
    RougeL,
    lcs_length,
    lcs_length_dp,
    normalize_answer,
    rouge_l,
    rouge_l_tokens,
    to_skill_scale,
    token_f1,
    token_f1_tokens,
    tokenize,
    validate_cuts,
)

REPO = Path(__file__).resolve().parents[2]
SKILLS = ["Logical Correctness", "Factuality", "Readability"]


# --- reference implementations the module is checked against ------------------------------------


def squad_official_tokens(text: str) -> list[str]:
    """SQuAD's evaluate-v2.0.py `normalize_answer(text).split()`, transcribed: lower-case,
    delete string.punctuation, replace the articles a/an/the by a space, split."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return text.split()


def rouge_score_tokens(text: str) -> list[str]:
    """The default tokeniser of Google's rouge-score (no stemmer): lower-case, runs of
    [a-z0-9]."""
    return re.findall(r"[a-z0-9]+", text.lower())


def brute_force_lcs(a: list[str], b: list[str]) -> int:
    """The longest subsequence of `a` (tried longest first) that is also one of `b`."""

    def is_subsequence(sub: list[str], seq: list[str]) -> bool:
        it = iter(seq)
        return all(token in it for token in sub)

    for k in range(min(len(a), len(b)), 0, -1):
        if any(is_subsequence([a[i] for i in idx], b) for idx in combinations(range(len(a)), k)):
            return k
    return 0


ascii_text = st.one_of(
    st.text(alphabet=string.printable, max_size=60),
    st.lists(
        st.sampled_from(
            [
                "a",
                "A",
                "an",
                "An.",
                "the",
                "The",
                "THE,",
                "theater",
                "an-",
                "_a_",
                "x",
                "don't",
                "U.S.",
                "3.14",
                "_",
                "e-mail",
                "(the)",
                "a1",
                "",
                "  ",
                "\t",
                "\n",
                "--",
                "'s",
            ]
        ),
        max_size=12,
    ).map(" ".join),
)


# --- tokenisation -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(ascii_text)
def test_squad_tokenisation_equals_the_official_normaliser_on_ascii(text):
    assert tokenize(text) == squad_official_tokens(text)
    assert SQUAD_TOKENIZATION(text) == squad_official_tokens(text)
    assert normalize_answer(text) == " ".join(squad_official_tokens(text))


@settings(max_examples=300, deadline=None)
@given(ascii_text)
def test_rouge_tokenisation_equals_rouge_score_on_ascii(text):
    assert ROUGE_TOKENIZATION(text) == rouge_score_tokens(text)
    assert tokenize(text, strip_punctuation=False, drop_articles=False) == rouge_score_tokens(text)


def test_tokenisation_examples():
    text = "The U.S. isn't an e-mail; it's (a) country!"
    assert tokenize(text) == ["us", "isnt", "email", "its", "country"]
    assert ROUGE_TOKENIZATION(text) == [
        "the",
        "u",
        "s",
        "isn",
        "t",
        "an",
        "e",
        "mail",
        "it",
        "s",
        "a",
        "country",
    ]
    # articles go only as whole tokens
    assert tokenize("Theater: an-na, a_b") == ["theater", "anna", "ab"]


def test_tokenisation_is_unicode_aware():
    # lower-case and NFC: composed, decomposed and upper-case spellings are one token
    assert tokenize("Café CAFÉ cafe\u0301") == ["café", "café", "café"]
    # combining marks stay inside words (Python's \w+ would cut "हिंदी" into "ह", "द")
    assert tokenize("हिंदी भाषा") == ["हिंदी", "भाषा"]
    assert tokenize("Straße ΟΔΟΣ naïve") == ["straße", "οδος", "naïve"]
    # Unicode punctuation is deleted like ASCII punctuation, or splits with ROUGE tokens
    assert tokenize("“Quoted” — l’homme «oui»") == ["quoted", "lhomme", "oui"]
    assert ROUGE_TOKENIZATION("l’homme") == ["l", "homme"]
    # symbols and emoji separate tokens; digits of any script are kept
    assert tokenize("5€ ok👍ok ١٢٣") == ["5", "ok", "ok", "١٢٣"]
    # no word segmentation: unspaced CJK text is one token (documented limitation)
    assert tokenize("北京是中国的首都。") == ["北京是中国的首都"]


def test_tokenisation_is_deterministic_and_rejects_non_text():
    text = "Ünïcödé, déjà vu — THE end!" * 3
    assert tokenize(text) == tokenize(text) == tokenize(str(text))
    with pytest.raises(TypeError):
        tokenize(None)  # type: ignore[arg-type]


def test_punctuation_only_and_empty_texts_have_no_tokens():
    for text in ["", "   \n\t", "?!...", "“—”", "a an the"]:
        assert tokenize(text) == []
    assert ROUGE_TOKENIZATION("a an the") == ["a", "an", "the"]


# --- token F1 -----------------------------------------------------------------------------------


def test_token_f1_hand_worked_example():
    # candidate "The cat sat on the mat."     -> SQuAD tokens: cat sat on mat        (4 tokens)
    # reference "A cat was sitting on a mat"  -> SQuAD tokens: cat was sitting on mat (5 tokens)
    # overlap {cat, on, mat} = 3;  P = 3/4,  R = 3/5
    # F1 = 2PR / (P + R) = 2 * (9/20) / (27/20) = 18/27 = 2/3
    assert token_f1("The cat sat on the mat.", "A cat was sitting on a mat") == pytest.approx(2 / 3)


def test_token_f1_counts_repeated_tokens_as_a_bag():
    # candidate cat cat cat (3), reference cat dog (2): overlap min(3, 1) = 1
    # P = 1/3, R = 1/2, F1 = 2 * (1/6) / (5/6) = 2/5
    assert token_f1("cat cat cat", "cat dog") == pytest.approx(0.4)
    assert token_f1_tokens(["x", "y"], ["y", "x"]) == 1.0  # order does not matter


def test_token_f1_edge_cases():
    assert token_f1("", "") == 1.0  # both empty (SQuAD: int(gold == pred))
    assert token_f1("?!", "...") == 1.0  # both empty after normalisation
    assert token_f1("", "Paris") == 0.0
    assert token_f1("Paris", "") == 0.0
    assert token_f1("The Eiffel Tower, Paris!", "the eiffel tower paris") == 1.0  # identical
    assert token_f1("red green", "blue yellow") == 0.0  # disjoint
    assert token_f1("Café au lait", "cafe\u0301 au lait") == 1.0  # unicode


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abcde"), max_size=10), st.lists(st.sampled_from("abcde"), max_size=10)
)
def test_token_f1_is_symmetric_and_bounded(a, b):
    value = token_f1_tokens(a, b)
    assert value == token_f1_tokens(b, a)
    assert 0.0 <= value <= 1.0


# --- LCS ----------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from("abc"), max_size=8), st.lists(st.sampled_from("abcd"), max_size=8))
def test_lcs_equals_brute_force_on_small_inputs(a, b):
    expected = brute_force_lcs(a, b)
    assert lcs_length(a, b) == expected
    assert lcs_length(b, a) == expected
    assert lcs_length_dp(a, b) == expected


def test_lcs_bit_parallel_equals_the_dp_on_seeded_random_inputs():
    rng = random.Random(20040701)
    for case in range(600):
        alphabet = [f"t{i}" for i in range(rng.randint(1, 12))]
        size = 300 if case % 50 == 0 else 40
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, size))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, size))]
        assert lcs_length(a, b) == lcs_length_dp(a, b), (a, b)


def test_lcs_known_values():
    assert lcs_length("ABCBDAB", "BDCABA") == 4  # CLRS: "BCBA"
    assert lcs_length([], ["x"]) == lcs_length(["x"], []) == lcs_length([], []) == 0
    assert lcs_length(["x"] * 70, ["x"] * 65) == 65  # wider than one machine word


# --- ROUGE-L ------------------------------------------------------------------------------------


def test_rouge_l_lin_2004_worked_example():
    # Lin (2004), section 3.1: S1 reference, S2 and S3 candidates. ROUGE-L(S2) = 3/4 (LCS
    # "police the gunman"), ROUGE-L(S3) = 2/4 (LCS "the gunman"); beta = 1.
    s1 = "police killed the gunman"
    s2 = "police kill the gunman"
    s3 = "the gunman kill police"
    assert rouge_l(s2, s1) == RougeL(0.75, 0.75, 0.75)
    assert rouge_l(s3, s1) == RougeL(0.5, 0.5, 0.5)


def test_rouge_l_precision_recall_and_beta():
    # candidate "a b c d" (4 tokens), reference "a b" (2 tokens): LCS 2, P = 1/2, R = 1
    result = rouge_l("a b c d", "a b")
    assert result.precision == 0.5 and result.recall == 1.0
    assert result.f == pytest.approx(2 / 3)  # beta = 1: 2PR / (P + R) = 1 / 1.5
    # beta = 2: (1 + 4) P R / (R + 4 P) = 2.5 / 3
    assert rouge_l("a b c d", "a b", beta=2).f == pytest.approx(2.5 / 3)
    # Lin's DUC setting, beta -> infinity: F is practically R
    assert rouge_l("x a y b z", "a b c", beta=1e6).f == pytest.approx(2 / 3, rel=1e-9)
    for bad in (0, -1, math.nan, math.inf):
        with pytest.raises(ValueError):
            rouge_l("a", "a", beta=bad)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from("abc"), min_size=1, max_size=7),
    st.lists(st.sampled_from("abcd"), min_size=1, max_size=7),
)
def test_rouge_l_matches_its_definition(candidate, reference):
    lcs = brute_force_lcs(candidate, reference)
    result = rouge_l_tokens(candidate, reference)
    assert result.precision == pytest.approx(lcs / len(candidate))
    assert result.recall == pytest.approx(lcs / len(reference))
    p, r = result.precision, result.recall
    assert result.f == pytest.approx(2 * p * r / (p + r) if lcs else 0.0)
    assert 0.0 <= result.f <= 1.0


def test_rouge_l_edge_cases():
    assert rouge_l("", "") == RougeL(1.0, 1.0, 1.0)
    assert rouge_l("...", "!?") == RougeL(1.0, 1.0, 1.0)
    assert rouge_l("", "gunman") == RougeL(0.0, 0.0, 0.0)
    assert rouge_l("gunman", "") == RougeL(0.0, 0.0, 0.0)
    assert rouge_l("Police killed the gunman.", "police killed the gunman") == (1.0, 1.0, 1.0)
    assert rouge_l("red green", "blue yellow") == RougeL(0.0, 0.0, 0.0)
    assert rouge_l("naïve café", "NAI\u0308VE CAFE\u0301") == (1.0, 1.0, 1.0)


def test_rouge_l_caps_very_long_inputs():
    reference = " ".join(f"w{i}" for i in range(MAX_TOKENS))
    candidate = reference + " " + " ".join(f"junk{i}" for i in range(6000))
    # only the first MAX_TOKENS tokens of each side are compared: the junk tail is not seen
    assert rouge_l(candidate, reference) == RougeL(1.0, 1.0, 1.0)
    # without the cap, precision counts all 10,000 candidate tokens
    assert rouge_l(candidate, reference, max_tokens=None).precision == pytest.approx(0.4)
    assert rouge_l("x y z", "z y x", max_tokens=1) == RougeL(0.0, 0.0, 0.0)
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ValueError):
            rouge_l("a", "a", max_tokens=bad)


def test_lin_example_needs_the_rouge_tokenisation():
    # with SQuAD's normaliser the article "the" would be dropped and ROUGE-L(S2) be 2/3
    assert tokenize("police killed the gunman") == ["police", "killed", "gunman"]
    assert ROUGE_TOKENIZATION("police killed the gunman") == [
        "police",
        "killed",
        "the",
        "gunman",
    ]


# --- the FLASK scale ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "score"),
    [
        (0.0, 1),
        (0.1999, 1),
        (0.2, 2),
        (0.3999, 2),
        (0.4, 3),
        (0.5999, 3),
        (0.6, 4),
        (0.7999, 4),
        (0.8, 5),
        (1.0, 5),
        (0, 1),
        (1, 5),
    ],
)
def test_to_skill_scale_default_cuts(value, score):
    assert to_skill_scale(value) == score


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.0, 1.0),
    st.floats(0.0, 1.0),
    st.lists(st.floats(0.001, 0.999), min_size=4, max_size=4, unique=True).map(sorted),
)
def test_to_skill_scale_is_monotone_and_in_range(x, y, cuts):
    low, high = min(x, y), max(x, y)
    for c in (DEFAULT_CUTS, tuple(cuts)):
        assert 1 <= to_skill_scale(low, c) <= to_skill_scale(high, c) <= 5
        assert to_skill_scale(high, c) == 1 + sum(cut <= high for cut in c)


@pytest.mark.parametrize(
    "cuts",
    [
        (0.2, 0.2, 0.6, 0.8),  # not strictly increasing
        (0.4, 0.2, 0.6, 0.8),  # decreasing
        (0.0, 0.4, 0.6, 0.8),  # 0 is not inside (0, 1)
        (0.2, 0.4, 0.6, 1.0),  # neither is 1
        (-0.1, 0.4, 0.6, 0.8),
        (0.2, 0.4, 0.6),  # three cuts: four scores only
        (0.1, 0.2, 0.4, 0.6, 0.8),
        (0.2, math.nan, 0.6, 0.8),
        ("low", 0.4, 0.6, 0.8),
        None,
    ],
)
def test_invalid_cuts_are_rejected(cuts):
    with pytest.raises(ValueError):
        validate_cuts(cuts)
    with pytest.raises(ValueError):
        to_skill_scale(0.5, cuts)


def test_to_skill_scale_rejects_values_outside_unit_interval():
    for bad in (-0.01, 1.01, math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError):
            to_skill_scale(bad)
    for bad in ("0.5", None, True):
        with pytest.raises(TypeError):
            to_skill_scale(bad)  # type: ignore[arg-type]
    assert validate_cuts([0.1, 0.2, 0.3, 0.4]) == (0.1, 0.2, 0.3, 0.4)


# --- baseline judges ----------------------------------------------------------------------------


def test_registry_holds_the_two_labelled_baselines():
    assert list(BASELINES) == ["token-f1", "rouge-l"]
    assert BASELINES["token-f1"] is TOKEN_F1_JUDGE and BASELINES["rouge-l"] is ROUGE_L_JUDGE
    for name, judge in BASELINES.items():
        assert judge.name == name
        assert judge.is_baseline
        assert BASELINE_DESCRIPTION == "baseline: reference overlap, not a judgment of the skill"
        assert BASELINE_DESCRIPTION in judge.description
    with pytest.raises(TypeError):
        BASELINES["mine"] = TOKEN_F1_JUDGE  # type: ignore[index]


def test_judges_give_every_skill_the_same_metric_value():
    response, reference = "The cat sat on the mat.", "A cat was sitting on a mat"
    result = TOKEN_F1_JUDGE.score("Describe the cat.", response, reference, SKILLS)
    assert result.raw == dict.fromkeys(SKILLS, token_f1(response, reference))
    assert result.scores == dict.fromkeys(SKILLS, 4)  # 2/3 is in [0.6, 0.8)
    assert "every skill" in result.note and BASELINE_DESCRIPTION in result.note

    result = ROUGE_L_JUDGE.score("", "police kill the gunman", "police killed the gunman", SKILLS)
    assert result.raw == dict.fromkeys(SKILLS, 0.75) and result.scores == dict.fromkeys(SKILLS, 4)
    result = ROUGE_L_JUDGE.score("", "the gunman kill police", "police killed the gunman", SKILLS)
    assert result.raw == dict.fromkeys(SKILLS, 0.5) and result.scores == dict.fromkeys(SKILLS, 3)
    assert "rouge-l = 0.5000 -> score 3" in result.note


@pytest.mark.parametrize("judge", list(BASELINES.values()), ids=list(BASELINES))
@pytest.mark.parametrize("reference", [None, "", "   \n\t"])
def test_no_reference_makes_every_skill_not_applicable(judge, reference):
    result = judge.score("Explain.", "Some answer.", reference, SKILLS)
    assert result.scores == dict.fromkeys(SKILLS, None)
    assert result.raw == dict.fromkeys(SKILLS, None)
    assert result.note == NO_REFERENCE_NOTE == "no reference answer"


def test_reference_without_tokens_is_not_applicable():
    # FLASK has multiple-choice answers "A": SQuAD's normaliser drops the article
    result = TOKEN_F1_JUDGE.score("Which option?", "A", "A", SKILLS)
    assert result.scores == dict.fromkeys(SKILLS, None) and result.note == NO_REFERENCE_TOKENS_NOTE
    assert ROUGE_L_JUDGE.score("Which option?", "A", "A", SKILLS).scores == dict.fromkeys(SKILLS, 5)
    for judge in BASELINES.values():
        result = judge.score("", "anything", "- 😌😊 ...", SKILLS)
        assert result.scores == dict.fromkeys(SKILLS, None)
        assert result.note == NO_REFERENCE_TOKENS_NOTE


@pytest.mark.parametrize("judge", list(BASELINES.values()), ids=list(BASELINES))
def test_judge_edge_cases(judge):
    # empty response against a real reference: the lowest score, not N/A
    result = judge.score("", "", "Paris is the capital.", SKILLS)
    assert result.scores == dict.fromkeys(SKILLS, 1) and result.raw == dict.fromkeys(SKILLS, 0.0)
    # identical texts: the top score
    assert judge.score("", "Paris!", "paris", ["Factuality"]).scores == {"Factuality": 5}
    # no skills asked: nothing to score; repeated skills are scored once
    assert judge.score("", "a", "b", []).scores == {}
    assert list(judge.score("", "x", "x", ["A", "B", "A"]).scores) == ["A", "B"]
    # the instruction plays no part
    one = judge.score("Instruction one", "red fox", "the red fox", SKILLS)
    two = judge.score("Something else entirely", "red fox", "the red fox", SKILLS)
    assert one == two


def test_rouge_l_judge_notes_the_token_cap():
    reference = " ".join(f"w{i}" for i in range(MAX_TOKENS + 10))
    result = ROUGE_L_JUDGE.score("", reference, reference, ["Completeness"])
    assert result.scores == {"Completeness": 5}
    assert f"first {MAX_TOKENS} tokens" in result.note
    assert "first" not in ROUGE_L_JUDGE.score("", "a b", "a b", ["Completeness"]).note


def test_custom_judge_validation_and_cuts():
    judge = BaselineJudge(
        name="token-f1-lenient",
        description="baseline: token F1 with low cuts",
        tokenization=SQUAD_TOKENIZATION,
        metric=token_f1_tokens,
        cuts=(0.1, 0.2, 0.3, 0.4),
    )
    result = judge.score("", "The cat sat on the mat.", "A cat was sitting on a mat", SKILLS)
    assert result.scores == dict.fromkeys(SKILLS, 5)
    assert "cuts 0.1/0.2/0.3/0.4" in result.note
    with pytest.raises(ValueError):
        BaselineJudge(
            "x", "baseline", SQUAD_TOKENIZATION, token_f1_tokens, cuts=(0.5, 0.4, 0.6, 0.8)
        )
    with pytest.raises(ValueError, match="baseline"):
        BaselineJudge("x", "a real judge", SQUAD_TOKENIZATION, token_f1_tokens)


def test_module_imports_without_django():
    code = (
        "import sys, judging.baselines; "
        "assert not [m for m in sys.modules if m.split('.')[0] in ('django', 'annotation')]"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
