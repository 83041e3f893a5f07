from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.db import storable
from agents.models import Agent, ApiToken, LimitProfile
from ledger.models import Operation


class Command(BaseCommand):
    help = "Create an agent (or reuse it) and print a new API token as the last line."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("--namespace", default=None, help="ledger scope (default: the name)")
        parser.add_argument("--profile", default=None, help="default limit profile")
        parser.add_argument("--daily-cap", default=None, help="daily cost cap, e.g. 10.00")

    def handle(self, *args, name, namespace, profile, daily_cap, **options):
        # The name is a slug, as the model says: the console's agent URLs take nothing else
        # (one agent named "bot.v2" made the agents page fail for everyone).
        _held(name, "name", "agent name {value!r}: letters, numbers, hyphens or underscores "
                            "(at most {max_length})")  # fmt: skip
        if namespace:
            refusal = "--namespace: at most {max_length} characters, no NUL or lone surrogate"
            _held(namespace, "namespace", refusal)
        cap = None
        if daily_cap is not None:
            # The column's own rules (a finite amount, 6 decimals, 14 digits): NaN or 1e30
            # failed with a traceback, 0.0000001 was kept as a cap of 0.
            field = Agent._meta.get_field("daily_cost_cap")
            try:
                cap = field.clean(daily_cap, None)
            except ValidationError:
                raise CommandError(
                    f"--daily-cap {daily_cap!r} is not an amount: at most "
                    f"{field.max_digits - field.decimal_places} digits before the point and "
                    f"{field.decimal_places} after, e.g. 10.00"
                ) from None
            if cap < 0:
                raise CommandError("--daily-cap must be zero or more")
        with transaction.atomic():
            # The agent row before the profile, held as a task creation holds it, so a
            # profile deleted meanwhile is not found rather than a broken foreign key.
            Agent.objects.select_for_update().filter(name=name).first()
            chosen = None
            if profile:
                chosen = LimitProfile.objects.filter(name=profile).first_held()
                if chosen is None:
                    raise CommandError(f"no limit profile named {profile!r}")
            agent, created = Agent.objects.get_or_create(
                name=name,
                defaults={"namespace": namespace or name, "default_profile": chosen,
                          "daily_cost_cap": cap},
            )  # fmt: skip
            if not created:
                if namespace and namespace != agent.namespace:
                    _namespace_free(agent)
                    agent.namespace = namespace
                if chosen:
                    agent.default_profile = chosen
                if cap is not None:
                    agent.daily_cost_cap = cap
                agent.save()
            raw, key_hash, prefix = ApiToken.generate()
            ApiToken.objects.create(agent=agent, key_hash=key_hash, prefix=prefix, name="cli")
        self.stdout.write(
            f"{'created' if created else 'updated'} agent {agent.name} "
            f"(namespace {agent.namespace})"
        )
        self.stdout.write(raw)


def _held(value: str, field_name: str, refusal: str) -> None:
    """Refuse (CommandError) a value the agent's column does not take: empty, past its
    validators (length, slug), or holding text the database cannot store (a NUL). `refusal`
    is formatted with the value and the column's max_length."""
    field = Agent._meta.get_field(field_name)
    try:
        if not value or storable.unstorable(value) is not None:
            raise ValidationError("not storable")
        field.run_validators(value)
    except ValidationError:
        raise CommandError(refusal.format(value=value, max_length=field.max_length)) from None


def _namespace_free(agent: Agent) -> None:
    """Refuse (CommandError) to move an agent whose writes are in the ledger of its namespace:
    in another, the same operation key is unknown and runs again (a second payment)."""
    if Operation.objects.filter(namespace=agent.namespace, task__agent=agent).exists():
        raise CommandError(
            f"agent {agent.name} has writes in the ledger of namespace {agent.namespace!r}: in "
            "another namespace they would run again; create a new agent for the new namespace"
        )
