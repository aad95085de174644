"""The job engine's fixtures (our own workers and beat, a device backed by the emulator) for the live backup test."""

from jobs.tests.conftest import engine, engine_session, pocket  # noqa: F401 - fixtures, found by name
