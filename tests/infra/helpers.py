"""Reading IAM statements and token references out of a synthesized template."""

from __future__ import annotations

from typing import Any


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def ref_target(value: Any) -> str | None:
    """The logical id a ``Ref`` or ``Fn::GetAtt`` points at (else ``None``)."""
    if isinstance(value, dict):
        if "Ref" in value:
            return str(value["Ref"])
        if "Fn::GetAtt" in value:
            return str(value["Fn::GetAtt"][0])
    return None


def render(value: Any) -> str:
    """A readable string for a resource ARN: tokens become ``<LogicalId.Attr>``."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Ref" in value:
            return f"<{value['Ref']}>"
        if "Fn::GetAtt" in value:
            return f"<{value['Fn::GetAtt'][0]}.{value['Fn::GetAtt'][1]}>"
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(render(p) for p in parts)
    return repr(value)


def role_statements(resources: dict[str, Any], role_id: str) -> list[dict[str, Any]]:
    """Every statement of the policies attached to a role (inline and AWS::IAM::Policy)."""
    statements: list[dict[str, Any]] = []
    role = resources[role_id]
    for policy in role["Properties"].get("Policies", []):
        statements.extend(policy["PolicyDocument"]["Statement"])
    for resource in resources.values():
        if resource["Type"] != "AWS::IAM::Policy":
            continue
        if any(ref_target(r) == role_id for r in resource["Properties"].get("Roles", [])):
            statements.extend(resource["Properties"]["PolicyDocument"]["Statement"])
    return statements


def function_role(resources: dict[str, Any], function_id: str) -> str:
    role = ref_target(resources[function_id]["Properties"]["Role"])
    assert role is not None
    return role


def actions_on(statements: list[dict[str, Any]]) -> dict[str, set[str]]:
    """Action -> the rendered resources it is allowed on (``Deny`` statements: see
    :func:`denials`)."""
    allowed: dict[str, set[str]] = {}
    for statement in statements:
        assert statement["Effect"] in ("Allow", "Deny")
        if statement["Effect"] == "Deny":
            continue
        for action in as_list(statement["Action"]):
            allowed.setdefault(action, set()).update(
                render(r) for r in as_list(statement["Resource"])
            )
    return allowed


def denials(statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``Deny`` statements, actions as a sorted list."""
    return [
        {**s, "Action": sorted(as_list(s["Action"]))} for s in statements if s["Effect"] == "Deny"
    ]
