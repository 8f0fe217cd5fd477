"""CKP's ``{{ … }}`` placeholders and conditions, rewritten for langorch's sandboxed evaluator.

CKP (seed 001 §6.1, §10) writes templates such as ``"Found {{invoice_list.length}} invoices"``
and conditions such as ``{{invoice_list.length}} > 10`` or ``{{variables.risk_band}} ==
'critical' && {{amount}} > 100``. langorch evaluates templates and expressions with Jinja2's
immutable sandbox (:mod:`langorch.domain.templates`), never ``eval``; this module only rewrites
the text once, when a procedure is compiled, so what runs is an ordinary langorch template:

* a condition's ``{{ X }}`` becomes ``(X)``: the braces mark a value, the rest is the expression;
* ``.length`` becomes Jinja's ``| length`` (a list's, a string's or a mapping's size);
* the scope prefixes CKP authors use — ``variables.``, ``vars.``, ``input.``, ``inputs.`` — are
  dropped: a procedure's variables, its inputs and the outputs of its steps are one scope;
* JavaScript-style operators read as Jinja's: ``&&`` → ``and``, ``||`` → ``or``, ``!x`` →
  ``not x``, ``===`` → ``==``, ``!==`` → ``!=``, ``null`` / ``undefined`` → ``none``.

String literals are copied unchanged. Everything else of Jinja's expression language (filters,
``in``, arithmetic, ``[0]``) passes through as written.
"""

from __future__ import annotations

import re

_SCOPE_PREFIX = re.compile(r"(?<![\w.])(?:variables|vars|inputs|input)\.(?=[A-Za-z_])")
_LENGTH = re.compile(r"\.length\b(?!\s*\()")
_NULL = re.compile(r"(?<![\w.])(?:null|undefined)(?!\w)")
_NOT = re.compile(r"!(?!=)")
_BRACES = re.compile(r"\{\{((?:(?!\{\{|\}\}).)*)\}\}", re.DOTALL)


def translate_template(text: str) -> str:
    """A CKP template with every ``{{ … }}`` rewritten (text outside the braces unchanged).

    Args:
        text: A CKP string that may hold ``{{ … }}`` placeholders.

    Returns:
        The same template in langorch's (Jinja2) syntax.
    """
    return _BRACES.sub(lambda m: "{{ " + _code(m.group(1)).strip() + " }}", text)


def translate_condition(text: str) -> str:
    """A CKP condition as a langorch expression (no braces).

    Args:
        text: ``{{invoice_list.length}} > 10``, ``{{status}} == 'approved'``, ``amount > 5``.

    Returns:
        ``(invoice_list|length) > 10`` and so on: what :func:`langorch.domain.templates.evaluate`
        takes.
    """
    stripped = text.strip()
    whole = _BRACES.fullmatch(stripped)
    if whole is not None:
        return _code(whole.group(1)).strip()
    return _code(_BRACES.sub(lambda m: "(" + m.group(1).strip() + ")", stripped)).strip()


def variable_of(text: str) -> str | None:
    """The variable a value names when it is only a reference: ``"{{ invoices }}"``,
    ``"{{variables.invoices}}"`` or a bare ``invoices`` give ``invoices``; anything else
    ``None``."""
    stripped = text.strip()
    whole = _BRACES.fullmatch(stripped)
    inner = whole.group(1).strip() if whole is not None else stripped
    inner = _SCOPE_PREFIX.sub("", inner)
    return inner if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", inner) else None


def _code(expression: str) -> str:
    """Rewrite the code of one expression, leaving its string literals alone."""
    out: list[str] = []
    for piece, literal in _split_literals(expression):
        if literal:
            out.append(piece)
            continue
        piece = piece.replace("===", "==").replace("!==", "!=")
        piece = piece.replace("&&", " and ").replace("||", " or ")
        piece = _NOT.sub(" not ", piece)
        piece = _SCOPE_PREFIX.sub("", piece)
        piece = _LENGTH.sub(" | length", piece)
        piece = _NULL.sub("none", piece)
        out.append(piece)
    return "".join(out)


def _split_literals(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into ``(piece, is_string_literal)`` runs (quotes ``'`` and ``"``)."""
    pieces: list[tuple[str, bool]] = []
    current: list[str] = []
    quote: str | None = None
    escaped = False
    for char in text:
        if quote is None:
            if char in "'\"":
                if current:
                    pieces.append(("".join(current), False))
                current, quote = [char], char
            else:
                current.append(char)
            continue
        current.append(char)
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == quote:
            pieces.append(("".join(current), True))
            current, quote = [], None
    if current:
        pieces.append(("".join(current), quote is not None))
    return pieces
