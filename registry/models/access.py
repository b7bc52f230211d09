"""Access limits shared by every web process."""

from __future__ import annotations

from django.db import models


class RateCount(models.Model):
    """Requests counted per client or user in one fixed window, shared by every web process.

    Hand-written because django-ratelimit needs memcached or Redis (it refuses the database cache,
    whose increments are not atomic), and the embedded default runs with neither: an UPDATE of
    ``count = count + 1`` is atomic on SQLite and PostgreSQL alike.
    """

    key = models.CharField(max_length=200)  # "<scope>:ip:<address>" or "<scope>:user:<id>"
    window = models.BigIntegerField()  # start of the window, in seconds since the epoch
    count = models.IntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "window"], name="ratecount_key_window_unique")]

    def __str__(self) -> str:
        return f"{self.key} @ {self.window}: {self.count}"
