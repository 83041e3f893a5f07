from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.models import ApiToken
from agents.roles import ADMINS, OPERATORS, ensure_groups


class Command(BaseCommand):
    help = (
        "Create an operator (or admin) user and print a new API token as the last line. An "
        "existing user gets a new token and keeps its role, unless --admin promotes it."
    )

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--password", default=None)
        parser.add_argument("--admin", action="store_true", help="also limits, agents, tokens")

    def handle(self, *args, username, password, admin, **options):
        # The user model's own rules (at most 150 letters, digits and @.+-_), as the Django
        # admin applies them: a name past them failed on PostgreSQL with a traceback, or was
        # kept on SQLite as an account nobody could type at the sign-in.
        field = get_user_model()._meta.get_field("username")
        try:
            if not username:
                raise ValidationError("empty")
            field.run_validators(username)
        except ValidationError:
            raise CommandError(
                f"username {username!r}: 1 to {field.max_length} letters, digits and @.+-_"
            ) from None
        ensure_groups()
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=username)
            if password:
                user.set_password(password)
            elif created:
                user.set_unusable_password()
            # --admin promotes; without it an existing admin stays one (a new token for an
            # admin must not take its Django admin away). Demoting is the Django admin's job.
            if admin:
                user.is_staff = True
            user.save()
            user.groups.add(Group.objects.get(name=OPERATORS))
            if admin:
                user.groups.add(Group.objects.get(name=ADMINS))
            admin = user.groups.filter(name=ADMINS).exists()
            raw, key_hash, prefix = ApiToken.generate()
            ApiToken.objects.create(user=user, key_hash=key_hash, prefix=prefix, name="cli")
        role = "admin" if admin else "operator"
        self.stdout.write(f"{'created' if created else 'updated'} {role} {username}")
        self.stdout.write(raw)
