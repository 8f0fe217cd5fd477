"""What LLM tokens cost: a price table per provider, model and token type, and the arithmetic.

Prices are US dollars per million tokens, keyed ``"provider/model"`` (``"bedrock/anthropic.
claude-haiku-4-5-20251001-v1:0"``); ``"provider/*"`` prices every other model of a provider.
The shipped table (:data:`SHIPPED_PRICES`, list prices of :data:`PRICES_AS_OF`) is overridden
by a price file (``Settings.prices_file``) and then by a workflow's ``prices:``; a key given
later replaces the whole entry of that key.

Pure: no I/O. Reading a price file is :mod:`langorch.adapters.prices`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from langorch.domain.errors import DefinitionError, Problem

PRICES_AS_OF = "2025-10-15"
"""The date the shipped list prices were read from the providers' pricing pages. Prices
change: check yours, and override them with ``LANGORCH_PRICES_FILE`` or a workflow's
``prices:``."""

PER_TOKENS = 1_000_000
"""Prices are per this many tokens."""

CHARS_PER_TOKEN = 4
"""How an estimate turns prompt characters into tokens (no tokenizer is loaded to count)."""

DEFAULT_ESTIMATE_OUTPUT_TOKENS = 4096
"""The output an estimate assumes for a call whose step, block, workflow and settings set no
``max_tokens``."""

TOKEN_TYPES = ("input", "output", "cache_read", "cache_write")
"""The token types a usage record may carry and a price may name."""


class TokenPrice(BaseModel):
    """US dollars per million tokens of one model, per token type.

    ``cache_read`` and ``cache_write`` default to the input price (a provider that bills no
    cache discount, or a model whose cache price is not listed).
    """

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)

    def per_million(self, kind: str) -> float:
        """The price of ``kind`` of tokens (one of :data:`TOKEN_TYPES`) per million."""
        own = {
            "output": self.output,
            "cache_read": self.cache_read,
            "cache_write": self.cache_write,
        }
        price = own.get(kind)
        return self.input if price is None else price


def _price(input_: float, output: float, cache_read: float, cache_write: float) -> TokenPrice:
    return TokenPrice(input=input_, output=output, cache_read=cache_read, cache_write=cache_write)


SHIPPED_PRICES: dict[str, TokenPrice] = {
    # The offline provider is scripted and local: free. A test prices a named offline model
    # (``offline/priced``) in its workflow's ``prices:`` to see money move.
    "offline/*": _price(0, 0, 0, 0),
    # Bedrock on-demand, us-east-1 (model ids as the bedrock provider sends them).
    "bedrock/anthropic.claude-haiku-4-5-20251001-v1:0": _price(1.0, 5.0, 0.10, 1.25),
    "bedrock/anthropic.claude-sonnet-4-5-20250929-v1:0": _price(3.0, 15.0, 0.30, 3.75),
    "bedrock/anthropic.claude-3-haiku-20240307-v1:0": _price(0.25, 1.25, 0.03, 0.30),
    "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0": _price(3.0, 15.0, 0.30, 3.75),
    # Anthropic's API.
    "anthropic/claude-haiku-4-5": _price(1.0, 5.0, 0.10, 1.25),
    "anthropic/claude-sonnet-4-5": _price(3.0, 15.0, 0.30, 3.75),
    "anthropic/claude-opus-4-1": _price(15.0, 75.0, 1.50, 18.75),
    # OpenAI (cache writes are not billed apart: they cost the input price).
    "openai/gpt-4o-mini": _price(0.15, 0.60, 0.075, 0.15),
    "openai/gpt-4o": _price(2.50, 10.0, 1.25, 2.50),
    "openai/gpt-4.1": _price(2.0, 8.0, 0.50, 2.0),
    "openai/gpt-4.1-mini": _price(0.40, 1.60, 0.10, 0.40),
    "openai/gpt-4.1-nano": _price(0.10, 0.40, 0.025, 0.10),
}
"""List prices on :data:`PRICES_AS_OF`, US dollars per million tokens."""


def key_problem(key: str, path: str) -> Problem | None:
    """Why ``key`` is not a price key (``"provider/model"`` or ``"provider/*"``), else ``None``."""
    provider, slash, model = key.partition("/")
    if not slash or not provider.strip() or not model.strip():
        return Problem(
            path,
            f"price key {key!r} is not 'provider/model'",
            "name the provider and the model, e.g. "
            "'bedrock/anthropic.claude-haiku-4-5-20251001-v1:0', or 'openai/*' for every model",
        )
    return None


class PriceTable:
    """Prices by ``"provider/model"`` key, with ``"provider/*"`` as each provider's fallback."""

    def __init__(self, prices: Mapping[str, TokenPrice]) -> None:
        """Args:
        prices: Prices by key (see the module docstring); keys are checked by the callers
            that read them from users (:func:`parse_prices`).
        """
        self._prices = dict(prices)

    @classmethod
    def shipped(cls) -> PriceTable:
        """The table langorch ships (:data:`SHIPPED_PRICES`)."""
        return cls(SHIPPED_PRICES)

    def merged(self, overrides: Mapping[str, TokenPrice] | None) -> PriceTable:
        """This table with ``overrides`` replacing (or adding) whole entries."""
        if not overrides:
            return self
        return PriceTable({**self._prices, **overrides})

    def price_of(self, provider: str, model: str) -> TokenPrice | None:
        """The price of ``model`` of ``provider``: its own entry, else the provider's ``*``."""
        return self._prices.get(f"{provider}/{model}") or self._prices.get(f"{provider}/*")

    def cost(self, provider: str, model: str, tokens: Mapping[str, int]) -> float | None:
        """What ``tokens`` (by token type) of one call cost, in US dollars.

        Returns:
            The cost, rounded to 1e-9 dollars; ``None`` when the model has no price.
        """
        price = self.price_of(provider, model)
        if price is None:
            return None
        total = sum(price.per_million(kind) * int(tokens.get(kind) or 0) for kind in TOKEN_TYPES)
        return round(total / PER_TOKENS, 9)

    def estimate(
        self, provider: str, model: str, *, prompt_chars: int, max_output_tokens: int | None
    ) -> float | None:
        """What a call is expected to cost at most: its prompt (``prompt_chars`` /
        :data:`CHARS_PER_TOKEN` tokens) plus its whole output limit.

        Returns:
            The estimate in US dollars; ``None`` when the model has no price.
        """
        output = max_output_tokens or DEFAULT_ESTIMATE_OUTPUT_TOKENS
        tokens = {"input": -(-prompt_chars // CHARS_PER_TOKEN), "output": output}
        return self.cost(provider, model, tokens)


def parse_prices(data: Any, *, where: str) -> dict[str, TokenPrice]:
    """Prices from a document (a price file, a workflow's ``prices:``), every key checked.

    Args:
        data: ``{"provider/model": {"input": …, "output": …, "cache_read": …,
            "cache_write": …}}``.
        where: What the document is, for messages (a file's path).

    Raises:
        DefinitionError: naming every bad key and price, with its path.
    """
    if not isinstance(data, Mapping):
        raise DefinitionError(
            where,
            [Problem("", "prices must be a mapping", _SHAPE)],
        )
    prices: dict[str, TokenPrice] = {}
    problems: list[Problem] = []
    for key, value in data.items():
        problem = key_problem(str(key), str(key))
        if problem is not None:
            problems.append(problem)
            continue
        try:
            prices[str(key)] = TokenPrice.model_validate(value)
        except ValidationError as exc:
            for error in exc.errors(include_url=False, include_input=False):
                field = ".".join(str(p) for p in error["loc"])
                problems.append(
                    Problem(f"{key}.{field}" if field else str(key), error["msg"], _SHAPE)
                )
    if problems:
        raise DefinitionError(f"{where}: bad prices", problems)
    return prices


_SHAPE = (
    "write {'provider/model': {input: 1.0, output: 5.0, cache_read: 0.1, cache_write: 1.25}} "
    "in US dollars per million tokens"
)


def format_usd(value: float) -> str:
    """A cost as people read it: cents above a dollar, more digits below (``$0.0042``)."""
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.0001 or value == 0:
        return f"${value:.4f}"
    return f"${value:.6f}"
