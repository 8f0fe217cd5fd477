"""Settings, read once at the composition root (``LANGORCH_*`` environment variables).

Nothing else reads the environment. Tests and the local stack build a ``Settings`` with their
own endpoint and names and pass it to :func:`langorch.app.container.build_container`.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where langorch's resources are and how it behaves by default."""

    model_config = SettingsConfigDict(env_prefix="LANGORCH_", extra="ignore")

    region: str = "us-east-1"
    endpoint_url: str | None = None
    """AWS endpoint override: the local emulator in dev mode and tests; ``None`` in the cloud."""

    definitions_table: str = "langorch-definitions"
    runs_table: str = "langorch-runs"
    checkpoints_table: str = "langorch-checkpoints"
    memory_table: str = "langorch-memory"
    bucket: str = "langorch-files"
    """Drop bucket; checkpoint payloads too large for DynamoDB are offloaded under
    ``checkpoint_prefix``."""
    checkpoint_prefix: str = "checkpoints"

    default_llm_provider: str = "offline"
    default_llm_model: str | None = None
    offline_script: str | None = None
    """Scripted answers for the offline provider (a JSON or YAML file)."""
    openai_api_key: str | None = None
    """Only for local use; in the cloud the key is read from Secrets Manager."""

    segment_budget_seconds: float = 600.0
    """A segment stops at the next step boundary after this long and returns ``continue``."""
    checkpoint_ttl_days: int | None = 30
    default_approvers: list[str] = []
