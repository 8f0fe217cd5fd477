"""HTTP API: webhook, approval and Slack routes, throttling, access logs without query strings."""

from __future__ import annotations

import json

from tests.infra.conftest import Synth
from tests.infra.helpers import ref_target


def test_routes_reach_the_right_functions(synth: Synth) -> None:
    integrations = synth.of_type("AWS::ApiGatewayV2::Integration")
    functions = synth.stack.functions
    targets = {}
    for route in synth.of_type("AWS::ApiGatewayV2::Route").values():
        props = route["Properties"]
        integration_id = props["Target"]["Fn::Join"][1][1]["Ref"]
        uri = integrations[integration_id]["Properties"]["IntegrationUri"]
        targets[props["RouteKey"]] = ref_target(uri)
        assert props.get("AuthorizationType", "NONE") == "NONE"
    trigger = synth.logical_id(functions.trigger)
    callback = synth.logical_id(functions.approval_callback)
    assert targets == {
        "POST /hooks/{workflow_id}": trigger,
        "GET /approvals/{id}": callback,
        "HEAD /approvals/{id}": callback,
        "POST /approvals/{id}": callback,
        "POST /slack/interactions": callback,
    }


def test_stage_is_throttled_and_logs_access_without_query_strings(synth: Synth) -> None:
    stages = synth.of_type("AWS::ApiGatewayV2::Stage")
    assert len(stages) == 1
    stage = next(iter(stages.values()))["Properties"]
    assert stage["StageName"] == "$default"
    assert stage["AutoDeploy"] is True
    assert stage["DefaultRouteSettings"] == {"ThrottlingBurstLimit": 100, "ThrottlingRateLimit": 50}
    log_format = json.loads(stage["AccessLogSettings"]["Format"])
    assert log_format["path"] == "$context.path"
    # An approval link's signature travels in its query string: nothing may log it.
    text = json.dumps(log_format)
    for forbidden in ("querystring", "requestOverride", "$context.authorizer", "header"):
        assert forbidden.lower() not in text.lower()
    group = ref_target(stage["AccessLogSettings"]["DestinationArn"]) or ""
    assert synth.resources[group]["Properties"]["RetentionInDays"] == 30


def test_api_gateway_may_invoke_exactly_the_two_http_functions(synth: Synth) -> None:
    invoked = {
        ref_target(p["Properties"]["FunctionName"])
        for p in synth.of_type("AWS::Lambda::Permission").values()
        if p["Properties"]["Principal"] == "apigateway.amazonaws.com"
    }
    functions = synth.stack.functions
    assert invoked == {
        synth.logical_id(functions.trigger),
        synth.logical_id(functions.approval_callback),
    }
