"""SES sending: the sender identity and a configuration set that never rewrites links."""

from __future__ import annotations

from aws_cdk import Arn, ArnComponents, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ses as ses
from aws_cdk import aws_sns as sns
from constructs import Construct

SEND = ["ses:SendEmail"]
"""``SesSender`` calls SES v1 ``SendEmail`` only (never ``SendRawEmail``)."""


class Email(Construct):
    """The sender identity and configuration set for approval emails.

    The configuration set's one event destination takes hard bounces and complaints only (to
    ``events``, an SNS topic the trigger function subscribes to): never opens or clicks, so SES
    neither adds a tracking pixel nor rewrites links: a rewritten approval link would carry its
    signature through a tracking redirect, and mail scanners that follow it must only ever see
    an inert page.

    Args:
        prefix: name prefix, ``langorch-<stage>``.
        sender_email: the From address.
        domain: verify the whole domain (DKIM records to publish) instead of the address.
        create_identity: create the identity (``ses_identity: create``), or adopt one already
            verified in this account and region (``existing``): SES refuses a second
            ``EmailIdentity`` for the same address or domain, e.g. from another stage.
        enabled: ``email: off`` creates no SES resource (regions without SES).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        prefix: str,
        sender_email: str,
        domain: str | None,
        create_identity: bool = True,
        enabled: bool = True,
    ) -> None:
        super().__init__(scope, id)
        self.sender_email = sender_email
        self.identity_name = domain or sender_email
        self.enabled = enabled
        self._configuration_set_name = f"{prefix}-approvals"
        self.identity: ses.EmailIdentity | None = None
        self.events: sns.Topic | None = None
        if not enabled:
            # email: off (a region without SES): no SES resource at all; the functions keep a
            # grant that names nothing that exists, and approvals go to the console or Slack.
            return
        self.configuration_set = ses.ConfigurationSet(
            self,
            "ConfigurationSet",
            configuration_set_name=self._configuration_set_name,
            reputation_metrics=True,
            sending_enabled=True,
            tls_policy=ses.ConfigurationSetTlsPolicy.REQUIRE,
        )
        self.events = sns.Topic(
            self, "Events", display_name=f"{prefix} approval email events", enforce_ssl=True
        )
        self.configuration_set.add_event_destination(
            "BouncesAndComplaints",
            destination=ses.EventDestination.sns_topic(self.events),
            events=[ses.EmailSendingEvent.BOUNCE, ses.EmailSendingEvent.COMPLAINT],
        )
        if create_identity:
            identity = ses.Identity.domain(domain) if domain else ses.Identity.email(sender_email)
            self.identity = ses.EmailIdentity(
                self, "Identity", identity=identity, configuration_set=self.configuration_set
            )

    @property
    def configuration_set_name(self) -> str:
        """The configuration set's name: a reference to it when created (so what names it is
        deployed after it), the would-be name with ``email: off``."""
        if not self.enabled:
            return self._configuration_set_name
        return self.configuration_set.configuration_set_name

    def _arn(self, resource: str, name: str) -> str:
        return Arn.format(
            ArnComponents(service="ses", resource=resource, resource_name=name), Stack.of(self)
        )

    def grant_send(self, grantee: iam.IGrantable) -> None:
        """Let ``grantee`` send from the identity through the configuration set.

        SES authorizes a send against every identity it involves: the sender's, the
        configuration set it names, and — while the account is in the SES sandbox — each
        recipient's (sandbox recipients must themselves be verified identities). Approvers
        are known only at run time, so the recipient side is every identity of this account
        and region (``identity/*``); the sender is still pinned by the ``ses:FromAddress``
        condition, so the role cannot send as anyone else.
        """
        sender = (
            self.identity.email_identity_arn
            if self.identity is not None
            else self._arn("identity", self.identity_name)
        )
        config_set = self._arn("configuration-set", self.configuration_set_name)
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=SEND,
            resource_arns=[sender, config_set],
        )
        iam.Grant.add_to_principal(
            grantee=grantee,
            actions=SEND,
            resource_arns=[self._arn("identity", "*")],
            conditions={"StringEquals": {"ses:FromAddress": self.sender_email}},
        )
