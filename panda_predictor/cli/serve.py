"""``panda-predictor serve``: run the HTTP prediction service under waitress.

Waitress (pure Python, no build) runs under :class:`GracefulServer`, which adds what
``waitress.serve`` lacks: load shedding on its queue and a drain on SIGTERM.
"""

from __future__ import annotations

import logging

import click

from panda_predictor.settings import Settings

log = logging.getLogger(__name__)


@click.command("serve")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 for all interfaces).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=8080,
    show_default=True,
    help="TCP port.",
)
@click.option(
    "--threads",
    type=click.IntRange(1, 64),
    default=None,
    help="Worker threads of the WSGI server (default: one per CPU; more threads "
    "than cores only queue on Python's GIL and lengthen the latency tail).",
)
@click.option(
    "--history-refresh",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds between reads of the recent history from the database "
    "(history features); 0 turns them off.",
)
@click.option(
    "--bundle",
    "bundle_dir",
    type=click.Path(exists=True, file_okay=False),
    default=None,
    help="Serve this bundle folder instead of the registry "
    "champion (for tests and benchmarks).",
)
@click.pass_obj
def serve(
    settings: Settings,
    host: str,
    port: int,
    threads: int | None,
    history_refresh: float,
    bundle_dir: str | None,
) -> None:
    """Serve predictions over HTTP with waitress (a production WSGI server).

    Endpoints: POST /v1/predictions, POST|GET /v1/tasks/<id>/prediction,
    GET /v1/models, /healthz, /readyz, /metrics. The model loads in the background
    (/readyz says "loading"); above http_max_waiting_requests waiting requests new
    ones get 503 with Retry-After; SIGTERM drains (requests received are answered,
    at most http_drain_seconds). See docs/service.md.

    \b
    Example:
      panda-predictor serve --host 127.0.0.1 --port 8080 --threads 2
    """
    import os

    threads = threads or os.cpu_count() or 2

    from panda_predictor.cli.errors import user_errors
    from panda_predictor.cli.inputs import predictor_for
    from panda_predictor.http_api import create_app
    from panda_predictor.http_api.server import GracefulServer

    loader = None
    if bundle_dir:
        with user_errors():
            predictor = predictor_for(settings, bundle_dir, version="0")
        loader = lambda: predictor  # noqa: E731
    app = create_app(settings, loader, history_refresh_seconds=history_refresh)
    server = GracefulServer(app, host, port, threads, settings.http_drain_seconds)
    server.install_signal_handler()
    log.info("serving on http://%s:%d with %d threads", host, server.port, threads)
    click.echo(
        f"Serving on http://{host}:{server.port} ({threads} threads); SIGTERM "
        "drains and stops."
    )
    server.run()
    click.echo("Stopped.")


if __name__ == "__main__":  # python -m panda_predictor.cli.serve (before registration)
    from panda_predictor.settings import load_settings

    logging.basicConfig(level=logging.WARNING)
    serve(obj=load_settings())
