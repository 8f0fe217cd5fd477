"""API Gateway's two proxy event shapes, answered alike.

The HTTP API sends the 2.0 payload format; the REST API of the ``waf`` option (infra/constructs/
edge.py) sends the 1.0 format. The handlers keep one route table on Powertools'
``APIGatewayHttpResolver``: a 1.0 request is rewritten into the 2.0 shape before it is resolved,
and the 2.0 answer back into the 1.0 shape. Written here rather than running a second resolver
(``APIGatewayRestResolver``) per handler: that would register every route twice and make each
route read its method and source IP from a shape-specific event class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

Answer = Callable[[dict[str, Any], Any], dict[str, Any]]
"""A resolver's ``resolve(event, context)``: a 2.0 event in, a 2.0 response out."""


def is_rest_event(event: Mapping[str, Any]) -> bool:
    """Whether ``event`` is a REST API (payload format 1.0) proxy request."""
    context = event.get("requestContext")
    return isinstance(context, Mapping) and "http" not in context and "httpMethod" in event


def answer_either(resolve: Answer, event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Resolve a 2.0 request as is, a 1.0 request through the 2.0 shape and back.

    Args:
        resolve: the handler's ``APIGatewayHttpResolver.resolve``.
        event: the proxy request, either format.
        context: the Lambda context.

    Returns:
        The response in the request's own format.
    """
    if not is_rest_event(event):
        return resolve(event, context)
    return rest_response(resolve(http_api_event(event), context))


def _values(
    single: Mapping[str, Any] | None, multi: Mapping[str, Any] | None
) -> dict[str, list[str]]:
    if multi:
        return {name: [str(v) for v in values] for name, values in multi.items()}
    return {name: [str(value)] for name, value in (single or {}).items()}


def http_api_event(event: Mapping[str, Any]) -> dict[str, Any]:
    """A 1.0 proxy request in the 2.0 shape, as an HTTP API would have sent it.

    As the 2.0 format does: header names are lowercased and repeated values joined with
    commas, the ``Cookie`` header becomes ``cookies``, repeated query parameters are joined
    with commas (``rawQueryString`` keeps them apart), and the stage leads the raw path as on
    an HTTP API's named stage.
    """
    method = str(event["httpMethod"])
    context: Mapping[str, Any] = event.get("requestContext") or {}
    identity: Mapping[str, Any] = context.get("identity") or {}
    headers: dict[str, str] = {}
    for name, values in _values(event.get("headers"), event.get("multiValueHeaders")).items():
        key = name.lower()
        headers[key] = ",".join([*([headers[key]] if key in headers else []), *values])
    cookie = headers.pop("cookie", None)
    query = _values(
        event.get("queryStringParameters"), event.get("multiValueQueryStringParameters")
    )
    # `path` is the resource path (no stage) on the execute-api URL and a custom domain alike;
    # an HTTP API's named stage leads its raw path, which Powertools strips again.
    stage = str(context.get("stage") or "$default")
    path = str(event.get("path") or "/")
    if stage != "$default":
        path = f"/{stage}{path}"
    route_key = f"{method} {event.get('resource') or path}"
    converted: dict[str, Any] = {
        "version": "2.0",
        "routeKey": route_key,
        "rawPath": path,
        "rawQueryString": urlencode([(k, v) for k, vs in query.items() for v in vs]),
        "headers": headers,
        "requestContext": {
            "accountId": context.get("accountId"),
            "apiId": context.get("apiId"),
            "domainName": context.get("domainName"),
            "domainPrefix": context.get("domainPrefix"),
            "http": {
                "method": method,
                "path": path,
                "protocol": context.get("protocol", "HTTP/1.1"),
                "sourceIp": identity.get("sourceIp"),
                "userAgent": identity.get("userAgent") or headers.get("user-agent", ""),
            },
            "requestId": context.get("requestId"),
            "routeKey": route_key,
            "stage": stage,
            "time": context.get("requestTime"),
            "timeEpoch": context.get("requestTimeEpoch"),
        },
        "isBase64Encoded": bool(event.get("isBase64Encoded")),
    }
    if cookie:
        converted["cookies"] = [c.strip() for c in cookie.split(";") if c.strip()]
    if query:
        converted["queryStringParameters"] = {k: ",".join(vs) for k, vs in query.items()}
    for key in ("pathParameters", "stageVariables", "body"):
        if event.get(key) is not None:
            converted[key] = event[key]
    return converted


def rest_response(response: Mapping[str, Any]) -> dict[str, Any]:
    """A 2.0 proxy response in the 1.0 shape: ``cookies`` become ``Set-Cookie`` headers (1.0
    has no ``cookies`` field); status, headers and body are unchanged."""
    answer = {key: value for key, value in response.items() if key != "cookies"}
    cookies = list(response.get("cookies") or [])
    if cookies:
        answer["multiValueHeaders"] = {"Set-Cookie": cookies}
    return answer
