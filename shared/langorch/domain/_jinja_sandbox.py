"""Jinja2's immutable sandbox with bounds on what an expression builds and how long it runs.

Jinja's sandbox stops unsafe attribute access and caps ``range()`` at 100,000 items, but
``'a' * 50000000``, ``'x' | center(10**9)``, ``'x'.ljust(10**9)`` or ``2 ** 10**9`` still build
whatever they are asked to, and nested loops can run for hours. The sandbox's own hooks
(``intercepted_binops`` + ``call_binop``, ``call``, ``getattr``, ``getitem``) are where each
operation passes, so the bounds live there:

* **size** — an operation that would build a string, list or number past
  :data:`MAX_BUILT` characters / items / digits is refused *before* it runs;
* **time** — every hooked operation checks the evaluation's deadline
  (:data:`MAX_SECONDS`); rendering also checks it between output chunks.

A breach raises :class:`ExpressionLimitError`, which fails the step with the limit and the fix.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Iterator, Sized
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from langorch.domain.errors import LangorchError

MAX_BUILT = 4_000_000
"""Characters of a string, items of a list, or decimal digits of a number one operation may
build (4 MB of text is ~1M tokens: more than any prompt, far less than a Lambda's memory)."""
MAX_SECONDS = 2.0
"""Wall-clock time one template or expression may take."""

_deadline: ContextVar[float | None] = ContextVar("langorch_template_deadline", default=None)

# Callables whose numeric argument is the size of what they build.
_WIDTH_ARGUMENT = frozenset({"center", "ljust", "rjust", "zfill", "indent", "wordwrap"})


class ExpressionLimitError(LangorchError):
    """A template or expression tried to build too much or ran too long."""

    retryable = False
    """The same expression over the same state breaches the same bound again."""


@contextmanager
def time_bound(seconds: float = MAX_SECONDS) -> Iterator[None]:
    """Bound the evaluations inside the block to ``seconds`` (nested blocks keep the outer)."""
    if _deadline.get() is not None:
        yield
        return
    token = _deadline.set(time.monotonic() + seconds)
    try:
        yield
    finally:
        _deadline.reset(token)


def check_time() -> None:
    """Raise when the current evaluation is past its deadline."""
    deadline = _deadline.get()
    if deadline is not None and time.monotonic() > deadline:
        raise ExpressionLimitError(
            f"the expression ran longer than {MAX_SECONDS:g} s; "
            "simplify it or move the work into a step of its own"
        )


def _too_big(what: str, size: float) -> ExpressionLimitError:
    return ExpressionLimitError(
        f"the expression would build {what} of {int(size):,} (limit {MAX_BUILT:,}); "
        "bound the repetition, range or width it uses"
    )


def _length(value: Any) -> int | None:
    return len(value) if isinstance(value, str | bytes | list | tuple) else None


def _check_binop(operator: str, left: Any, right: Any) -> None:
    if operator == "*":
        for seq, times in ((left, right), (right, left)):
            size = _length(seq)
            if size is not None and isinstance(times, int) and size * times > MAX_BUILT:
                raise _too_big("a sequence", size * times)
    elif operator == "+":
        sizes = (_length(left), _length(right))
        if None not in sizes and sum(s for s in sizes if s) > MAX_BUILT:
            raise _too_big("a sequence", sum(s for s in sizes if s))
    elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
        digits = right * math.log10(abs(left)) if abs(left) > 1 else 0
        if digits > MAX_BUILT:
            raise _too_big("a number with digits", digits)


def _check_call(obj: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    name = getattr(obj, "__name__", "")
    if name in _WIDTH_ARGUMENT:
        widths = [a for a in (*args, *kwargs.values()) if isinstance(a, int)]
        if widths and max(widths) > MAX_BUILT:
            raise _too_big(f"a string ({name})", max(widths))
    elif name == "expandtabs" and args and isinstance(args[0], int):
        text = getattr(obj, "__self__", "")
        if isinstance(text, str) and args[0] * max(1, text.count("\t")) > MAX_BUILT:
            raise _too_big("a string (expandtabs)", args[0] * text.count("\t"))
    elif name in ("replace", "do_replace"):
        # str.replace(old, new) on its bound string, or the filter's (eval_ctx, s, old, new)
        bound = getattr(obj, "__self__", None)
        candidates = ((bound,) if isinstance(bound, str) else ()) + args
        texts = [a for a in candidates if isinstance(a, str)]
        if len(texts) >= 3:
            text, old, new = texts[:3]
            hits = text.count(old) if old else len(text) + 1
            size = len(text) + hits * max(0, len(new) - len(old))
            if size > MAX_BUILT:
                raise _too_big("a string (replace)", size)


def _bounded_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """A filter with the sandbox's checks (compiled templates call filters directly)."""

    @functools.wraps(func)  # keeps Jinja's pass_context/pass_eval_context marker
    def bounded(*args: Any, **kwargs: Any) -> Any:
        check_time()
        _check_call(_Named(name), args, kwargs)
        result = func(*args, **kwargs)
        _check_result(result)
        return result

    return bounded


class _Named:
    """Stands for a filter in :func:`_check_call`, which looks callables up by name."""

    def __init__(self, name: str) -> None:
        self.__name__ = "do_replace" if name == "replace" else name


def _check_result(value: Any) -> None:
    if isinstance(value, Sized) and not isinstance(value, dict) and len(value) > MAX_BUILT:
        raise _too_big("a value", len(value))


class BoundedSandbox(ImmutableSandboxedEnvironment):
    """The immutable sandbox, with size and time bounds on every hooked operation."""

    intercepted_binops = frozenset({"*", "**", "+"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.filters = {name: _bounded_filter(name, f) for name, f in self.filters.items()}

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        check_time()
        _check_binop(operator, left, right)
        return super().call_binop(context, operator, left, right)

    def call(
        __self,  # Jinja's signature: these names must not clash with the call's kwargs
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        check_time()
        _check_call(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        _check_result(result)
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        check_time()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        check_time()
        return super().getitem(obj, argument)
