"""The dashboard and alarms show what the code emits: the same metric names, namespace and
dimension sets, and every emitted metric is shown somewhere.

Emitted side: each handler's metric calls are found in its source (``add_metric``, the trigger's
``_count``, ``observability.unexpected_error``) and replayed through the handler's own
Powertools objects and helpers, so the EMF lines captured are what Lambda would print — with
the dimensions Powertools adds. Shown side: the synthesized dashboard body and alarms.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
from typing import Any

import pytest

from tests.infra.aws_calls import REPO
from tests.infra.conftest import Synth

HANDLERS = ("trigger", "run_segment", "request_approval", "approval_callback")
Series = tuple[str, str, frozenset[str]]  # namespace, metric name, dimension names


def _placeholder_values(node: ast.JoinedStr) -> list[str]:
    # f"ApprovalPages{page.status // 100}xx": the status classes a page can answer.
    assert "ApprovalPages" in ast.unparse(node), ast.unparse(node)
    return ["ApprovalPages2xx", "ApprovalPages4xx", "ApprovalPages5xx"]


def _names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.JoinedStr):
        return _placeholder_values(node)
    if isinstance(node, ast.Subscript | ast.Name):  # _ENDED_METRIC.get(...) and the like
        return []
    raise AssertionError(f"cannot read a metric name from {ast.unparse(node)}")


def _replay(module_name: str) -> int:
    """Emit every metric the handler module emits, through its own objects; returns how many."""
    module = importlib.import_module(f"functions.{module_name}.handler")
    tree = ast.parse((REPO / "functions" / module_name / "handler.py").read_text())
    constants = _dict_values(tree)
    emitted = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "add_metric":
            metrics = getattr(module, ast.unparse(func.value))
            first = (
                node.args[0]
                if node.args
                else next(k.value for k in node.keywords if k.arg == "name")
            )
            names = _names(first) or constants
            for name in names:
                metrics.add_metric(name=name, unit="Count", value=1)
                metrics.flush_metrics()
                emitted += 1
        elif isinstance(func, ast.Name) and func.id in ("_count", "_dollars", "_per_policy"):
            dimensions = {k.arg: "x" for k in node.keywords if k.arg}
            for name in _names(node.args[0]):
                getattr(module, func.id)(name, 1, **dimensions)
                emitted += 1
        elif ast.unparse(func).endswith("unexpected_error"):
            from langorch import observability

            observability.unexpected_error(*(ast.literal_eval(a) for a in node.args))
            emitted += 1
    return emitted


def _dict_values(tree: ast.Module) -> list[str]:
    # Names held in a module-level dict (run_segment's _ENDED_METRIC) and emitted through it.
    found: list[str] = []
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Dict)
            and any("METRIC" in ast.unparse(t) for t in node.targets)
        ):
            found.extend(str(v.value) for v in node.value.values if isinstance(v, ast.Constant))
    return found


@pytest.fixture(scope="module")
def emitted() -> set[Series]:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        counts = {name: _replay(name) for name in HANDLERS}
    assert all(counts.values()), counts  # every handler emits something
    series: set[Series] = set()
    for line in buffer.getvalue().splitlines():
        if '"_aws"' not in line:
            continue
        record = json.loads(line)
        for directive in record["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    series.add((directive["Namespace"], metric["Name"], frozenset(dimensions)))
    return series


_SEARCH = re.compile(r"SEARCH\('\{([^}]*)\} MetricName=\"(\w+)\"'")


def _dashboard(synth: Synth) -> dict[str, Any]:
    (dashboard,) = synth.of_type("AWS::CloudWatch::Dashboard").values()
    body = dashboard["Properties"]["DashboardBody"]
    if isinstance(body, dict):
        body = "".join(p if isinstance(p, str) else "TOKEN" for p in body["Fn::Join"][1])
    return json.loads(body)


def _shown(synth: Synth) -> set[Series]:
    shown: set[Series] = set()
    for widget in _dashboard(synth)["widgets"]:
        for entry in widget.get("properties", {}).get("metrics", []):
            if isinstance(entry[0], dict) and "expression" in entry[0]:
                for schema, name in _SEARCH.findall(entry[0]["expression"]):
                    namespace, *dimensions = [p.strip() for p in schema.split(",")]
                    shown.add((namespace, name, frozenset(dimensions)))
                continue
            namespace, name, *rest = [e for e in entry if not isinstance(e, dict)]
            if namespace == "langorch" or namespace == ".":
                shown.add((namespace, name, frozenset(rest[0::2])))
    return {s for s in shown if s[0] == "langorch"}


def _alarm_metrics(props: dict[str, Any]) -> list[dict[str, Any]]:
    """An alarm's metric: top-level, or (a labelled metric) the MetricStat of ``Metrics``."""
    if "MetricName" in props:
        return [props]
    return [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m]


def _alarmed(synth: Synth) -> set[Series]:
    found = set()
    for alarm in synth.of_type("AWS::CloudWatch::Alarm").values():
        for metric in _alarm_metrics(alarm["Properties"]):
            if metric.get("Namespace") == "langorch":
                dims = frozenset(d["Name"] for d in metric.get("Dimensions", []))
                found.add(("langorch", metric["MetricName"], dims))
    return found


def test_the_replay_sees_the_metrics_the_code_is_known_to_emit(emitted: set[Series]) -> None:
    names = {name for _, name, _ in emitted}
    assert {"RunsStarted", "SegmentDuration", "ApprovalWait", "UnexpectedErrors"} <= names


def test_every_dashboard_metric_and_alarm_is_emitted_as_shown(
    synth: Synth, emitted: set[Series]
) -> None:
    # Given what the dashboard and the alarms ask CloudWatch for in the langorch namespace
    alarmed = _alarmed(synth)
    # (UnexpectedErrors per function: the parser still finds the alarms' metrics)
    assert alarmed == {("langorch", "UnexpectedErrors", frozenset({"service", "function"}))}
    wanted = _shown(synth) | alarmed
    assert len(_shown(synth)) > 10, "the dashboard parser no longer finds the metrics"
    # Then each is a series the code emits: same name, same dimension names
    assert sorted(wanted - emitted, key=str) == []


def test_every_emitted_metric_is_shown_on_the_dashboard(synth: Synth, emitted: set[Series]) -> None:
    assert sorted(emitted - _shown(synth), key=str) == []


def test_only_unexpected_errors_alarm_for_functions_the_state_machine_retries(
    synth: Synth,
) -> None:
    alarms = {
        a["Properties"]["AlarmName"]: a["Properties"]
        for a in synth.of_type("AWS::CloudWatch::Alarm").values()
    }
    for name in ("run-segment", "request-approval"):
        assert not any(n.endswith(f"-Errors-{name}") for n in alarms), name
        props = next(p for n, p in alarms.items() if n.endswith(f"-UnexpectedErrors-{name}"))
        (unexpected,) = _alarm_metrics(props)
        assert unexpected["MetricName"] == "UnexpectedErrors"
        assert {"Name": "function", "Value": name} in unexpected["Dimensions"]


def test_handlers_treat_as_expected_exactly_the_errors_the_state_machine_retries() -> None:
    # The errors a handler does not count as unexpected must be the ones the ASL retries.
    asl = json.loads((REPO / "shared" / "langorch" / "statemachine.asl.json").read_text())
    for state, module in (("RunSegment", "run_segment"), ("AwaitApproval", "request_approval")):
        retried = {e for r in asl["States"][state]["Retry"] for e in r["ErrorEquals"]}
        handler = importlib.import_module(f"functions.{module}.handler")
        assert {cls.__name__ for cls in handler.RETRIED} <= retried, state


def test_cold_start_and_snapstart_restore_durations_are_on_the_dashboard(synth: Synth) -> None:
    queries = [
        w["properties"]["query"] for w in _dashboard(synth)["widgets"] if w.get("type") == "log"
    ]
    cold = next(q for q in queries if "platform.report" in q)
    assert "record.metrics.initDurationMs" in cold
    assert "record.metrics.restoreDurationMs" in cold
    # platform.report is an INFO system event: WARN would drop it before it is logged.
    for fn in synth.of_type("AWS::Lambda::Function").values():
        assert fn["Properties"]["LoggingConfig"]["SystemLogLevel"] == "INFO"
