"""Built-in workflow templates: a definition file to start from (``langorch workflows new``).

Each lives in ``langorch/builtins/templates/<name>.yaml``, packaged with langorch: a commented
file of blocks and one workflow, valid as it is and running offline, that the user edits and
then ``workflows put``s. ``__ID__`` in a template is the workflow's id (its blocks' ids start
with it), so two workflows made from one template never share a block.
"""

from __future__ import annotations

from importlib import resources

TEMPLATES: dict[str, str] = {
    "review-loop": "a model drafts, a person approves or sends it back with feedback (3 rounds)",
    "approval-gate": "nothing happens until a person approves the request",
    "file-digest": "a CSV dropped in the bucket is read, counted and summarised",
}
"""Template name -> what it does."""

_MARK = "__ID__"


def default_id(name: str) -> str:
    """The workflow id a template gets unless told another (``review-loop`` -> ``review_loop``)."""
    return name.replace("-", "_")


def template_text(name: str, workflow_id: str) -> str:
    """The definition file of template ``name``, its workflow named ``workflow_id``.

    Raises:
        KeyError: no template of that name (see :data:`TEMPLATES`).
    """
    if name not in TEMPLATES:
        raise KeyError(f"no template {name!r}; templates are {', '.join(TEMPLATES)}")
    path = resources.files("langorch").joinpath(f"builtins/templates/{name}.yaml")
    return path.read_text(encoding="utf-8").replace(_MARK, workflow_id)
