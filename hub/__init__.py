# Load the Celery app whenever Django starts, so @shared_task binds to it (Celery's Django recipe).
from hub.celery import app as celery_app

__all__ = ("celery_app",)
