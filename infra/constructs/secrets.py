"""Secrets Manager: the approval-link signing key and the LLM API key."""

from __future__ import annotations

from aws_cdk import Arn, ArnComponents, ArnFormat, RemovalPolicy, SecretValue, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

LINK_KEY_ID = "k1"
"""Key id of the generated signing key; a rotation adds ``k2`` and moves ``current``."""


class Secrets(Construct):
    """The stack's secrets. Values never appear in the template, environment or outputs.

    - link-signing key: generated at deploy time, ``{"current": "k1", "k1": "<64 chars>"}``.
    - LLM API key: created holding ``{"api_key": ""}``; the operator stores the real key
      (README, "Deploying to AWS").
    - webhook secrets: one per workflow under ``<prefix>/webhooks/``, created by the CLI when a
      workflow with a webhook trigger is registered; the stack only grants reading them.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
    """

    def __init__(self, scope: Construct, id: str, *, prefix: str) -> None:
        super().__init__(scope, id)
        self.webhook_prefix = f"{prefix}/webhooks/"
        self.link_signing_key = secretsmanager.Secret(
            self,
            "LinkSigningKey",
            description="langorch: HMAC key that signs approval links",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                secret_string_template=f'{{"current": "{LINK_KEY_ID}"}}',
                generate_string_key=LINK_KEY_ID,
                password_length=64,
                exclude_punctuation=True,
            ),
            removal_policy=RemovalPolicy.DESTROY,
        )
        self.llm_api_key = secretsmanager.Secret(
            self,
            "LlmApiKey",
            description='langorch: OpenAI API key as {"api_key": "..."} (empty until set)',
            # An empty placeholder, not a credential: the real key is put after deploy so it
            # never passes through the template.
            secret_object_value={"api_key": SecretValue.unsafe_plain_text("")},
            removal_policy=RemovalPolicy.DESTROY,
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
            actions=["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
            resource_arns=[arn],
        )
