"""SES sending: the sender identity and a configuration set that never rewrites links."""

from __future__ import annotations

from aws_cdk import Arn, ArnComponents, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ses as ses
from constructs import Construct


class Email(Construct):
    """The sender identity and configuration set for approval emails.

    The configuration set has no event destination, so SES neither tracks opens nor rewrites
    links for click tracking: a rewritten approval link would carry its signature through a
    tracking redirect, and mail scanners that follow it must only ever see an inert page.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        sender_email: the From address.
        domain: verify the whole domain (DKIM records to publish) instead of the address.
    """

    def __init__(
        self, scope: Construct, id: str, *, prefix: str, sender_email: str, domain: str | None
    ) -> None:
        super().__init__(scope, id)
        self.sender_email = sender_email
        identity = ses.Identity.domain(domain) if domain else ses.Identity.email(sender_email)
        self.configuration_set = ses.ConfigurationSet(
            self,
            "ConfigurationSet",
            configuration_set_name=f"{prefix}-approvals",
            reputation_metrics=True,
            sending_enabled=True,
            tls_policy=ses.ConfigurationSetTlsPolicy.REQUIRE,
        )
        self.identity = ses.EmailIdentity(
            self, "Identity", identity=identity, configuration_set=self.configuration_set
        )

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` send from the identity through the configuration set.

        SES authorizes a send against both the identity and the configuration set it names.
        """
        self.identity.grant_send_email(grantee)
        config_set_arn = Arn.format(
            ArnComponents(
                service="ses",
                resource="configuration-set",
                resource_name=self.configuration_set.configuration_set_name,
            ),
            Stack.of(self),
        )
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=["ses:SendEmail", "ses:SendRawEmail"],
            resource_arns=[config_set_arn],
        )
