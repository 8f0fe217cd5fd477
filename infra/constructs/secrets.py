"""Secrets Manager: the approval-link signing key, the LLM API key and the Slack app's secrets."""

from __future__ import annotations

import json
from collections.abc import Sequence

from aws_cdk import Arn, ArnComponents, ArnFormat, RemovalPolicy, SecretValue, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

LINK_KEY_ID = "k1"
"""Key id of the generated signing key; a rotation adds ``k2`` and moves ``current``."""


class Secrets(Construct):
    """The stack's secrets. Values never appear in the template, environment or outputs.

    - link-signing key: ``{"current": "k1", "keys": {"k1": <generated, base64>}}``.
    - LLM API key: created holding ``{"api_key": "", "placeholder": <generated>}``; the
      operator stores the real key (README, "Deploying to AWS").

    Operators own these values (``langorch keys rotate`` rewrites the signing key, the
    operator puts the LLM key), so the template holds none of them: CloudFormation writes a
    secret's value when it creates it and afterwards only when ``SecretString`` or
    ``GenerateSecretString`` itself changes in the template — tests pin both, so no deploy
    rewrites what an operator stored.
    - webhook secrets: one per workflow under ``<prefix>/webhooks/``, created by the CLI when a
      workflow with a webhook trigger is registered; the stack only grants reading them.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
    """

    def __init__(self, scope: Construct, id: str, *, prefix: str) -> None:
        super().__init__(scope, id)
        self.webhook_prefix = f"{prefix}/webhooks/"
        # The signing key's shape is nested ({"current": "k1", "keys": {"k1": base64}}, see
        # langorch.app.approvals.decisions.load_signing_keys) and CloudFormation only generates flat
        # JSON. So a seed secret is generated (64 letters and digits: valid base64 for 48
        # bytes) and the key secret embeds it through a dynamic reference: the template holds
        # `{{resolve:secretsmanager:...}}`, never key material.
        self.link_signing_seed = secretsmanager.Secret(
            self,
            "LinkSigningSeed",
            description="langorch: generated material of the first link-signing key",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=64,
                exclude_punctuation=True,
                include_space=False,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        document = json.dumps({"current": LINK_KEY_ID, "keys": {LINK_KEY_ID: "@KEY@"}})
        before, after = document.split("@KEY@")
        self.link_signing_key = secretsmanager.Secret(
            self,
            "LinkSigningKey",
            description="langorch: HMAC keys that sign approval links",
            secret_string_value=SecretValue.unsafe_plain_text(
                before + self.link_signing_seed.secret_value.unsafe_unwrap() + after
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.llm_api_key = secretsmanager.Secret(
            self,
            "LlmApiKey",
            description='langorch: OpenAI API key as {"api_key": "..."} (empty until set)',
            # Generated on create, so no value is template-managed: the template's
            # SecretString would be written again whenever it changed, over the operator's
            # key. The generated "placeholder" is never read (Container reads "api_key").
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=json.dumps({"api_key": ""}),
                generate_string_key="placeholder",
                password_length=16,
                exclude_punctuation=True,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )

        # Slack: the app's bot token and signing secret, stored by the operator (README,
        # "Approvals in Slack"); generated on create for the same reason as the LLM key.
        self.slack = secretsmanager.Secret(
            self,
            "Slack",
            description='langorch: Slack app as {"bot_token": "xoxb-...", "signing_secret": "..."}',
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=json.dumps({"bot_token": "", "signing_secret": ""}),
                generate_string_key="placeholder",
                password_length=16,
                exclude_punctuation=True,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )

    def grant_read_tool_secrets(self, grantee: iam.IGrantable, names: Sequence[str]) -> None:
        """Let ``grantee`` read exactly the named tool-header secrets (``mcp_secrets``).

        The operator creates them (``{"value": "..."}``) before ``langorch tools add``; each
        ARN ends in Secrets Manager's random ``-XXXXXX``, matched by six ``?``.
        """
        if not names:
            return
        stack = Stack.of(self)
        arns = [
            Arn.format(
                ArnComponents(
                    service="secretsmanager",
                    resource="secret",
                    resource_name=f"{name}-??????",
                    arn_format=ArnFormat.COLON_RESOURCE_NAME,
                ),
                stack,
            )
            for name in names
        ]
        iam.Grant.add_to_principal(
            grantee=grantee, actions=["secretsmanager:GetSecretValue"], resource_arns=arns
        )

    def grant_read_webhook_secrets(self, grantee: iam.IGrantable) -> iam.Grant:
        """Let ``grantee`` read the per-workflow webhook secrets (names under the prefix).

        The secrets are created after deploy, one per workflow, so the grant is on the name
        prefix; Secrets Manager appends a random ``-XXXXXX`` to every ARN, hence the ``*``.
        """
        arn = Arn.format(
            ArnComponents(
                service="secretsmanager",
                resource="secret",
                resource_name=f"{self.webhook_prefix}*",
                arn_format=ArnFormat.COLON_RESOURCE_NAME,
            ),
            Stack.of(self),
        )
        return iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["secretsmanager:GetSecretValue"],
            resource_arns=[arn],
        )
