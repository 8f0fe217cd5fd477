"""Identities compared canonically (issue 35, item 3): every spelling of one address either
names the same person or is refused, and different people stay different."""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langorch.domain.identities import (
    IdentityError,
    MixedScriptError,
    canonical_identity,
    identity_key,
    identity_problems,
    same_identity,
)

ANA = "ana@example.com"
CYRILLIC = {
    "a": "\u0430",
    "e": "\u0435",
    "o": "\u043e",
    "c": "\u0441",
    "p": "\u0440",
    "x": "\u0445",
}
"""Cyrillic letters that look like Latin ones (escaped: they are meant to fool the eye)."""
CYRILLIC_A = CYRILLIC["a"]


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


SPELLINGS = [
    "ANA@Example.COM",
    " ana@example.com\t",
    "Ana <ana@example.com>",
    "ana@example.com (Ana)",
    "ana+x@example.com",
    "ana@example.com.",
    _fullwidth("ana") + "@" + _fullwidth("example.com"),
    '"Ana, the boss" <ANA+approvals@EXAMPLE.com.>',
]


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, bool]:
    """A spelling of ana@example.com, and whether it slipped in a Cyrillic look-alike."""
    disguised = False

    def letter(char: str) -> str:
        nonlocal disguised
        form = draw(st.sampled_from(["same", "upper", "fullwidth", "cyrillic"]))
        if form == "upper":
            return char.upper()
        if form == "fullwidth":
            return _fullwidth(char)
        if form == "cyrillic" and char in CYRILLIC:
            disguised = True
            return CYRILLIC[char]
        return char

    local = "".join(letter(c) for c in "ana")
    if draw(st.booleans()):
        local += "+" + draw(st.text(string.ascii_letters + string.digits, min_size=1, max_size=8))
    domain = "".join(letter(c) for c in "example.com") + draw(st.sampled_from(["", ".", "\uff0e"]))
    at = draw(st.sampled_from(["@", "\uff20"]))  # fullwidth full stop and commercial at
    address = f"{local}{at}{domain}"
    name = draw(st.text(string.ascii_letters + " ", min_size=1, max_size=12).map(str.strip))
    form = draw(st.sampled_from(["bare", "angle", "comment"]))
    if form == "angle" and name:
        address = f"{name} <{address}>"
    elif form == "comment" and name:
        address = f"{address} ({name})"
    space = draw(st.sampled_from(["", " ", "\t", "  "]))
    return f"{space}{address}{space}", disguised


@settings(max_examples=100, deadline=None)
@given(spelling=spellings())
def test_every_spelling_of_an_address_is_that_person_or_refused(
    spelling: tuple[str, bool],
) -> None:
    # Given a spelling of ana's address (case, fullwidth forms, +tag, trailing dot, display
    # name, surrounding space, maybe a Cyrillic look-alike letter)
    address, disguised = spelling
    # When it is read / Then it is ana, or refused when a look-alike letter was slipped in
    if disguised:
        with pytest.raises(MixedScriptError):
            canonical_identity(address)
    else:
        assert canonical_identity(address) == ANA


@pytest.mark.parametrize("address", SPELLINGS)
def test_the_spellings_attackers_used_are_the_same_person(address: str) -> None:
    assert canonical_identity(address) == ANA


def test_a_cyrillic_look_alike_is_refused_naming_the_letter_and_why() -> None:
    # Given ana's address with a Cyrillic a (U+0430) for its first letter
    # When it is read / Then it is refused, naming the letter, its script and why
    with pytest.raises(MixedScriptError) as refused:
        canonical_identity(f"{CYRILLIC_A}na@example.com")
    assert (refused.value.character, refused.value.script) == (CYRILLIC_A, "CYRILLIC")
    assert refused.value.part == "local part"
    message = str(refused.value)
    assert "U+0430 CYRILLIC SMALL LETTER A" in message
    assert "Cyrillic among Latin letters" in message
    assert "one script" in message


def test_a_look_alike_in_the_domain_is_refused() -> None:
    with pytest.raises(MixedScriptError) as refused:
        canonical_identity(f"ana@ex{CYRILLIC_A}mple.com")
    assert refused.value.part == "domain"


@settings(max_examples=100, deadline=None)
@given(
    first=st.text(string.ascii_lowercase + string.digits + "._-", min_size=1, max_size=12),
    second=st.text(string.ascii_lowercase + string.digits + "._-", min_size=1, max_size=12),
)
def test_different_people_stay_different(first: str, second: str) -> None:
    # Given two mailboxes with different names at one domain
    # When both are read / Then they are different people exactly when the names differ
    same = canonical_identity(f"{first}@example.com") == canonical_identity(f"{second}@example.com")
    assert same == (first == second)


@settings(max_examples=100, deadline=None)
@given(spelling=spellings())
def test_the_canonical_identity_reads_as_itself(spelling: tuple[str, bool]) -> None:
    address, disguised = spelling
    if not disguised:
        once = canonical_identity(address)
        assert canonical_identity(once) == once


def test_sub_addressing_can_be_turned_off_for_a_domain_that_does_not_deliver_so() -> None:
    assert canonical_identity("ana+x@example.com", subaddressing=False) == "ana+x@example.com"
    assert not same_identity("ana+x@example.com", ANA, subaddressing=False)


def test_a_stored_look_alike_compares_as_the_address_it_imitates() -> None:
    # Given a mixed-script address already stored (a webhook's sender field)
    # When it is compared / Then it is the person it imitates, so it cannot sidestep a check
    assert identity_key(f"{CYRILLIC_A}na@example.com") == ANA
    assert same_identity(f"{CYRILLIC_A.upper()}na+x@ex{CYRILLIC_A}mple.com", "ANA@example.com")


@pytest.mark.parametrize(
    "address",
    ["ана@пример.рф", "山田たろう@example.jp", "jörg@bücher.de", "ana.b-2@sub.example.com"],
)
def test_addresses_written_in_one_script_are_kept(address: str) -> None:
    assert canonical_identity(address) == address


@pytest.mark.parametrize("text", ["ana", "ana@", "@example.com", "a@b, c@d", "ana@example..com"])
def test_text_that_is_not_one_address_is_refused(text: str) -> None:
    with pytest.raises(IdentityError, match="email address"):
        canonical_identity(text)


def test_a_list_of_addresses_reports_each_bad_one_with_its_path() -> None:
    problems = list(identity_problems([ANA, f"{CYRILLIC_A}na@example.com", "nobody"], "approvers"))
    assert [p.path for p in problems] == ["approvers[1]", "approvers[2]"]
    assert "mixes scripts" in problems[0].message and "one script" in problems[0].hint
