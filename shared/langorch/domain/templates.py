"""Templates and expressions, evaluated by Jinja2's immutable sandbox — never ``eval``.

Two syntaxes are accepted:

* ``{{ … }}`` — Jinja2 (``{{ invoice.amount > 1000 }}``, ``{{ items | length }}``);
* seed 000's single-brace placeholders — ``"Order from {restaurant_name}"``. A template with no
  ``{{``/``{%`` is treated as placeholders: ``{name}`` and ``{name.attr}`` are substituted and every
  other character, a JSON example with single braces included, is literal text.

Missing names render as empty strings (seed 000's ``state.get(key, "")``); an expression over a
missing name evaluates to ``None``. A list or a dict renders as JSON (``["Burrito Bowl"]``), in
both syntaxes: a prompt shows the model data, not Python's ``repr``.

Jinja2 is imported when a ``{{ … }}`` template is first parsed or rendered, not with this module:
the definitions and records that import it are read by CLI listings that render nothing
(issue 26: a command in 0.3 s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from langorch.domain.errors import LangorchError

if TYPE_CHECKING:
    from jinja2 import nodes

    from langorch.domain._jinja_sandbox import BoundedSandbox

_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_][A-Za-z0-9_\.]*)\}(?!\})")
_JINJA_MARK = re.compile(r"\{\{|\{%")

MAX_RENDERED_CHARS = 200_000
"""Bound on a rendered template other than a prompt (titles, messages, URLs, headers): a
runaway loop or filter cannot fill memory."""

PROMPT_CHAR_LIMITS: Mapping[str, int] = {
    # Claude 3 on Bedrock (the default model): 200k tokens of context. At ~4 characters per
    # token that is ~800k characters; a quarter is left for the system prompt, the structured
    # output schema and the answer.
    "bedrock": 600_000,
    # Claude on Anthropic's API: the same 200k tokens as on Bedrock.
    "anthropic": 600_000,
    # gpt-4o-class models: 128k tokens, ~512k characters; a fifth is left the same way.
    "openai": 400_000,
    # No model behind it: bounded only so a runaway template cannot fill the runner's memory.
    "offline": 1_000_000,
}
"""The longest prompt a block may render, per LLM provider; a block's ``max_prompt_chars``
overrides it (up to :data:`langorch.domain.definitions.MAX_PROMPT_CHARS`). Characters, not
tokens: counting tokens needs each model's tokenizer."""

DEFAULT_PROMPT_CHARS = 400_000
"""The limit for a provider not in :data:`PROMPT_CHAR_LIMITS`."""


class TemplateError(LangorchError):
    """A template or expression is malformed or failed to evaluate."""


def _as_text(value: Any) -> Any:
    """What a rendered value prints as: JSON for lists and dicts, itself otherwise."""
    if isinstance(value, list | tuple | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return value


@lru_cache(maxsize=1)
def _environment() -> BoundedSandbox:
    from jinja2 import ChainableUndefined

    from langorch.domain._jinja_sandbox import BoundedSandbox

    class _Undefined(ChainableUndefined):
        """Missing names are empty, and attribute access on them stays empty (``a.b.c``)."""

        def __str__(self) -> str:
            return ""

    # finalize applies to every {{ … }} output (not to expressions, which keep their types).
    env = BoundedSandbox(undefined=_Undefined, autoescape=False, finalize=_as_text)
    env.filters["tojson_compact"] = lambda v: json.dumps(v, default=str)
    return env


def prompt_char_limit(provider: str | None, override: int | None = None) -> int:
    """The longest prompt a block may render.

    Args:
        provider: the block's LLM provider (``bedrock``, ``openai``, ``offline``, …).
        override: the block's ``max_prompt_chars``, when set.

    Returns:
        ``override`` when given, else the provider's default from :data:`PROMPT_CHAR_LIMITS`.
    """
    if override is not None:
        return override
    return PROMPT_CHAR_LIMITS.get(provider or "", DEFAULT_PROMPT_CHARS)


def is_jinja(template: str) -> bool:
    """True when the template uses ``{{ … }}`` or ``{% … %}``."""
    return bool(_JINJA_MARK.search(template))


def placeholders(template: str) -> set[str]:
    """The top-level names a template reads (for validation of available inputs)."""
    if not is_jinja(template):
        return {m.group(1).split(".")[0] for m in _PLACEHOLDER.finditer(template)}
    from jinja2 import TemplateSyntaxError, nodes

    try:
        ast = _environment().parse(template)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"bad template syntax at line {exc.lineno}: {exc.message}") from exc
    assigned = {n.name for n in ast.find_all(nodes.Name) if n.ctx in ("store", "param")}
    return {n.name for n in ast.find_all(nodes.Name) if n.ctx == "load"} - assigned


def check(template: str) -> str | None:
    """The syntax error of a template, or ``None`` when it parses."""
    if not is_jinja(template):
        return None
    from jinja2 import TemplateSyntaxError

    try:
        _environment().parse(template)
    except TemplateSyntaxError as exc:
        return f"line {exc.lineno}: {exc.message}"
    return None


@lru_cache(maxsize=2048)
def _compile(template: str) -> Any:
    from jinja2 import TemplateSyntaxError

    try:
        return _environment().from_string(template)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"bad template syntax at line {exc.lineno}: {exc.message}") from exc


class PathMissing(LookupError):
    """A dotted path leads nowhere: ``at`` holds (``""``: the top level) has no ``part``."""

    def __init__(self, at: str, part: str) -> None:
        """Record where the path stopped."""
        self.at = at
        self.part = part
        super().__init__(f"{at or 'the state'} has no {part!r}")


def walk(context: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted path: ``request.user.name``, or ``items.0`` for a list's first item.

    The one way a path resolves, for ``{request.user.name}`` placeholders and input mappings
    alike (Jinja's ``{{ request.user.name }}`` reads the same value).

    Raises:
        PathMissing: a part of the path is not there (or sits under a ``None``).
    """
    value: Any = context
    walked = ""
    for part in dotted.split("."):
        if isinstance(value, Mapping) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            raise PathMissing(walked, part)
        walked = f"{walked}.{part}" if walked else part
    return value


def _lookup(context: dict[str, Any], dotted: str) -> Any:
    try:
        value = walk(context, dotted)
    except PathMissing:
        return ""
    return "" if value is None else value


def render(
    template: str,
    context: dict[str, Any],
    *,
    max_chars: int = MAX_RENDERED_CHARS,
    too_long_hint: str = "",
) -> str:
    """Render a template to text.

    Args:
        template: ``{{ … }}`` Jinja2 or seed 000 ``{placeholder}`` text.
        context: the names it may read.
        max_chars: the longest text it may render (:func:`prompt_char_limit` for prompts).
        too_long_hint: how to fix a text past ``max_chars``, added to the error.

    Raises:
        TemplateError: the template is malformed, fails, or renders past ``max_chars``.
    """
    if not is_jinja(template):
        # Seed 000 placeholders: plain lookups, no code runs; other braces are literal.
        text = _PLACEHOLDER.sub(lambda m: str(_as_text(_lookup(context, m.group(1)))), template)
    else:
        from langorch.domain._jinja_sandbox import ExpressionLimitError

        try:
            text = _bounded_render(_compile(template), context, max_chars, too_long_hint)
        except (TemplateError, ExpressionLimitError):
            raise
        except Exception as exc:  # the sandbox raises SecurityError and ordinary runtime errors
            raise TemplateError(f"template failed: {type(exc).__name__}: {exc}") from exc
    if len(text) > max_chars:
        raise _too_long(len(text), max_chars, too_long_hint)
    return text


def _too_long(rendered: int | None, max_chars: int, hint: str) -> TemplateError:
    # None: rendering stopped as soon as it passed the bound, the full length is unknown.
    what = (
        f"more than the {max_chars:,} characters allowed"
        if rendered is None
        else f"{rendered:,} characters, more than the {max_chars:,} allowed"
    )
    return TemplateError(f"template rendered {what}" + (f": {hint}" if hint else ""))


def _bounded_render(compiled: Any, context: dict[str, Any], max_chars: int, hint: str) -> str:
    """Render chunk by chunk, so a runaway loop stops at the size or time bound."""
    from langorch.domain._jinja_sandbox import check_time, time_bound

    parts: list[str] = []
    size = 0
    with time_bound():
        for chunk in compiled.generate(context):
            check_time()
            size += len(chunk)
            if size > max_chars:
                raise _too_long(None, max_chars, hint)
            parts.append(chunk)
    return "".join(parts)


@lru_cache(maxsize=2048)
def _compile_expression(expression: str) -> Any:
    from jinja2 import TemplateSyntaxError

    try:
        return _environment().compile_expression(expression, undefined_to_none=True)
    except TemplateSyntaxError as exc:
        raise TemplateError(f"bad expression {expression!r}: {exc.message}") from exc


def strip_braces(expression: str) -> str:
    """``"{{ a.b }}"`` -> ``"a.b"``; other strings unchanged."""
    text = expression.strip()
    if text.startswith("{{") and text.endswith("}}") and text.count("{{") == 1:
        return text[2:-2].strip()
    return text


def evaluate(expression: str, context: dict[str, Any]) -> Any:
    """Evaluate an expression to a Python value (``"{{ x > 3 }}"`` or ``"x > 3"``).

    Raises:
        TemplateError: the expression is malformed or fails.
    """
    from langorch.domain._jinja_sandbox import ExpressionLimitError, time_bound

    compiled = _compile_expression(strip_braces(expression))
    try:
        with time_bound():
            return compiled(**context)
    except ExpressionLimitError:
        raise
    except Exception as exc:
        raise TemplateError(
            f"expression {expression!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


def expression_outcomes(expression: str) -> list[Any] | None:
    """The values an expression can evaluate to, when the expression alone says so.

    ``'urgent' if priority == 'high' else 'normal'`` can only be ``'urgent'`` or ``'normal'``; a
    comparison only ``True`` or ``False``; ``label`` or ``labels[0]`` anything. Only literals,
    conditionals (``a if c else b``, where a missing ``else`` is ``None``), comparisons, ``not``
    and tests are followed.

    Returns:
        The possible values, or ``None`` when any of them is known only at run time (or the
        expression does not parse: that is reported by :func:`check_expression`).
    """
    from jinja2 import TemplateSyntaxError, nodes

    try:
        template = _environment().parse("{{ " + strip_braces(expression) + " }}")
    except TemplateSyntaxError:
        return None
    [output] = template.body if len(template.body) == 1 else [None]
    if not isinstance(output, nodes.Output) or len(output.nodes) != 1:
        return None
    found = _outcomes(output.nodes[0])
    return None if found is None else list(dict.fromkeys(found))


def _outcomes(node: nodes.Node) -> list[Any] | None:
    from jinja2 import nodes

    if isinstance(node, nodes.Const):
        return [node.value]
    if isinstance(node, nodes.CondExpr):
        yes = _outcomes(node.expr1)
        no = [None] if node.expr2 is None else _outcomes(node.expr2)
        return None if yes is None or no is None else yes + no
    if isinstance(node, nodes.Compare | nodes.Not | nodes.Test):
        return [True, False]
    return None


def check_expression(expression: str) -> str | None:
    """The syntax error of an expression, or ``None``."""
    try:
        _compile_expression(strip_braces(expression))
    except TemplateError as exc:
        return str(exc)
    return None


def render_value(value: Any, context: dict[str, Any]) -> Any:
    """Render every string inside a JSON-like value.

    A string that is exactly one ``{{ expr }}`` keeps the expression's type (a list stays a list).
    """
    if isinstance(value, str):
        stripped = value.strip()
        if stripped.startswith("{{") and stripped.endswith("}}") and stripped.count("{{") == 1:
            return evaluate(stripped, context)
        return render(value, context)
    if isinstance(value, dict):
        return {k: render_value(v, context) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, context) for v in value]
    return value
