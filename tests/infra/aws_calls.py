"""Which AWS API calls each Lambda function can make, read from the source (``ast``), not listed.

The chain, all derived from code:

1. ``functions/<name>/handler.py`` imports its use-cases from ``langorch.app``;
2. the use-cases (and the app functions and classes they call) touch the container's
   adapters: ``deps.runs.get_run(...)``, or hand an adapter on whole (``TriggerIndex(
   deps.definitions)``, ``EngineContext(files=deps.files)``);
3. ``langorch.composition.container.Container`` says which class each property builds, with which
   boto3 client (``self.client("dynamodb")``) and which table setting;
4. each adapter method's client calls (``self._client.update_item``, transitively through
   ``self._helper()``) are its AWS operations.

Only what crosses into code we do not own is declared, in ``LIBRARY_CALLS``: LangChain's
Bedrock model and Powertools' secrets provider. An adapter handed on whole to code that is not
ours (the checkpointer to LangGraph, the reader to the engine) counts with every public method.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "shared" / "langorch"

SETUP_METHODS = frozenset({"create_table", "setup", "ensure_resources", "ensure_table"})
"""Create tables and buckets: the local stack and tests only (CDK creates them in AWS)."""

NOT_AWS = frozenset({"get_waiter", "meta", "exceptions", "get_paginator", "close"})

SERVICE_PREFIX = {
    "dynamodb": "dynamodb",
    "s3": "s3",
    "stepfunctions": "states",
    "secretsmanager": "secretsmanager",
    "ses": "ses",
    "bedrock-runtime": "bedrock",
    "scheduler": "scheduler",
    "sts": "sts",
    "lambda": "lambda",
    "sqs": "sqs",
}
SPECIAL_ACTIONS = {
    # S3 authorizes these under other actions' names.
    ("s3", "list_objects_v2"): "s3:ListBucket",
    ("s3", "head_object"): "s3:GetObject",
    ("s3", "delete_objects"): "s3:DeleteObject",
    # The Converse API is authorized as InvokeModel (WithResponseStream when streaming).
    ("bedrock-runtime", "converse"): "bedrock:InvokeModel",
    ("bedrock-runtime", "converse_stream"): "bedrock:InvokeModelWithResponseStream",
    # Lambda's Invoke operation is authorized as InvokeFunction.
    ("lambda", "invoke"): "lambda:InvokeFunction",
}
TRANSACTION_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}

LIBRARY_CALLS: dict[str, set[tuple[str, str]]] = {
    # Container.llm: LLMRegistry -> langchain-aws ChatBedrockConverse.invoke -> Converse.
    "llm": {("bedrock-runtime", "converse")},
}
LIBRARY_CLASSES: dict[str, tuple[str, str]] = {
    # Powertools' SecretsProvider(boto3_client=self._client).get(...) -> GetSecretValue.
    "SecretsProvider": ("secretsmanager", "get_secret_value"),
}
THIRD_PARTY_UNUSED = frozenset({"search_vectors"})
"""The store's vector search runs only with a vector index, and ``build_memory_store`` sets none."""
THIRD_PARTY_STORES = {
    # Container.memory_store: langgraph-checkpoint-aws's DynamoDBStore, its client calls (the
    # table module only creates and describes the table, at setup).
    "memory_store": ("langgraph_checkpoint_aws.store.dynamodb", ("base.py", "search.py")),
}


@dataclass(frozen=True)
class Call:
    """One AWS operation on one table (``table`` is None outside DynamoDB)."""

    service: str
    operation: str
    table: str | None = None
    transaction_kinds: frozenset[str] = frozenset()

    @property
    def actions(self) -> set[str]:
        """The IAM actions the operation needs."""
        if self.operation == "transact_write_items":
            return {TRANSACTION_ACTIONS[k] for k in self.transaction_kinds}
        special = SPECIAL_ACTIONS.get((self.service, self.operation))
        if special:
            return {special}
        name = "".join(part.title() for part in self.operation.split("_"))
        return {f"{SERVICE_PREFIX[self.service]}:{name}"}


@dataclass
class _Class:
    name: str
    module: Path
    node: ast.ClassDef
    methods: dict[str, ast.FunctionDef] = field(default_factory=dict)

    @property
    def is_dataclass(self) -> bool:
        return any("dataclass" in ast.unparse(d) for d in self.node.decorator_list)

    def fields(self) -> list[str]:
        return [
            n.target.id
            for n in self.node.body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        ]

    def init_params(self) -> list[str]:
        init = self.methods.get("__init__")
        if init is None:
            return self.fields() if self.is_dataclass else []
        return [a.arg for a in init.args.args[1:]] + [a.arg for a in init.args.kwonlyargs]

    def method(self, name: str) -> ast.FunctionDef | None:
        """The method, looked up in this class, then its bases (by name, among ours)."""
        if name in self.methods:
            return self.methods[name]
        for base in self.node.bases:
            parent = _classes(PACKAGE).get(ast.unparse(base).split("[")[0])
            found = parent.method(name) if parent else None
            if found is not None:
                return found
        return None

    def public_methods(self) -> list[str]:
        names = [m for m in self.methods if not m.startswith("_")]
        for base in self.node.bases:
            parent = _classes(PACKAGE).get(ast.unparse(base).split("[")[0])
            if parent is not None:
                names.extend(m for m in parent.public_methods() if m not in names)
        return names

    def attribute_of_param(self) -> dict[str, str]:
        """``self.<attr> = <param>`` in ``__init__``: param -> attribute."""
        if "__init__" not in self.methods and self.is_dataclass:
            return {f: f for f in self.fields()}
        found: dict[str, str] = {}
        init = self.methods.get("__init__")
        for node in ast.walk(init) if init else ():
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Name)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Attribute)
                and _is_self(node.targets[0].value)
            ):
                found[node.value.id] = node.targets[0].attr
        return found


def _is_self(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


@cache
def parsed(path: Path) -> ast.Module:
    """The syntax tree of one of our source files, parsed once for every derivation here and in
    ``layer_imports`` (they read the same ~340 files, and each parse costs ~10 ms of CPU).
    The trees are shared: nothing may change them."""
    return ast.parse(path.read_text(encoding="utf-8"))


@cache
def _classes(root: Path) -> dict[str, _Class]:
    found: dict[str, _Class] = {}
    for path in sorted(root.rglob("*.py")):
        for node in parsed(path).body:
            if isinstance(node, ast.ClassDef):
                cls = _Class(node.name, path, node)
                for item in node.body:
                    if isinstance(item, ast.FunctionDef):
                        cls.methods[item.name] = item
                found[node.name] = cls
    return found


@cache
def _functions(root: Path) -> dict[str, ast.FunctionDef]:
    found: dict[str, ast.FunctionDef] = {}
    for path in sorted(root.rglob("*.py")):
        for node in parsed(path).body:
            if isinstance(node, ast.FunctionDef):
                found.setdefault(node.name, node)
    return found


# --- the container: property -> class, client attributes, table, wrapped properties ----------


@dataclass(frozen=True)
class Wiring:
    """What one ``Container`` property builds."""

    prop: str
    class_name: str | None
    clients: dict[str, str]  # attribute the class keeps the client in -> boto3 service
    table: str | None  # the Settings field naming its table
    wraps: dict[str, str]  # constructor parameter -> another container property
    parts: dict[str, tuple[str, Wiring]] = field(default_factory=dict)
    """Helper objects the instance builds in ``__init__`` (``self.table = CheckpointTable(
    client, ...)``): attribute -> (class, its wiring)."""
    assumes_role: bool = False
    """Its client holds a role's credentials (``self.client("s3", role=...)``): the function
    calls ``sts:AssumeRole`` for them."""


def _instance_wiring(
    cls: _Class, services: dict[str, str], parts: dict[str, tuple[str, Wiring]], table: str | None
) -> tuple[dict[str, str], dict[str, tuple[str, Wiring]]]:
    """Client attributes and helper parts of an instance, from what its parameters are."""
    clients: dict[str, str] = {}
    built: dict[str, tuple[str, Wiring]] = {}
    for param, attr in cls.attribute_of_param().items():
        if param in services:
            clients[attr] = services[param]
        elif param in parts:
            built[attr] = parts[param]
    init = cls.methods.get("__init__")
    for node in ast.walk(init) if init else ():
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Attribute)
            and _is_self(node.targets[0].value)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            continue
        inner = _classes(PACKAGE).get(node.value.func.id)
        if inner is None:
            continue
        params = inner.init_params()
        inner_services: dict[str, str] = {}
        inner_parts: dict[str, tuple[str, Wiring]] = {}
        pairs = list(zip(params, node.value.args, strict=False))
        pairs += [(k.arg or "", k.value) for k in node.value.keywords]
        for param, value in pairs:
            name = value.id if isinstance(value, ast.Name) else None
            on_self = isinstance(value, ast.Attribute) and _is_self(value.value)
            attr = value.attr if on_self else None  # type: ignore[attr-defined]
            if name in services:
                inner_services[param] = services[name]
            elif attr in built:
                inner_parts[param] = built[attr]
            elif attr in clients:
                inner_services[param] = clients[attr]
        inner_clients, inner_built = _instance_wiring(inner, inner_services, inner_parts, table)
        built[node.targets[0].attr] = (
            inner.name,
            Wiring("", inner.name, inner_clients, table, {}, inner_built),
        )
    return clients, built


@cache
def container_wiring() -> dict[str, Wiring]:
    """Every ``cached_property`` of ``Container`` and what it builds."""
    tree = parsed(PACKAGE / "composition" / "container.py")
    container = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Container")
    wiring: dict[str, Wiring] = {}
    for prop in container.body:
        if not isinstance(prop, ast.FunctionDef) or not any(
            isinstance(d, ast.Name) and d.id == "cached_property" for d in prop.decorator_list
        ):
            continue
        # What the property returns (its outermost constructor call; of several returns, the
        # one that uses a boto3 client: SesSender, not the local outbox).
        built = [
            n.value
            for n in ast.walk(prop)
            if isinstance(n, ast.Return)
            and isinstance(n.value, ast.Call)
            and isinstance(n.value.func, ast.Name)
            and n.value.func.id[:1].isupper()
        ]
        call = next((c for c in reversed(built) if _uses_client(c)), None)
        call = call or (built[-1] if built else None)
        if call is None:
            wiring[prop.name] = Wiring(prop.name, None, {}, None, {})
            continue
        cls = _classes(PACKAGE).get(call.func.id)  # type: ignore[attr-defined]
        params = cls.init_params() if cls else []
        clients: dict[str, str] = {}
        wraps: dict[str, str] = {}
        table = None
        bound = [(params[i] if i < len(params) else f"#{i}", a) for i, a in enumerate(call.args)]
        bound += [(k.arg or "", k.value) for k in call.keywords]
        for param, value in bound:
            service = _client_service(value)
            if service is not None:
                clients[param] = service
            elif _settings_field(value) and _settings_field(value).endswith("_table"):  # type: ignore[union-attr]
                table = _settings_field(value)
            elif (
                isinstance(value, ast.Attribute)
                and _is_self(value.value)
                and value.attr != "settings"
            ):
                wraps[param] = value.attr
        parts: dict[str, tuple[str, Wiring]] = {}
        if cls is not None:
            clients, parts = _instance_wiring(cls, clients, {}, table)
        assumes = any(
            _client_service(a) and any(k.arg == "role" for k in a.keywords)  # type: ignore[attr-defined]
            for a in [*call.args, *(k.value for k in call.keywords)]
        )
        wiring[prop.name] = Wiring(
            prop.name,
            call.func.id,  # type: ignore[attr-defined]
            clients,
            table,
            wraps,
            parts,
            assumes,
        )
    # Plain properties that return another one (``executions`` is ``stepfunctions``).
    for prop in container.body:
        if (
            isinstance(prop, ast.FunctionDef)
            and any(ast.unparse(d) == "property" for d in prop.decorator_list)
            and isinstance(prop.body[-1], ast.Return)
            and isinstance(prop.body[-1].value, ast.Attribute)
            and _is_self(prop.body[-1].value.value)
            and prop.body[-1].value.attr in wiring
        ):
            target = wiring[prop.body[-1].value.attr]
            wiring[prop.name] = Wiring(
                prop.name,
                target.class_name,
                target.clients,
                target.table,
                target.wraps,
                target.parts,
            )
    return wiring


def _uses_client(call: ast.Call) -> bool:
    return any(_client_service(a) for a in [*call.args, *(k.value for k in call.keywords)])


def _client_service(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "client"
        and _is_self(node.func.value)
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ):
        return str(node.args[0].value)
    return None


def _settings_field(node: ast.AST) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "settings"
        and _is_self(node.value.value)
    ):
        return node.attr
    return None


# --- adapters: method -> client operations ------------------------------------------------


def adapter_calls(prop: str, method: str) -> set[Call]:
    """The AWS operations of ``Container.<prop>.<method>()`` (``"*"``: every public method)."""
    wiring = container_wiring()[prop]
    if prop in LIBRARY_CALLS:
        return {Call(s, op) for s, op in LIBRARY_CALLS[prop]}
    if prop in THIRD_PARTY_STORES:
        return _third_party_calls(prop, wiring)
    cls = _classes(PACKAGE).get(wiring.class_name or "")
    if cls is None:
        return set()
    methods = _public(cls) if method == "*" else [method]
    calls: set[Call] = {Call("sts", "assume_role")} if wiring.assumes_role else set()
    for name in methods:
        calls |= _method_calls(cls, name, wiring, frozenset())
    return calls


def _public(cls: _Class) -> list[str]:
    return [m for m in cls.public_methods() if m not in SETUP_METHODS]


def _method_calls(cls: _Class, name: str, wiring: Wiring, seen: frozenset[str]) -> set[Call]:
    method = cls.method(name)
    if method is None or name in seen:
        return set()
    seen = seen | {name}
    kinds = _transaction_kinds(cls.module)
    calls: set[Call] = set()
    for node in ast.walk(method):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute):
            holder = node.value
            if _is_self(holder.value) and holder.attr in wiring.clients:
                service = wiring.clients[holder.attr]
                if node.attr not in NOT_AWS:
                    table = wiring.table if service == "dynamodb" else None
                    calls.add(Call(service, node.attr, table, kinds))
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and _is_self(func.value):
                calls |= _method_calls(cls, func.attr, wiring, seen)  # self._helper(...)
                calls |= _dispatched(cls, func.attr, node, wiring, kinds)
            if (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Attribute)
                and _is_self(func.value.value)
                and func.value.attr in wiring.parts
            ):
                # self.table.query_group(...): the helper object's method, with its clients.
                part_name, part_wiring = wiring.parts[func.value.attr]
                part = _classes(PACKAGE)[part_name]
                calls |= _method_calls(part, func.attr, part_wiring, frozenset())
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "get_paginator"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                (service,) = set(wiring.clients.values())
                calls.add(Call(service, str(node.args[0].value), wiring.table))
            if isinstance(func, ast.Name) and func.id in LIBRARY_CLASSES:
                calls.add(Call(*LIBRARY_CLASSES[func.id]))
        # Passed as a callable: self._call("S3 PutObject", self.s3_client.put_object, ...)
    return calls


def _dispatched(
    cls: _Class, name: str, call: ast.Call, wiring: Wiring, kinds: frozenset[str]
) -> set[Call]:
    """``self._paginate("scan", ...)`` where the helper does ``getattr(self._client, op)``."""
    helper = cls.methods.get(name)
    if helper is None:
        return set()
    params = [a.arg for a in helper.args.args[1:]]
    found: set[Call] = set()
    for node in ast.walk(helper):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and isinstance(node.args[0], ast.Attribute)
            and _is_self(node.args[0].value)
            and node.args[0].attr in wiring.clients
            and isinstance(node.args[1], ast.Name)
            and node.args[1].id in params
        ):
            index = params.index(node.args[1].id)
            if index < len(call.args) and isinstance(call.args[index], ast.Constant):
                service = wiring.clients[node.args[0].attr]
                table = wiring.table if service == "dynamodb" else None
                found.add(Call(service, str(call.args[index].value), table, kinds))
    return found


@cache
def _transaction_kinds(module: Path) -> frozenset[str]:
    kinds = set()
    for node in ast.walk(parsed(module)):
        if isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in TRANSACTION_ACTIONS:
                    kinds.add(str(key.value))
    return frozenset(kinds)


def _third_party_calls(prop: str, wiring: Wiring) -> set[Call]:
    import importlib

    package, files = THIRD_PARTY_STORES[prop]
    root = Path(importlib.import_module(package).__file__ or "").parent
    table = container_wiring()[prop].table or _memory_table()
    calls: set[Call] = set()
    for name in files:
        for node in ast.walk(ast.parse((root / name).read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Attribute)
                and node.func.value.attr == "client"
                and node.func.attr not in NOT_AWS
                and _is_operation("dynamodb", node.func.attr)
                and node.func.attr not in THIRD_PARTY_UNUSED
            ):
                calls.add(Call("dynamodb", node.func.attr, table))
    return calls


@cache
def _operations(service: str) -> frozenset[str]:
    import botocore.session

    model = botocore.session.get_session().get_service_model(service)
    return frozenset(model.operation_names)


def _is_operation(service: str, operation: str) -> bool:
    return "".join(p.title() for p in operation.split("_")) in _operations(service)


def _memory_table() -> str:
    # build_memory_store(self.client("dynamodb"), self.settings.memory_table): a function.
    source = (PACKAGE / "composition" / "container.py").read_text(encoding="utf-8")
    match = re.search(r"build_memory_store\(.*?self\.settings\.(\w+)\)", source)
    assert match, "Container.memory_store no longer calls build_memory_store(client, table)"
    return match.group(1)


# --- use-cases: what the handler's code touches in the container ---------------------------

_Binding = str  # "C" (the container) or a container property name
_FOLLOWED = ("app", "engine")
"""Our code the walker follows adapters into (anything else gets them whole)."""


@cache
def _code_functions() -> dict[str, list[tuple[Path, ast.FunctionDef]]]:
    """Module-level functions of the followed packages by name (a name may recur)."""
    found: dict[str, list[tuple[Path, ast.FunctionDef]]] = {}
    for folder in _FOLLOWED:
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            for node in _module_tree(path).body:
                if isinstance(node, ast.FunctionDef):
                    found.setdefault(node.name, []).append((path, node))
    return found


def _resolve(name: str, caller: ast.FunctionDef) -> ast.FunctionDef | None:
    """The function ``name`` means where ``caller`` is: its own module's, else the one
    defined under that name (ambiguous names resolve to nothing rather than a wrong one)."""
    candidates = _code_functions().get(name, [])
    for path, node in candidates:
        if any(n is caller for n in ast.walk(_module_tree(path))):
            return node
    if len(candidates) == 1:
        return candidates[0][1]
    imported = [node for path, node in candidates if _imports(caller, path.stem)]
    return imported[0] if len(imported) == 1 else None


@cache
def _module_tree(path: Path) -> ast.Module:
    return parsed(path)


def _imports(caller: ast.FunctionDef, module_stem: str) -> bool:
    for path, _ in [(p, n) for ns in _code_functions().values() for p, n in ns]:
        tree = _module_tree(path)
        if any(n is caller for n in ast.walk(tree)):
            return any(
                isinstance(i, ast.ImportFrom) and (i.module or "").endswith("." + module_stem)
                for i in ast.walk(tree)
            )
    return False


@cache
def _code_classes() -> dict[str, _Class]:
    found: dict[str, _Class] = {}
    for folder in _FOLLOWED:
        for name, cls in _classes(PACKAGE / folder).items():
            found.setdefault(name, cls)
    return found


def handler_uses(handler: Path) -> set[tuple[str, str]]:
    """``(container property, method or "*")`` the handler can reach through ``langorch.app``."""
    tree = parsed(handler)
    roots: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langorch.app"):
            roots.extend(alias.name for alias in node.names)
    walker = _Walker()
    # The handler's own uses of its container: ``container().approvals.get(...)``.
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and isinstance(node.value.value, ast.Call)
            and isinstance(node.value.value.func, ast.Name)
            and node.value.value.func.id in ("container", "_deps")
            and node.value.attr in container_wiring()
        ):
            walker.uses.add((node.value.attr, node.attr))
    for name in roots:
        app = [n for p, n in _code_functions().get(name, []) if "/app/" in str(p)]
        function = app[0] if len(app) == 1 else None
        if function is not None:
            walker.function(function, {a.arg: "C" for a in _args(function) if _is_deps(a)})
    return walker.uses


def _args(function: ast.FunctionDef) -> list[ast.arg]:
    return [*function.args.posonlyargs, *function.args.args, *function.args.kwonlyargs]


def _is_deps(arg: ast.arg) -> bool:
    annotation = ast.unparse(arg.annotation).strip("'\"") if arg.annotation else ""
    # The container, or a port Protocol it satisfies (RequestPorts, PagePorts, ...).
    return (
        annotation == "Container"
        or annotation.endswith("Ports")
        or arg.arg in ("deps", "container", "ports")
    )


class _Walker:
    def __init__(self) -> None:
        self.uses: set[tuple[str, str]] = set()
        self._seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()

    def function(self, function: ast.FunctionDef, env: dict[str, _Binding]) -> None:
        key = (f"{function.name}:{function.lineno}", tuple(sorted(env.items())))
        if key in self._seen or not env:
            return
        self._seen.add(key)
        unpacked: set[int] = set()
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, bound = node.targets[0], self._binding(node.value, env)
                if isinstance(target, ast.Name) and bound and bound != "C":
                    env[target.id] = bound
                # store, now = ports.approvals, ports.clock()
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for name, value in zip(target.elts, node.value.elts, strict=False):
                        bound = self._binding(value, env)
                        if isinstance(name, ast.Name) and bound and bound != "C":
                            env[name.id] = bound
                            unpacked.add(id(value))
        self._body(function, env, unpacked)

    def _binding(self, node: ast.AST, env: dict[str, _Binding]) -> _Binding | None:
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "cast"
            and len(node.args) == 2
            and self._binding(node.args[1], env) == "C"
        ):
            return "C"  # cast("Container", deps)
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Call)
            and self._binding(node.value, env) == "C"
            and node.attr in container_wiring()
        ):
            return node.attr
        if isinstance(node, ast.Attribute) and _is_self(node.value):
            return env.get(f"self.{node.attr}")
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and env.get(node.value.id) == "C"
            and node.attr in container_wiring()
        ):
            return node.attr
        return None

    def _body(
        self, function: ast.FunctionDef, env: dict[str, _Binding], unpacked: set[int]
    ) -> None:
        handled: set[int] = set(unpacked)
        for node in ast.walk(function):
            if isinstance(node, ast.Attribute):
                bound = self._binding(node.value, env)
                if bound and bound != "C":
                    self.uses.add((bound, node.attr))
                    handled.add(id(node.value))
            if isinstance(node, ast.Call):
                handled |= self._call(node, env, function)
        for parent in ast.walk(function):
            for node in _handed_on(parent):
                bound = self._binding(node, env)
                if bound and bound != "C" and id(node) not in handled:
                    self.uses.add((bound, "*"))  # handed on whole to code not followed

    def _call(self, call: ast.Call, env: dict[str, _Binding], caller: ast.FunctionDef) -> set[int]:
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name is None:
            return set()
        function = _resolve(name, caller)
        cls = _code_classes().get(name)
        if cls is not None and cls.is_dataclass:
            return set()  # a data holder (EngineContext): what it holds is handed on whole
        params = (
            [a.arg for a in _args(function)] if function else (cls.init_params() if cls else [])
        )
        if not params:
            return set()
        bindings: dict[str, _Binding] = {}
        consumed: set[int] = set()
        pairs = list(zip(params, call.args, strict=False))
        pairs += [(k.arg or "", k.value) for k in call.keywords]
        for param, value in pairs:
            bound = self._binding(value, env)
            if bound:
                bindings[param] = bound
                consumed.add(id(value))
        if function is not None:
            self.function(function, bindings)
        elif cls is not None:
            self._instance(cls, bindings)
        return consumed

    def instance(self, cls: _Class, bindings: dict[str, _Binding]) -> None:
        """``self.<attr> = <param>`` in ``__init__``, then every method uses ``self.<attr>``."""
        env = {
            f"self.{a}": bindings[p] for p, a in cls.attribute_of_param().items() if p in bindings
        }
        for name, method in cls.methods.items():
            if name != "__init__":
                self.function(method, dict(env))

    _instance = instance


def _handed_on(parent: ast.AST) -> list[ast.AST]:
    """Expressions ``parent`` passes on: call arguments, keyword, container and returned
    values (a test such as ``x is None`` hands nothing on)."""
    if isinstance(parent, ast.Call):
        return list(parent.args)
    if isinstance(parent, ast.keyword | ast.Return | ast.Starred):
        return [parent.value] if parent.value is not None else []
    if isinstance(parent, ast.IfExp):
        return [parent.body, parent.orelse]
    if isinstance(parent, ast.Tuple | ast.List) and isinstance(parent.ctx, ast.Load):
        return list(parent.elts)
    if isinstance(parent, ast.Set):
        return list(parent.elts)
    if isinstance(parent, ast.Dict):
        return list(parent.values)
    return []


def wrapped_uses(uses: Iterable[tuple[str, str]]) -> set[tuple[str, str]]:
    """Expand container properties that wrap others (the compiler wraps definitions and the
    checkpointer, memory wraps the store): what the wrapper's methods do to them."""
    result: set[tuple[str, str]] = set()
    pending = list(uses)
    while pending:
        prop, method = pending.pop()
        if (prop, method) in result:
            continue
        result.add((prop, method))
        wiring = container_wiring().get(prop)
        if wiring is None or not wiring.wraps:
            continue
        cls = _classes(PACKAGE).get(wiring.class_name or "")
        assert cls is not None, wiring
        walker = _Walker()
        props = {p: t for p, t in wiring.wraps.items() if t in container_wiring()}
        walker.instance(cls, props)
        pending.extend(walker.uses)
        for target in set(wiring.wraps.values()) - set(props.values()):
            pending.extend(_targets(target, "*"))
    return result


def _targets(target: str, method: str) -> list[tuple[str, str]]:
    """A wrapped dependency: a container property, or a container method (``_openai_key``)
    whose ``self.<prop>.<method>`` uses count instead."""
    if target in container_wiring():
        return [(target, method)]
    tree = parsed(PACKAGE / "composition" / "container.py")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == target:
            for inner in ast.walk(node):
                if (
                    isinstance(inner, ast.Attribute)
                    and isinstance(inner.value, ast.Attribute)
                    and _is_self(inner.value.value)
                    and inner.value.attr in container_wiring()
                ):
                    found.append((inner.value.attr, inner.attr))
    return found


def function_calls(handler: Path) -> set[Call]:
    """Every AWS operation a handler can make through the container."""
    calls: set[Call] = set()
    for prop, method in wrapped_uses(handler_uses(handler)):
        if prop in container_wiring():
            calls |= adapter_calls(prop, method)
    return calls
