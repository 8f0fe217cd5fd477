"""SES: send approval emails (text and HTML) through a configuration set without click tracking.

Click tracking would rewrite the approval link through a tracking domain; the configured set must
have it off (RELIABILITY "Approval links").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from botocore.exceptions import ClientError

from langorch.domain.approvals.record import EmailNotSentError
from langorch.domain.errors import StorageError

if TYPE_CHECKING:
    from langorch.web.emails import OutgoingEmail

_TRANSIENT = frozenset(
    {"Throttling", "ThrottlingException", "ServiceUnavailable", "InternalFailure", "RequestTimeout"}
)


class SesSender:
    """Sends rendered emails with SES ``SendEmail``.

    Args:
        client: a boto3 ``ses`` client.
        sender: the verified From address.
        configuration_set: the configuration set to send through (click tracking off).
    """

    def __init__(self, client: Any, *, sender: str, configuration_set: str | None) -> None:
        self._client = client
        self._sender = sender
        self._configuration_set = configuration_set

    def send(self, email: OutgoingEmail) -> str:
        """Send one email; returns SES's message id.

        Raises:
            StorageError: SES is throttling or unavailable (transient: the request is retried).
            EmailNotSentError: SES refused the email for good (unverified sender, bad address).
        """
        request: dict[str, Any] = {
            "Source": self._sender,
            "Destination": {"ToAddresses": [email.to]},
            "Message": {
                "Subject": {"Data": email.subject, "Charset": "UTF-8"},
                "Body": {
                    "Text": {"Data": email.text, "Charset": "UTF-8"},
                    "Html": {"Data": email.html, "Charset": "UTF-8"},
                },
            },
        }
        if self._configuration_set:
            request["ConfigurationSetName"] = self._configuration_set
            # SES's bounce and complaint events carry the tags: they name the approval to
            # escalate (langorch.app.approvals.bounces).
            request["Tags"] = [{"Name": "approval_id", "Value": email.approval_id}]
        try:
            response = self._client.send_email(**request)
        except ClientError as exc:
            error = cast(dict[str, Any], exc.response).get("Error", {})
            code = str(error.get("Code", ""))
            # Only the code and SES's message: the request holds the signed link.
            message = f"SES did not send approval {email.approval_id}'s email: {code}"
            if code in _TRANSIENT:
                raise StorageError(message) from exc
            detail = str(error.get("Message", ""))
            raise EmailNotSentError(f"{message} ({detail}); {self._fix(code, detail)}") from exc
        return str(response["MessageId"])

    def _fix(self, code: str, detail: str) -> str:
        """What to do about a refusal, from SES's code and message (the real cause, not a
        guess at the sender)."""
        lowered = detail.lower()
        if code in ("AccessDenied", "AccessDeniedException"):
            if ":identity/" in detail and self._sender not in detail:
                return (
                    "the function's role may not send to this recipient's identity: in the SES "
                    "sandbox a send is also authorized against each recipient, so grant "
                    "ses:SendEmail on the account's identity/* for this sender (the stack does) "
                    "or request SES production access"
                )
            return (
                f"the function's role may not send as {self._sender} or through configuration "
                f"set {self._configuration_set}: redeploy the stack (its grant names both)"
            )
        if code == "MessageRejected" and "not verified" in lowered:
            if self._sender.lower() in lowered:
                return (
                    f"the sender {self._sender} is not a verified identity in this region: "
                    "open the verification email SES sent (or publish the DKIM records), or "
                    "deploy with ses_identity=create"
                )
            return (
                "the account is in the SES sandbox, where recipients must be verified too: "
                "verify the approver's address in SES or request production access"
            )
        if code == "ConfigurationSetDoesNotExist":
            return f"configuration set {self._configuration_set} is missing: redeploy the stack"
        if code == "AccountSendingPausedException":
            return "SES paused sending for this account: see the SES console's reputation page"
        return (
            f"check that {self._sender} is a verified identity and the recipient address is valid"
        )
