"""tether.server: an OpenAI-compatible HTTP server over `tether.program` (``tether serve``).

Code map, in reading order: ``protocol.py`` (request bodies, Pydantic, with bounds) →
``constraints.py`` (a request's ``response_format`` / ``structured_outputs`` /
``guided_*`` / ``json_schema`` / ``grammar`` / tools → one `Constraint` → ``output=``) →
``messages.py`` (OpenAI messages → chat-template messages) → ``errors.py`` (OpenAI error
bodies) → ``runner.py`` (compile cache, prompt preparation, decoding on worker threads,
model sharing: continuous batching on llama.cpp) → ``metrics.py`` → ``app.py`` (FastAPI
routes, admission queue, API key and body-size guard, streaming).

Importing this package is cheap; FastAPI and uvicorn are imported by `create_app` and
`serve` (``pip install 'tether[server]'``).
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.server.app import ServerConfig

__all__ = ["SERVER_LIMITS", "ServerConfig", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    if name in ("ServerConfig", "SERVER_LIMITS", "create_app"):
        from tether.server import app

        return getattr(app, name)
    raise AttributeError(f"module 'tether.server' has no attribute {name!r}")


def serve(config: ServerConfig) -> int:
    """Run the server until interrupted (loads the model in the background; /health says when)."""
    from tether.errors import require

    uvicorn = require("uvicorn", "server")
    require("fastapi", "server")
    from tether.server.app import create_app

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.getLogger("tether.server")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    app = create_app(config)
    # connections beyond the requests that may run or wait (plus room for /health and
    # /metrics) get uvicorn's 503 before their bodies are read: memory stays bounded
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, access_log=False,
                                           log_level="warning", timeout_graceful_shutdown=5,
                                           limit_concurrency=config.parallel + config.queue_size + 32))

    def stop() -> None:
        server.should_exit = True

    app.state.on_fatal = stop  # a model that cannot load ends the server
    server.run()
    return 1 if app.state.load_error else 0
