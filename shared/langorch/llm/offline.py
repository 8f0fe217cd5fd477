"""The offline provider: deterministic answers, no network, no keys.

Every example runs with it (ARCHITECTURE §3). Without a script it fills each output key with a
value of the declared type derived from the block (or step), the key and the call index, and
picks the first label of a decision. A script gives answers per block or step::

    check_previous_order:            # a step id or a block id (the step id wins)
      - {branch: no_preference}      # call_index 0
      - {branch: has_preference}     # call_index 1 and later (the last answer repeats)
    write_draft: {title: "Hello", body: "..."}          # the same answer on every call
    flaky_block: {raise: "Service unavailable", times: 2}
      # attempts 1..times raise a retryable LLMError, later attempts answer with "then"
      # (or the default answer); without "times" every attempt raises.
      # "retryable: false" makes the failure permanent.
    look_up_order:                  # scripted tool calls, made in order before answering
      tool_calls:
        - {tool: calculator, args: {expression: "2*21"}, result_key: total}
        - {tool: lookup_order, args: {order_id: "A1"}}   # a registered MCP tool
      status: found                 # the answer's other keys, as usual
      # result_key: the output key that takes the call's result (text as the tool answered).
      # Calls go through the step's toolbox: bounded, recorded, on the timeline; a tool the
      # step does not bind fails the step (UnboundToolError).

Keys a scripted answer leaves out are filled as without a script; keys the request does not ask
for are dropped (and logged, since they are usually typos). Script entries that name no block
or step are ignored.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langorch.domain.errors import DefinitionError, Problem
from langorch.llm.base import BRANCH_KEY, LLMCallError, LLMRequest, LLMResult

logger = logging.getLogger(__name__)

OFFLINE_MODEL = "offline"
"""Model name reported when the request names none."""

_FAILURE_KEYS = frozenset({"raise", "times", "then", "retryable"})
TOOL_CALLS_KEY = "tool_calls"
_TOOL_CALL_KEYS = frozenset({"tool", "args", "result_key"})


class OfflineScriptError(DefinitionError):
    """The offline script cannot be read or is not shaped as documented in this module."""


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call the offline model makes before it answers."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)
    result_key: str | None = None
    """The output key that takes the call's result."""


@dataclass(frozen=True)
class ScriptedAnswer:
    """One scripted answer: (partial) outputs, or a failure for the first attempts."""

    outputs: dict[str, Any] = field(default_factory=dict)
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    raise_message: str | None = None
    times: int | None = None
    """Attempts 1..times raise; ``None`` means every attempt raises."""
    retryable: bool = True


Script = dict[str, list[ScriptedAnswer]]
"""Block or step id -> answers by call index (the last one repeats)."""


def parse_script(data: Any, *, source: str = "<dict>") -> Script:
    """Check the shape of a script and turn it into :data:`Script`.

    Args:
        data: The parsed JSON or YAML document (``None`` for an empty file).
        source: Where it came from, for error messages.

    Returns:
        The answers per block or step id.

    Raises:
        OfflineScriptError: Listing every problem found, each with its path.
    """
    problems: list[Problem] = []
    script: Script = {}
    if data is None:
        return script
    if not isinstance(data, dict):
        raise OfflineScriptError(
            f"offline script {source}",
            [
                Problem(
                    "",
                    f"must be a mapping of block or step id to answers, not a "
                    f"{type(data).__name__}",
                )
            ],
        )
    for name, entry in data.items():
        if not isinstance(name, str):
            problems.append(Problem(repr(name), "keys must be block or step ids (strings)"))
            continue
        if isinstance(entry, dict):
            answers = [_parse_answer(entry, name, problems)]
        elif isinstance(entry, list):
            if not entry:
                problems.append(Problem(name, "an empty list has no answer to give"))
                continue
            answers = [
                _parse_answer(item, f"{name}[{i}]", problems) for i, item in enumerate(entry)
            ]
        else:
            problems.append(
                Problem(
                    name,
                    f"must be an answer (mapping) or a list of answers, not a "
                    f"{type(entry).__name__}",
                )
            )
            continue
        script[name] = answers
    if problems:
        raise OfflineScriptError(f"offline script {source}", problems)
    return script


def _parse_answer(item: Any, path: str, problems: list[Problem]) -> ScriptedAnswer:
    if not isinstance(item, dict):
        problems.append(
            Problem(path, f"must be a mapping of output keys, not a {type(item).__name__}")
        )
        return ScriptedAnswer()
    bad_keys = [k for k in item if not isinstance(k, str)]
    if bad_keys:
        problems.append(Problem(path, f"output keys must be strings: {bad_keys!r}"))
        return ScriptedAnswer()
    if "raise" not in item:
        outputs = dict(item)
        calls = _parse_tool_calls(
            outputs.pop(TOOL_CALLS_KEY, []), f"{path}.{TOOL_CALLS_KEY}", problems
        )
        return ScriptedAnswer(outputs=outputs, tool_calls=calls)

    message = item["raise"]
    if not isinstance(message, str) or not message:
        problems.append(Problem(f"{path}.raise", "must be the error message (a non-empty string)"))
    times = item.get("times")
    if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
        problems.append(Problem(f"{path}.times", f"must be a whole number >= 1, not {times!r}"))
    retryable = item.get("retryable", True)
    if not isinstance(retryable, bool):
        problems.append(Problem(f"{path}.retryable", f"must be true or false, not {retryable!r}"))
    then = item.get("then", {})
    if not isinstance(then, dict):
        problems.append(Problem(f"{path}.then", "must be a mapping of output keys"))
        then = {}
    for extra in sorted(set(item) - _FAILURE_KEYS):
        problems.append(
            Problem(
                f"{path}.{extra}",
                "unexpected beside 'raise'",
                hint="put the answer given after the failures under 'then'",
            )
        )
    return ScriptedAnswer(
        outputs=dict(then),
        raise_message=str(message),
        times=times if isinstance(times, int) else None,
        retryable=bool(retryable),
    )


def _parse_tool_calls(
    data: Any, path: str, problems: list[Problem]
) -> tuple[ScriptedToolCall, ...]:
    if not isinstance(data, list):
        problems.append(Problem(path, "must be a list of {tool, args, result_key} mappings"))
        return ()
    calls: list[ScriptedToolCall] = []
    for index, item in enumerate(data):
        where = f"{path}[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("tool"), str):
            problems.append(Problem(where, "must be a mapping with a 'tool' name"))
            continue
        for extra in sorted(set(item) - _TOOL_CALL_KEYS):
            problems.append(Problem(f"{where}.{extra}", "unexpected; use tool, args, result_key"))
        args = item.get("args", {})
        if not isinstance(args, dict):
            problems.append(Problem(f"{where}.args", "must be a mapping of argument values"))
            args = {}
        result_key = item.get("result_key")
        if result_key is not None and not isinstance(result_key, str):
            problems.append(Problem(f"{where}.result_key", "must be an output key (a string)"))
            result_key = None
        calls.append(ScriptedToolCall(item["tool"], dict(args), result_key))
    return tuple(calls)


def load_script(path: str | Path) -> Script:
    """Read and check a script file (``.json``; anything else is read as YAML).

    Args:
        path: The file.

    Returns:
        The answers per block or step id.

    Raises:
        OfflineScriptError: The file is missing, does not parse, or is badly shaped.
    """
    file = Path(path)
    subject = f"offline script {file}"
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise OfflineScriptError(subject, [Problem("", f"cannot be read: {exc.strerror}")]) from exc
    import yaml  # only for a script file: the runner's path loads no YAML

    try:
        data = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise OfflineScriptError(subject, [Problem("", f"does not parse: {exc}")]) from exc
    return parse_script(data, source=str(file))


def default_value(kind: str, key: str, subject: str, call_index: int) -> Any:
    """The deterministic value the offline provider gives ``key`` when nothing is scripted.

    Args:
        kind: The key's JSON type.
        key: The output key.
        subject: The block id, else the step id.
        call_index: How many times the step ran before in this run.

    Returns:
        ``"<key> from <subject>"`` (with ``(call N)`` from the second call on) for strings, the
        call index for numbers, ``True``, ``[]`` or ``{}``.
    """
    if kind in {"integer", "number"}:
        return call_index
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    text = f"{key} from {subject}"
    return text if call_index == 0 else f"{text} (call {call_index + 1})"


def estimate_tokens(text: str) -> int:
    """A deterministic token estimate: about four characters per token, at least one."""
    return max(1, math.ceil(len(text) / 4))


class OfflineProvider:
    """Deterministic answers from a script or from the request itself.

    Args:
        script: A script file, an already parsed script document, or ``None``. A file is
            read now (so a bad script fails at start-up) and read again whenever it changes,
            so ``langorch dev`` picks up edits without a restart.
    """

    name = "offline"

    def __init__(self, script: str | Path | dict[str, Any] | None = None) -> None:
        self._path: Path | None = None
        self._mtime_ns: int | None = None
        self._script: Script = {}
        if isinstance(script, dict):
            self._script = parse_script(script)
        elif script is not None:
            self._path = Path(script)
            self._reload_if_changed()

    def prepare(self, seconds: float | None = None) -> None:
        """Nothing to load: the script was read when the provider was built."""

    async def ainvoke(self, request: LLMRequest) -> LLMResult:
        """:meth:`invoke`, after making the scripted tool calls through the request's toolbox.

        Raises:
            UnboundToolError: A scripted call names a tool the step does not bind.
        """
        self._reload_if_changed()
        answer = self._answer(request)
        results: dict[str, Any] = {}
        if answer is not None and answer.tool_calls:
            toolbox = request.toolbox
            if toolbox is None:
                raise LLMCallError(
                    f"offline script: step {request.step_id!r} scripts tool calls but has no "
                    "tools bound; list them in the block's tools_required"
                )
            for call in answer.tool_calls:
                output = await toolbox.call(call.tool, call.args)
                if call.result_key is not None:
                    results[call.result_key] = output
                if toolbox.exhausted:
                    break
        return self._result(request, answer, results)

    def invoke(self, request: LLMRequest) -> LLMResult:
        """Answer deterministically; scripted tool calls are not made (see :meth:`ainvoke`).

        Raises:
            LLMCallError: The script says this attempt fails.
            OfflineScriptError: The script file changed and is now invalid.
        """
        self._reload_if_changed()
        return self._result(request, self._answer(request), {})

    def _result(
        self, request: LLMRequest, answer: ScriptedAnswer | None, results: dict[str, Any]
    ) -> LLMResult:
        scripted = {**self._outputs(request, answer), **results}
        outputs: dict[str, Any] = {}
        for key in request.answer_keys():
            if key in scripted:
                outputs[key] = scripted[key]
            elif key == BRANCH_KEY and request.choices is not None:
                outputs[key] = request.choices[0] if request.choices else ""
            else:
                outputs[key] = default_value(
                    request.type_of(key), key, request.subject, request.call_index
                )
        unused = sorted(set(scripted) - set(outputs))
        if unused:
            logger.warning(
                "offline script answer for step %s has keys the step does not ask for: %s",
                request.step_id,
                ", ".join(unused),
            )
        return LLMResult(
            outputs=outputs,
            provider=self.name,
            model=request.model or OFFLINE_MODEL,
            input_tokens=estimate_tokens(request.system_prompt + request.prompt),
            output_tokens=estimate_tokens(json.dumps(outputs, sort_keys=True, default=str)),
        )

    def _answer(self, request: LLMRequest) -> ScriptedAnswer | None:
        answers = self._script.get(request.step_id)
        if answers is None and request.block_id is not None:
            answers = self._script.get(request.block_id)
        if not answers:
            return None
        return answers[min(request.call_index, len(answers) - 1)]

    def _outputs(self, request: LLMRequest, answer: ScriptedAnswer | None) -> dict[str, Any]:
        if answer is None:
            return {}
        if answer.raise_message is not None and (
            answer.times is None or request.attempt <= answer.times
        ):
            raise LLMCallError(
                f"offline script: {answer.raise_message} (step {request.step_id!r}, "
                f"attempt {request.attempt})",
                retryable=answer.retryable,
                # As a provider bills a refused answer: the prompt was read.
                input_tokens=estimate_tokens(request.system_prompt + request.prompt),
            )
        return answer.outputs

    def _reload_if_changed(self) -> None:
        if self._path is None:
            return
        try:
            mtime_ns = self._path.stat().st_mtime_ns
        except OSError:
            mtime_ns = None  # load_script reports the missing file with its path
        if mtime_ns is not None and mtime_ns == self._mtime_ns:
            return
        self._script = load_script(self._path)
        self._mtime_ns = mtime_ns
