"""Identities compared canonically: one person, however their address is spelled.

Separation of duties, delegation, quorum slots and approver lookup ask "is this the same
person?". A plain ``lower()`` answered no to ``Ana <ana@example.com>``, ``ana+x@example.com``,
``ana@example.com.`` and a Cyrillic a (U+0430) among Latin letters (issue 35), so each let ana
approve her own run. :func:`canonical_identity` is the one answer: the address is read as a
mail system reads it, then reduced to the mailbox it reaches:

- Unicode NFKC (``ana`` in fullwidth letters is ``ana``), surrounding space, a display name
  (``Ana <ana@example.com>``, ``ana@example.com (Ana)``);
- case (``ANA@Example.COM``), the root's trailing dot (``example.com.``);
- ``+tag`` sub-addressing (``ana+x@`` reaches ``ana@``), on unless a policy says the domain
  does not deliver that way;
- and a local part or domain label that mixes scripts (a Cyrillic a among Latin letters)
  is refused by name (:class:`MixedScriptError`): it exists to pass for someone else.

Addresses are stored and shown as given; only comparisons use the canonical form.
:func:`identity_key` is the comparison key of an address already stored, which never raises: a
mixed-script spelling there (from before this check, or a webhook's sender field) compares as the
Latin address it imitates, so it cannot sidestep separation of duties.

Scripts come from the Unicode Script property (``confusable-homoglyphs`` ships the data), loaded
only for addresses that are not ASCII. Mixed scripts are refused as UTS #39's "highly
restrictive" level does: one script, or Latin with the scripts Japanese, Chinese and Korean are
written in together.
"""

from __future__ import annotations

import functools
import unicodedata
from collections import Counter
from collections.abc import Iterator, Sequence
from email.utils import getaddresses

from langorch.domain.errors import LangorchError, Problem

KEYS_KEPT = 4096
"""Comparison keys kept (a pure function of the address: far more than one approval names)."""
_IGNORED_SCRIPTS = frozenset({"COMMON", "INHERITED"})
"""Digits, punctuation (``.``, ``-``, ``+``) and combining marks belong to every script."""
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
"""Scripts written together (UTS #39 §5.2, highly restrictive): Japanese, Chinese, Korean."""


class IdentityError(LangorchError):
    """An address cannot be read as one person's email address."""

    def __init__(self, address: str, reason: str, hint: str) -> None:
        self.address = address
        self.reason = reason
        self.hint = hint
        super().__init__(f"{address!r:.80} {reason} ({hint})")


class MixedScriptError(IdentityError):
    """A local part or domain label mixes scripts: a look-alike letter can make one address
    pass for another person's (``ana@example.com`` with a Cyrillic a, U+0430, for its first
    letter).

    Attributes:
        character: the first letter of the script that is out of place.
        script: its script (``CYRILLIC``).
        among: the script of the other letters (``LATIN``).
        part: ``local part`` or ``domain``.
    """

    def __init__(self, address: str, part: str, character: str, script: str, among: str) -> None:
        self.part = part
        self.character = character
        self.script = script
        self.among = among
        name = unicodedata.name(character, "UNNAMED CHARACTER")
        super().__init__(
            address,
            f"mixes scripts in its {part}: {character!r} (U+{ord(character):04X} {name}) is "
            f"{_title(script)} among {_title(among)} letters, so it can pass for another "
            "person's address",
            "write the address in one script: type it again with the keyboard set to one language",
        )


def canonical_identity(address: str, *, subaddressing: bool = True) -> str:
    """The mailbox ``address`` reaches, in the one spelling two addresses are compared in.

    Args:
        address: an address as given (``Ana <ANA+x@Example.com.>``).
        subaddressing: the domain delivers ``name+tag@`` to ``name@`` (most do; a policy can
            turn it off for a domain where ``+`` is part of names).

    Returns:
        ``local@domain``: NFKC, case-folded, without display name, trailing dot or ``+tag``.

    Raises:
        MixedScriptError: the local part or a domain label mixes scripts (which letter, why).
        IdentityError: it is not one email address.
    """
    local, domain = _parts(address)
    _one_script(address, local, "local part")
    for label in domain.split("."):
        _one_script(address, label, "domain")
    return _joined(local, domain, subaddressing=subaddressing)


@functools.lru_cache(maxsize=KEYS_KEPT)
def identity_key(address: str, *, subaddressing: bool = True) -> str:
    """The key two spellings of one person share, for an address already stored (never raises).

    The canonical identity; a mixed-script spelling compares as the address it imitates (its
    look-alike letters read as the Latin ones), and text that is no address as itself, normalised.
    Kept per address: counting a quorum's votes compares the same few addresses many times.
    """
    try:
        return canonical_identity(address, subaddressing=subaddressing)
    except MixedScriptError:
        imitated = _latin_lookalikes(unicodedata.normalize("NFKC", address))
        try:
            local, domain = _parts(imitated)
        except IdentityError:
            return _folded(imitated)
        return _joined(local, domain, subaddressing=subaddressing)
    except IdentityError:
        return _folded(address)


def same_identity(first: str, second: str, *, subaddressing: bool = True) -> bool:
    """Whether two addresses (as stored) are one person's."""
    return identity_key(first, subaddressing=subaddressing) == identity_key(
        second, subaddressing=subaddressing
    )


def identity_problems(addresses: Sequence[str], path: str) -> Iterator[Problem]:
    """Every address of a definition's list that is not one person's address, with its path.

    Args:
        addresses: the list as written (``approvers``).
        path: the list's path (``steps[2].approval.approvers``); each problem adds ``[j]``.
    """
    for j, address in enumerate(addresses):
        try:
            canonical_identity(address)
        except IdentityError as exc:
            yield Problem(f"{path}[{j}]", f"{address!r:.80} {exc.reason}", exc.hint)


# --------------------------------------------------------------------------------------------
# Reading an address
# --------------------------------------------------------------------------------------------


def _parts(address: str) -> tuple[str, str]:
    """The local part and domain (NFKC, no display name, no trailing dot), as written."""
    text = unicodedata.normalize("NFKC", address).strip()
    found = getaddresses([text])
    if len(found) != 1 or not found[0][1]:
        raise IdentityError(
            address, "is not one email address", "write one email address, like name@example.com"
        )
    local, at, domain = found[0][1].rpartition("@")
    # ``example.com.`` names the same domain as ``example.com`` (the DNS root's dot).
    domain = domain.removesuffix(".")
    if not at or not local or not domain or "" in domain.split("."):
        raise IdentityError(
            address,
            "is not an email address (name@domain)",
            "write one email address, like name@example.com",
        )
    return local, domain


def _joined(local: str, domain: str, *, subaddressing: bool) -> str:
    local = _folded(local)
    if subaddressing:
        name, plus, _tag = local.partition("+")
        local = name if plus and name else local
    return f"{local}@{_folded(domain)}"


def _folded(text: str) -> str:
    # Case folding can leave a string that is no longer NFKC (and NFKC can change case).
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).strip().casefold())


def _one_script(address: str, part: str, where: str) -> None:
    """Refuse ``part`` when its letters come from scripts not written together.

    Raises:
        MixedScriptError: naming the first letter of the least used script.
    """
    if part.isascii():
        return  # ASCII letters are all Latin: no need to load the script data
    from confusable_homoglyphs.categories import alias

    scripts = [(char, str(alias(char)).upper()) for char in part]
    counts = Counter(script for _, script in scripts if script not in _IGNORED_SCRIPTS)
    used = frozenset(counts)
    if len(used) <= 1 or any(used <= allowed for allowed in _ALLOWED_MIXES):
        return
    odd = min(counts, key=lambda script: (counts[script], script))
    among = max(counts, key=lambda script: (counts[script], script))
    character = next(char for char, script in scripts if script == odd)
    raise MixedScriptError(address, where, character, odd, among)


def _latin_lookalikes(text: str) -> str:
    """``text`` with each letter that imitates a Latin one (a Cyrillic a) read as that one."""
    from confusable_homoglyphs.categories import alias
    from confusable_homoglyphs.confusables import confusables_data

    def latin(char: str) -> str:
        if char.isascii() or str(alias(char)).upper() in _IGNORED_SCRIPTS:
            return char
        for glyph in confusables_data.get(char, []):
            candidate = str(glyph["c"])
            if all(c.isascii() or str(alias(c)).upper() in _IGNORED_SCRIPTS for c in candidate):
                return candidate
        return char

    return "".join(latin(char) for char in text)


def _title(script: str) -> str:
    return script.replace("_", " ").title()
