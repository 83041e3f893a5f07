from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from agents.errors import DomainError
from agents.services.signin import signin_unlock


class Command(BaseCommand):
    help = (
        "Lift a sign-in lockout from a shell (e.g. the last admin's own), written to the audit "
        "log as done by the system."
    )

    def add_arguments(self, parser):
        target = parser.add_mutually_exclusive_group(required=True)
        target.add_argument("--username")
        target.add_argument("--address", help="the client address, as on the Lockouts page")
        parser.add_argument("--reason", default="")

    def handle(self, *args, username, address, reason, **options):
        by, value = ("username", username) if username else ("address", address)
        try:
            forgotten = signin_unlock(user=None, by=by, value=value, reason=reason)
        except DomainError as error:
            raise CommandError(error.message) from None
        if forgotten:
            self.stdout.write(f"unlocked {by} {value}: {forgotten} failures forgotten")
        else:
            self.stdout.write(f"{by} {value} was not locked")
