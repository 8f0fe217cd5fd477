"""The trigger function's cold start: no LangGraph, no LangChain (ARCHITECTURE §2)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.subprocess  # each test starts a fresh Python; make test runs them

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
sys.path[:0] = [{root!r}, {shared!r}]  # this tree's code, not the installed one
import functions.trigger.handler as h

class Context:
    function_name = "langorch-trigger"
    memory_limit_in_mb = 256
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:langorch-trigger"
    aws_request_id = "req-1"

event = json.load(open({fixture!r}))
event["headers"]["content-type"] = "text/plain"  # refused with 415 before any AWS call
http = h.handler(event, Context())
ignored = h.handler({{"source": "langorch.schedule"}}, Context())
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("langgraph", "langchain",
    "langchain_core", "langchain_aws", "langchain_openai", "openai"))
print(json.dumps({{"status": http["statusCode"], "ignored": ignored, "heavy": heavy}}))
"""


def test_importing_and_invoking_the_trigger_loads_no_langgraph_or_langchain():
    # Given a fresh interpreter
    fixture = ROOT / "tests" / "fixtures" / "events" / "apigw_v2_webhook.json"
    code = PROBE.format(root=str(ROOT), shared=str(ROOT / "shared"), fixture=str(fixture))

    # When it imports the handler and invokes it with an HTTP request and a schedule event
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"},
        check=True,
    )
    result = json.loads(done.stdout.strip().splitlines()[-1])

    # Then both were handled and no LangGraph or LangChain module was loaded
    assert result["status"] == 415
    assert result["ignored"] == {"ignored": "malformed schedule event"}
    assert result["heavy"] == []
