"""EventBridge event patterns: refused with a path when malformed, matched as EventBridge does.

The cases follow the EventBridge user guide's "Event patterns" and "Content filtering" pages.
"""

from __future__ import annotations

from typing import Any

import pytest

from langorch.domain.event_patterns import matches, pattern_problems

ORDER: dict[str, Any] = {
    "id": "e-1",
    "source": "shop.orders",
    "detail-type": "Order Placed",
    "resources": ["arn:aws:shop:eu-west-1:1:store/a", "arn:aws:shop:eu-west-1:1:store/b"],
    "detail": {"customer_id": "c-7", "total": 250, "express": True, "note": None},
}


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ({"source": ["shop.orders"]}, True),
        ({"source": ["shop.refunds"]}, False),
        ({"source": ["shop.orders"], "detail-type": ["Order Shipped"]}, False),
        ({"detail": {"customer_id": ["c-7", "c-8"]}}, True),
        ({"detail": {"customer_id": [{"prefix": "c-"}]}}, True),
        ({"detail": {"customer_id": [{"suffix": "-8"}]}}, False),
        ({"detail-type": [{"equals-ignore-case": "order placed"}]}, True),
        ({"detail": {"total": [{"numeric": [">", 100, "<=", 250]}]}}, True),
        ({"detail": {"total": [{"numeric": ["<", 100]}]}}, False),
        ({"detail": {"total": ["250"]}}, False),  # a string is not the number
        ({"detail": {"total": [250.0]}}, True),
        ({"detail": {"express": [True]}}, True),
        ({"detail": {"express": [1]}}, False),  # true is not 1
        ({"detail": {"note": [None]}}, True),
        ({"detail": {"customer_id": [{"anything-but": ["c-1", "c-2"]}]}}, True),
        ({"detail": {"customer_id": [{"anything-but": "c-7"}]}}, False),
        ({"detail": {"customer_id": [{"anything-but": {"prefix": "c-"}}]}}, False),
        ({"detail": {"coupon": [{"anything-but": "x"}]}}, False),  # the field must exist
        ({"detail": {"coupon": [{"exists": False}]}}, True),
        ({"detail": {"coupon": [{"exists": True}]}}, False),
        ({"detail": {"total": [{"exists": True}]}}, True),
        ({"detail": [{"exists": True}]}, False),  # exists matches leaves, not objects
        ({"resources": [{"suffix": "/b"}]}, True),  # an array matches when any item does
        ({"detail": {"customer_id": {"name": ["c-7"]}}}, False),  # a string is not an object
    ],
)
def test_a_pattern_matches_as_eventbridge_does(pattern: dict[str, Any], expected: bool):
    # Given a valid pattern
    assert pattern_problems(pattern, "pattern") == []

    # When it is matched against the order event
    # Then it matches exactly when EventBridge would
    assert matches(pattern, ORDER) is expected


@pytest.mark.parametrize(
    ("pattern", "path", "words"),
    [
        ({}, "p", "non-empty JSON object"),
        ({"source": "shop.orders"}, "p.source", "wrap the value in an array"),
        ({"source": []}, "p.source", "empty array"),
        ({"detail": {"total": [{"numeric": [">>", 1]}]}}, "p.detail.total[0].numeric[0]", ">>"),
        (
            {"detail": {"total": [{"numeric": [">", "1"]}]}},
            "p.detail.total[0].numeric[1]",
            "not a number",
        ),
        ({"source": [{"wildcard": "shop.*"}]}, "p.source[0]", "not a supported matcher"),
        ({"source": [{"prefix": 1}]}, "p.source[0].prefix", "takes a string"),
        ({"source": [{"exists": "yes"}]}, "p.source[0].exists", "true or false"),
        ({"$or": [{"source": ["a"]}]}, "p.$or", "not supported"),
    ],
)
def test_a_malformed_pattern_is_refused_at_its_path(pattern: Any, path: str, words: str):
    # Given a pattern EventBridge would refuse (or one this matcher does not support)
    # When it is checked
    problems = pattern_problems(pattern, "p")

    # Then the problem names the path and what is wrong
    assert [p.path for p in problems] == [path]
    assert words in problems[0].message + (problems[0].hint or "")
