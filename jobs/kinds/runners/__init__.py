"""One small runner per (device kind, job kind), named in ``jobs.kinds.table`` (``runner_for(job)`` builds it)."""

from __future__ import annotations

from jobs.kinds.runners.base import PollResult, Runner, Stopped

__all__ = ["PollResult", "Runner", "Stopped"]
