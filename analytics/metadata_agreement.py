"""Agreement between proposed metadata (a model's, or a dataset's own) and the metadata people
verified, item by item (docs/METADATA.md, "Agreement"). Pure: no Django.

Per group of items (all, and per verified domain):
- skills: exact match of the two 3-skill sets, overlap |P ∩ V| / 3, Jaccard |P ∩ V| / |P ∪ V|;
- rank: over the items sharing at least two skills, the mean Spearman rho and Kendall tau of
  the shared skills' ranks in the proposal and in the verified list (closed forms for
  untied ranks, checked against scipy);
- domains: accuracy, the share of items whose proposed domain set equals the verified one;
- difficulty: exact share and Cohen's (1968) weighted kappa over the five levels, quadratic
  and linear disagreement weights (analytics.metrics.cohen_kappa).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from analytics.metrics import cohen_kappa

LEVELS = (1, 2, 3, 4, 5)


@dataclass(frozen=True)
class MetadataPair:
    """One item's proposal beside its verified metadata (keys; skills most relevant first)."""

    item_id: int
    proposed_domains: Sequence[str]
    proposed_skills: Sequence[str]
    proposed_difficulty: int | None
    verified_domains: Sequence[str]
    verified_skills: Sequence[str]
    verified_difficulty: int | None


def skill_overlap(proposed: Sequence[str], verified: Sequence[str]) -> float:
    """|P ∩ V| / 3 (the number of skills an item carries)."""
    return len(set(proposed) & set(verified)) / 3


def jaccard(proposed: Iterable[str], verified: Iterable[str]) -> float | None:
    a, b = set(proposed), set(verified)
    return len(a & b) / len(a | b) if a | b else None


def shared_ranks(proposed: Sequence[str], verified: Sequence[str]) -> tuple[list[int], list[int]]:
    """The ranks (1 = most relevant) of the skills both lists hold, in the proposal's order."""
    shared = [s for s in proposed if s in verified]
    return [proposed.index(s) + 1 for s in shared], [list(verified).index(s) + 1 for s in shared]


def rank_correlations(a: Sequence[int], b: Sequence[int]) -> tuple[float, float]:
    """Spearman rho and Kendall tau of two rankings of the same n >= 2 skills without ties
    (positions in a list are distinct): the closed forms rho = 1 - 6 sum d^2 / (n (n^2 - 1))
    over the ranks among the shared skills, and tau = (concordant - discordant) / (n (n - 1)
    / 2). Equal to scipy.stats.spearmanr and kendalltau (tested), at a fraction of their cost
    per item (thousands of items per page)."""
    n = len(a)
    order_a = {v: r for r, v in enumerate(sorted(a), start=1)}
    order_b = {v: r for r, v in enumerate(sorted(b), start=1)}
    ra, rb = [order_a[v] for v in a], [order_b[v] for v in b]
    rho = 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb, strict=True)) / (n * (n * n - 1))
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    signs = sum(1 if (ra[i] - ra[j]) * (rb[i] - rb[j]) > 0 else -1 for i, j in pairs)
    return rho, signs / len(pairs)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def _figures(pairs: Sequence[MetadataPair]) -> dict:
    skill_pairs = [p for p in pairs if p.proposed_skills and p.verified_skills]
    rhos: list[float] = []
    taus: list[float] = []
    for p in skill_pairs:
        a, b = shared_ranks(p.proposed_skills, p.verified_skills)
        if len(a) >= 2:
            rho, tau = rank_correlations(a, b)
            rhos.append(rho)
            taus.append(tau)
    domain_pairs = [p for p in pairs if p.proposed_domains and p.verified_domains]
    level_pairs = [
        p for p in pairs if p.proposed_difficulty is not None and p.verified_difficulty is not None
    ]
    proposed = [float(p.proposed_difficulty) for p in level_pairs]  # type: ignore[arg-type]
    verified = [float(p.verified_difficulty) for p in level_pairs]  # type: ignore[arg-type]
    kappa_q = kappa_l = None
    if level_pairs:
        kappa_q = cohen_kappa(proposed, verified, "quadratic", categories=LEVELS)
        kappa_l = cohen_kappa(proposed, verified, "linear", categories=LEVELS)
    jaccards = [jaccard(p.proposed_skills, p.verified_skills) for p in skill_pairs]
    return {
        "items": len(pairs),
        "skills_n": len(skill_pairs),
        "skills_exact": _mean(
            [float(set(p.proposed_skills) == set(p.verified_skills)) for p in skill_pairs]
        ),
        "skills_overlap": _mean(
            [skill_overlap(p.proposed_skills, p.verified_skills) for p in skill_pairs]
        ),
        "skills_jaccard": _mean([j for j in jaccards if j is not None]),
        "rank_n": len(rhos),
        "rank_spearman": _mean(rhos),
        "rank_kendall": _mean(taus),
        "domains_n": len(domain_pairs),
        "domain_accuracy": _mean(
            [float(set(p.proposed_domains) == set(p.verified_domains)) for p in domain_pairs]
        ),
        "difficulty_n": len(level_pairs),
        "difficulty_exact": _mean([float(a == b) for a, b in zip(proposed, verified, strict=True)]),
        "difficulty_kappa_quadratic": kappa_q,
        "difficulty_kappa_linear": kappa_l,
    }


def metadata_agreement(pairs: Sequence[MetadataPair]) -> dict:
    """The figures over all pairs and per verified domain (an item with several verified
    domains counts in each), domains in name order."""
    by_domain: dict[str, list[MetadataPair]] = {}
    for pair in pairs:
        for domain in pair.verified_domains:
            by_domain.setdefault(domain, []).append(pair)
    return {
        "overall": _figures(pairs),
        "per_domain": {domain: _figures(by_domain[domain]) for domain in sorted(by_domain)},
    }


#: The columns of the agreement export, in order (one row per group).
FIGURES = (
    "items",
    "skills_n",
    "skills_exact",
    "skills_overlap",
    "skills_jaccard",
    "rank_n",
    "rank_spearman",
    "rank_kendall",
    "domains_n",
    "domain_accuracy",
    "difficulty_n",
    "difficulty_exact",
    "difficulty_kappa_quadratic",
    "difficulty_kappa_linear",
)
