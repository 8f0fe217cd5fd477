"""Templates as a prompt author sees them: data renders as JSON, and a prompt's length limit
follows its provider."""

from __future__ import annotations

import pytest

from langorch.domain.definitions import BlockDefinition
from langorch.domain.templates import (
    MAX_RENDERED_CHARS,
    PROMPT_CHAR_LIMITS,
    TemplateError,
    prompt_char_limit,
    render,
    render_value,
)

ORDER = {"items": ["Burrito Bowl", {"x": True, "note": None}], "restaurant": "Chipotle", "n": 2}


def test_a_seed_placeholder_renders_a_list_as_json():
    text = render("Order {items} from {restaurant} ({n})", ORDER)

    assert text == 'Order ["Burrito Bowl", {"x": true, "note": null}] from Chipotle (2)'


def test_a_seed_placeholder_renders_a_dict_as_json_keeping_other_braces_literal():
    text = render('Given {order}, answer {"ok": true}', {"order": {"café": [1, 2]}})

    assert text == 'Given {"café": [1, 2]}, answer {"ok": true}'


def test_a_jinja_placeholder_renders_a_list_as_json_too():
    assert (
        render("Order {{ items }}!", ORDER) == 'Order ["Burrito Bowl", {"x": true, "note": null}]!'
    )


def test_scalars_and_loops_render_as_before():
    text = render("{% for i in items[:1] %}{{ i }}{% endfor %} x{{ n }} {{ missing }}.", ORDER)

    assert text == "Burrito Bowl x2 ."


def test_a_single_expression_value_keeps_its_type():
    assert render_value("{{ items }}", ORDER) == ORDER["items"]


def test_prompt_limits_follow_the_provider_and_a_block_may_raise_its_own():
    assert prompt_char_limit("bedrock") == PROMPT_CHAR_LIMITS["bedrock"]
    assert prompt_char_limit("openai") == PROMPT_CHAR_LIMITS["openai"]
    assert prompt_char_limit("bedrock", 2_000_000) == 2_000_000
    assert prompt_char_limit("some-new-provider") >= 200_000
    # today's context windows hold far more than the old 200,000-character cap (~50k tokens)
    assert min(PROMPT_CHAR_LIMITS.values()) > MAX_RENDERED_CHARS


def test_a_prompt_past_its_limit_fails_with_how_to_fix_it():
    with pytest.raises(TemplateError) as raised:
        render("{text}", {"text": "x" * 5_000}, max_chars=4_000, too_long_hint="raise it")

    assert str(raised.value) == (
        "template rendered 5,000 characters, more than the 4,000 allowed: raise it"
    )


@pytest.mark.parametrize("value", [999, 4_000_001])
def test_a_block_limit_outside_the_bounds_is_refused(value: int):
    with pytest.raises(ValueError, match="max_prompt_chars"):
        BlockDefinition(block_id="b", prompt_template="{x}", max_prompt_chars=value)


def test_a_block_without_a_limit_keeps_the_content_hash_it_had_before_the_field_existed():
    # The hash this block had before max_prompt_chars was added: stored blocks get no new version
    before = "703cdc63b751acf6790deaf4d2288faba054b744cc281e00b6b3ab40e82d3b9a"

    assert BlockDefinition(block_id="b", prompt_template="{x}").content_hash() == before
    limited = BlockDefinition(block_id="b", prompt_template="{x}", max_prompt_chars=9_000)
    assert limited.content_hash() != before
