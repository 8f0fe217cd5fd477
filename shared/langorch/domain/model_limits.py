"""Per-model and per-provider limits as data (issue 33): how many calls may be in flight at once
and how many may start per period, set per deployment (``model_limits``).

::

    {"bedrock:anthropic.claude-3-5-sonnet*": {"concurrency": 4, "rate": "60/1m"},
     "openai:*": {"concurrency": 8},
     "anthropic": {"concurrency": 16}}

A key ``<provider>:<model pattern>`` (``*`` and ``?`` wildcards) sets the limits of *each*
model it matches, as a provider's quotas are per model: every call to that model holds one slot
of the resource ``model:<provider>:<model>``. Where several patterns match a model the longest
wins (``openai:gpt-4o*`` over ``openai:*``). A bare ``<provider>`` limits all of that provider's
calls together (one resource ``model:<provider>``), on top of any per-model limit.

``concurrency`` is enforced with the resource locks' leases (:mod:`langorch.domain.resources`):
a call finding its model full parks its run in the resource's FIFO queue, with no Lambda
running, until a call of that model ends. ``rate`` (``"60/1m"``: at most 60 calls start in any
minute) is enforced with reservations (:func:`langorch.domain.resources.reserve`): a call over
the rate sleeps until its reserved start. Neither ever fails a run.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from langorch.domain.errors import DefinitionError, Problem
from langorch.domain.resources import MAX_LIMIT, RESOURCE_NAME

SETTING = "model_limits"
"""The setting's name (``LANGORCH_MODEL_LIMITS``; cdk.json's ``model_limits``)."""

PREFIX = "model:"
"""Resources whose leases are slots of a model (or of a provider's models together)."""

RATE_PREFIX = "model-rate:"
"""Resources whose leases are reserved starts under a model's ``rate``."""

MAX_RATE = MAX_LIMIT
"""The most calls one ``rate`` admits per period: each reservation of the newest ``MAX_RATE``
is kept in the resource's one item, like a lease."""

MIN_PERIOD_SECONDS, MAX_PERIOD_SECONDS = 1, 86_400
"""A ``rate``'s period: one second to one day."""

_KEY = re.compile(r"^(?P<provider>[a-z][a-z0-9_-]*)(?::(?P<model>[A-Za-z0-9_.:/@*?-]{1,200}))?$")
_RATE = re.compile(r"^\s*(?P<calls>\d+)\s*/\s*(?P<count>\d*)\s*(?P<unit>s|m|h|d)\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400}
_EXAMPLE = '{"bedrock:anthropic.claude-3-5-sonnet*": {"concurrency": 4, "rate": "60/1m"}}'


@dataclass(frozen=True)
class Rate:
    """At most ``calls`` starts in any ``period`` seconds (``text``: as written)."""

    calls: int
    period: float
    text: str


@dataclass(frozen=True)
class ModelSlot:
    """One limit a call is held to: a resource, what it stands for, and its limits."""

    name: str
    """The resource holding the slots (``model:bedrock:<model id>``, ``model:openai``)."""
    label: str
    """What a person reads (``bedrock:<model id>``, ``openai``)."""
    concurrency: int | None
    rate: Rate | None

    @property
    def rate_name(self) -> str:
        """The resource holding the reserved starts of :attr:`rate`."""
        return RATE_PREFIX + self.name.removeprefix(PREFIX)


@dataclass(frozen=True)
class _Rule:
    provider: str
    pattern: str | None
    concurrency: int | None
    rate: Rate | None


@dataclass(frozen=True)
class ModelLimits:
    """A deployment's ``model_limits``, parsed (:meth:`parse`); empty: no limit."""

    rules: tuple[_Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    @classmethod
    def parse(
        cls,
        raw: Mapping[str, Any] | None,
        *,
        providers: Iterable[str] | None = None,
        path: str = SETTING,
    ) -> ModelLimits:
        """The limits ``raw`` (``{key: {"concurrency": N, "rate": "N/period"}}``) sets.

        Args:
            raw: the setting's value (``None``: no limits).
            providers: the LLM providers a key may name (``None``: any).
            path: where ``raw`` was read, for the problems' paths.

        Raises:
            DefinitionError: every problem found, each with its path, what is wrong, the limit
                and how to fix it.
        """
        if raw is None:
            return cls()
        if not isinstance(raw, Mapping):
            problem = Problem(path, f"must be an object, not {type(raw).__name__}", _EXAMPLE)
            raise DefinitionError(SETTING, [problem])
        known = frozenset(providers) if providers is not None else None
        rules: list[_Rule] = []
        problems: list[Problem] = []
        for key, value in raw.items():
            where = f"{path}[{key!r}]"
            found = _rule(str(key), value, where, known)
            if isinstance(found, _Rule):
                rules.append(found)
            else:
                problems.extend(found)
        if problems:
            raise DefinitionError(SETTING, problems)
        return cls(tuple(rules))

    def slots(self, provider: str, model: str) -> list[ModelSlot]:
        """The limits a call to ``model`` of ``provider`` is held to, in the order they are
        taken (by resource name, the one order every call takes them in, so no two calls
        each hold what the other waits for)."""
        found: list[ModelSlot] = []
        matching = [
            r
            for r in self.rules
            if r.provider == provider and r.pattern is not None and fnmatchcase(model, r.pattern)
        ]
        if matching:
            best = max(matching, key=lambda r: len(r.pattern or ""))  # first of the longest
            found.append(_slot(f"{provider}:{model}", best))
        found += [
            _slot(provider, r) for r in self.rules if r.provider == provider and not r.pattern
        ]
        return sorted(found, key=lambda s: s.name)


def _rule(key: str, value: Any, where: str, known: frozenset[str] | None) -> _Rule | list[Problem]:
    matched = _KEY.match(key)
    if matched is None:
        return [
            Problem(
                where,
                f"{key!r} is not a provider or provider:model key",
                "write 'bedrock:anthropic.claude-3-5-sonnet*' (one model or a pattern with * "
                "and ?) or 'openai' (all of a provider's calls together)",
            )
        ]
    provider = matched["provider"]
    problems: list[Problem] = []
    if known is not None and provider not in known:
        problems.append(
            Problem(where, f"unknown provider {provider!r}", f"one of {', '.join(sorted(known))}")
        )
    if not isinstance(value, Mapping):
        problems.append(
            Problem(
                where, f"must be an object, not {value!r}", '{"concurrency": 4, "rate": "60/1m"}'
            )
        )
        return problems
    unknown = sorted(set(value) - {"concurrency", "rate"})
    if unknown:
        problems.append(
            Problem(
                f"{where}.{unknown[0]}",
                f"unknown field(s) {', '.join(unknown)}",
                "a model's limits are 'concurrency' and 'rate'",
            )
        )
    concurrency = value.get("concurrency")
    rate_text = value.get("rate")
    if concurrency is None and rate_text is None:
        problems.append(
            Problem(where, "sets no limit", 'give "concurrency": N and/or "rate": "N/1m"')
        )
    if concurrency is not None and (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= MAX_LIMIT
    ):
        problems.append(
            Problem(
                f"{where}.concurrency",
                f"must be a whole number from 1 to {MAX_LIMIT}, not {concurrency!r}",
                "the calls of one model that may be in flight at once, e.g. 4",
            )
        )
    rate = None
    if rate_text is not None:
        rate = parse_rate(rate_text, f"{where}.rate", problems)
    if problems:
        return problems
    return _Rule(provider, matched["model"], concurrency, rate)


def parse_rate(text: Any, where: str, problems: list[Problem]) -> Rate | None:
    """``"60/1m"`` (calls / period: ``s``, ``m``, ``h``, ``d``, with an optional count) as a
    :class:`Rate`; a problem appended to ``problems`` (and ``None``) when it is not one."""
    matched = _RATE.match(text) if isinstance(text, str) else None
    if matched is None:
        problems.append(
            Problem(
                where,
                f"{text!r} is not a rate",
                'write calls/period with a unit of s, m, h or d, e.g. "60/1m" or "5/s"',
            )
        )
        return None
    calls = int(matched["calls"])
    period = int(matched["count"] or 1) * _UNIT_SECONDS[matched["unit"]]
    if not MIN_PERIOD_SECONDS <= period <= MAX_PERIOD_SECONDS:
        problems.append(Problem(where, f"the period of {text!r} must be 1s to 1d", 'e.g. "60/1m"'))
        return None
    if not 1 <= calls <= MAX_RATE:
        per_second = -(-calls // period)  # rounded up
        hint = (
            f'the same pace over a shorter period, e.g. "{per_second}/1s"'
            if calls > MAX_RATE and per_second <= MAX_RATE
            else "at least 1 call per period"
            if calls < 1
            else f"at most {MAX_RATE} calls per second can be limited"
        )
        problems.append(
            Problem(where, f"{calls} calls per period: a rate admits 1 to {MAX_RATE}", hint)
        )
        return None
    return Rate(calls, float(period), text.strip())


def _slot(label: str, rule: _Rule) -> ModelSlot:
    return ModelSlot(resource_name(label), label, rule.concurrency, rule.rate)


def resource_name(label: str) -> str:
    """``model:`` and the label, or ``model:@`` and a digest of it when the label is no resource
    name (a long ARN): equal labels still share one resource."""
    name = PREFIX + label
    if RESOURCE_NAME.match(name):
        return name
    return f"{PREFIX}@{hashlib.sha256(label.encode('utf-8')).hexdigest()[:24]}"


def describe_wait(resource: str, position: Any = None, seconds: Any = None) -> str:
    """Why a step waits, as the timeline and the dev terminal say it: ``waits for a slot of model
    bedrock:…, place 2 in line``, ``waits 12 s for the rate of model openai:gpt-4o``, or
    ``waiting for resource browser:1 (position 2)``."""
    if resource.startswith(PREFIX):
        label = resource.removeprefix(PREFIX)
        what = f"model {label}" if ":" in label else f"provider {label}"
        if seconds:
            return f"waits {seconds} s for the rate of {what}"
        return f"waits for a slot of {what}, place {position} in line"
    return f"waiting for resource {resource} (position {position})"
