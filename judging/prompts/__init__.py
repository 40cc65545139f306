"""Judge prompts: render a FLASK-style prompt for one response, read the judge's scores back.

Pure Python: no Django and no project imports (the modules import one another relatively),
so it is unit-tested without a database and the same code serves real model clients and the
local fake judge. The contract between the prompt and the parser (what the judge is asked to
write, what is accepted back) is described in docs/JUDGE_PROMPTS.md; keep the two in step.

- `templates.TemplateText` holds a system prompt and a user template with the named
  placeholders {instruction} {response} {reference} {skills} (str.format syntax: `{{` and
  `}}` are literal braces). Two built-in templates are written in the project's own words;
  custom ones come from `TemplateText.from_text`. (The versioned database row of a template
  is judging.models.PromptTemplate.)
- `templates.render` fills a template by single-pass substitution, so braces or placeholder
  names inside an instruction or a response are copied verbatim and never interpreted.
- `skills` renders the skills block the judge reads (the annotator's scoring card wording).
- `files.import_flask_prompt_file` reads the official FLASK prompt-file format.
- `parse.parse_judgment` reads a judge reply into per-skill scores (int 1-5, or None for
  N/A). It never invents, rounds or clamps a score: anything it cannot read exactly is
  reported. `parse.repair_messages` builds the follow-up turn that asks for the final JSON
  object again.
- `names.SkillMatcher` matches a skill name as the judge wrote it to the name asked.
- `pairwise` is the same for pairwise runs: the pair prompt, its reply parser, and the
  position-consistency analysis.
- `templates.estimate_tokens` is the rough size used for cost estimates.
"""

from .errors import PromptError, PromptFileError, TemplateError
from .files import import_flask_prompt_file
from .parse import ParsedJudgment, parse_judgment, repair_messages
from .skills import (
    SKILLS_BLOCK_END,
    SKILLS_BLOCK_START,
    JudgeSkill,
    render_skills_block,
    skill_names_from_prompt,
)
from .templates import (
    BUILTIN_TEMPLATES,
    CHARS_PER_TOKEN,
    PLACEHOLDERS,
    SYSTEM_PROMPT,
    TemplateText,
    builtin_template,
    estimate_text_tokens,
    estimate_tokens,
    render,
)

__all__ = [
    "BUILTIN_TEMPLATES",
    "CHARS_PER_TOKEN",
    "PLACEHOLDERS",
    "SKILLS_BLOCK_END",
    "SKILLS_BLOCK_START",
    "SYSTEM_PROMPT",
    "JudgeSkill",
    "ParsedJudgment",
    "PromptError",
    "PromptFileError",
    "TemplateError",
    "TemplateText",
    "builtin_template",
    "estimate_text_tokens",
    "estimate_tokens",
    "import_flask_prompt_file",
    "parse_judgment",
    "render",
    "render_skills_block",
    "repair_messages",
    "skill_names_from_prompt",
]
