"""The service's ``memkit`` subcommands: ``serve``, ``app add`` and ``adapt``.

The library never imports the service (a test checks it), so the ``memkit`` command
(memkit/cli.py) finds these through the ``memkit.commands`` entry point group, which
pyproject.toml points at :func:`register`. A library installed without the service
simply has fewer commands.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import re
import socket
import sys
import threading
import time
from collections import Counter

from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

SERVE_EPILOG = """\
The instance folder (INSTANCE) holds the SQLite store memkit.db, secret_key and outbox/:
./instance under the folder you start in, or the folder $MEMKIT_INSTANCE names.

Environment (every setting is a MEMKIT_* variable, server/settings.py):
  MEMKIT_INSTANCE         the instance folder (default: ./instance)
  MEMKIT_DATABASE_URL     the store, as --db
  MEMKIT_SMTP_HOST        send e-mail (the codes) through this SMTP server, with MEMKIT_SMTP_PORT
                          and MEMKIT_MAIL_FROM; without it e-mail is written as files to
                          INSTANCE/outbox/, as SMS always is (MEMKIT_OUTBOX_DIR moves it)
  MEMKIT_PIPELINE_CONFIG  the config TOML the query serves (default: memkit/config/default.toml)
"""


def register(sub) -> None:
    """Add the service's subcommands to the ``memkit`` parser's subparsers."""
    p = sub.add_parser(
        "serve",
        help="run the service on http://127.0.0.1:8080 (SQLite store in ./instance by default)",
        description="Run the service on Werkzeug's server, for trying the API (production:\n"
        "gunicorn server.wsgi:app behind a proxy, see docs/DEPLOYMENT.md). One log line per\n"
        "request on stderr. A connection that sends nothing for 5 s, or not its request line\n"
        "and headers within 10 s, is closed; at most 64 are served at once, 16 from one client\n"
        "network (an IPv4 /24, an IPv6 /64); when all 64 are taken, a new connection takes the\n"
        "place of one waiting for its client from the network that holds the most.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="port to listen on (default: 8080)")
    p.add_argument(
        "--db",
        help="database URL (default: $MEMKIT_DATABASE_URL, else sqlite:///INSTANCE/memkit.db; "
        "postgresql://... works too)",
    )
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("app", help="register an application that may register external users")
    p.add_argument("action", choices=["add"])
    p.add_argument("name")
    p.add_argument("--db", help="database URL (as for serve)")
    p.set_defaults(func=cmd_app)

    p = sub.add_parser(
        "adapt", help="the service: adapt the encoder to the store's posts, re-encode, switch"
    )
    p.add_argument("--db", help="database URL (default: MEMKIT_DATABASE_URL, as for serve)")
    p.add_argument(
        "--batch",
        type=int,
        default=500,
        help="events per transaction when re-encoding PostgreSQL rows",
    )
    p.add_argument(
        "--threads",
        type=int,
        help="PyTorch threads while training (1 is faster on busy shared cores)",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="PostgreSQL: processes that re-encode side by side, a range of event ids each",
    )
    p.set_defaults(func=cmd_adapt)


def cmd_serve(args) -> int:
    """The service on Werkzeug's server: for trying the API. Production: gunicorn
    "server:create_app()"."""
    from server import create_app

    overrides = {"database_url": args.db} if args.db else {}
    if (
        "MEMKIT_REFUSED_DELAY" not in os.environ
    ):  # a thread per connection: a refused flood can wait
        overrides["refused_delay"] = 1.0
    app = create_app(overrides)
    settings = app.extensions["memkit"]["settings"]
    print(f"memkit service on http://{args.host}:{args.port}  store: {settings.database_url}")
    if not settings.smtp_host:
        print(f"codes are written to {settings.outbox_dir} (no SMTP host set)")
    # load the model and index the store before the first query; then settle the heap
    index = app.extensions["memkit"]["memory"].warm(settle=True)
    where = "in PostgreSQL" if settings.search_backend == "postgres" else "in this process"
    print(
        f"search index ({where}): {index.pipeline.name} over {len(index.pipeline.retriever)} events"
    )
    print(encoder_line(app.extensions["memkit"]["memory"]))
    log_requests()
    server = BoundedServer(args.host, args.port, app)
    if settings.trusted_proxies:
        # Every connection comes from the proxy, which holds its clients apart itself.
        server.per_network = server.max_threads
    print("Press CTRL+C to quit", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def log_requests() -> None:
    """The service's own line per request (method, path, status, time: server/app.py)
    on stderr, once, whatever else configures logging."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    log = logging.getLogger("memkit.server.requests")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


class _Reads(io.RawIOBase):
    """A handler's socket as the raw stream under its ``rfile``: each read waits at most the
    handler's ``timeout`` and at most what is left of its ``deadline`` (a TimeoutError once
    it has passed), and the server knows while a read waits for the client
    (``BoundedServer.waiting``)."""

    def __init__(self, handler: QuietHandler) -> None:
        super().__init__()
        self.handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        handler, sock = self.handler, self.handler.connection
        wait = handler.timeout
        if handler.deadline is not None:
            left = handler.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("the request line and headers took too long")
            wait = left if wait is None else min(wait, left)
        sock.settimeout(wait)
        waiting = getattr(handler.server, "waiting", None)
        if waiting is not None:
            waiting(sock, True)
        try:
            return sock.recv_into(buffer)
        finally:
            if waiting is not None:
                waiting(sock, False)


class QuietHandler(WSGIRequestHandler):
    """Werkzeug's request handler without its access log, which would log every request a
    second time, query string included (where a client may have put a token). What it
    still logs (a request line it cannot parse, say) has any query string cut out.

    A connection that sends nothing for ``timeout`` seconds is dropped, whether it stalls in
    its headers, in a body shorter than its Content-Length, or while Werkzeug reads the rest
    of a body it answered 413 (which it does, so that the client sees the answer). Its
    request line and headers must all arrive within ``header_deadline`` seconds: the
    timeout is per read, so a client sending a byte every few seconds was never dropped."""

    timeout = 5.0
    header_deadline: float | None = 10.0
    deadline: float | None = None  # when the request line and headers are due (monotonic)

    def setup(self) -> None:
        super().setup()
        self.rfile = io.BufferedReader(_Reads(self), io.DEFAULT_BUFFER_SIZE)

    def handle_one_request(self) -> None:
        if self.header_deadline is not None:
            self.deadline = time.monotonic() + self.header_deadline
        try:
            super().handle_one_request()
        finally:
            self.deadline = None

    def parse_request(self) -> bool:
        parsed = super().parse_request()  # reads the headers
        self.deadline = None  # the body's reads wait up to ``timeout`` each
        return parsed

    def log_request(self, code="-", size="-") -> None:
        pass

    def log(self, type: str, message: str, *args) -> None:
        args = tuple(re.sub(r"\?[^\s'\"]*", "?...", a) if isinstance(a, str) else a for a in args)
        super().log(type, message, *args)


class BoundedServer(ThreadedWSGIServer):
    """Werkzeug's threaded server with a bound: at most ``max_threads`` connections are
    served at once (a thread each), and at most ``per_network`` of them from one client
    network (an IPv4 /24, an IPv6 /64, as rate limits count), so that one client's
    half-sent requests cannot take every thread; a connection past that bound is closed at
    once.

    When every thread is taken, a new connection takes the place of one that is waiting for
    its client (a read of its request line, headers or body), from the network that holds
    the most connections, if that network holds more than the new connection's: the longest
    waiting of them is closed. So clients that trickle their requests from a few networks
    cannot keep others out (64 of them, 16 from each of four networks, did). Otherwise the
    new connection waits in the listen queue for a thread."""

    max_threads = 64
    per_network = 16

    def __init__(self, host: str, port: int, app, handler=QuietHandler) -> None:
        super().__init__(host, port, app, handler=handler)
        self._slots = threading.BoundedSemaphore(self.max_threads)
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()
        self._network_of: dict[socket.socket, str] = {}
        self._waiting: dict[socket.socket, float] = {}  # since when, for a read of its client

    def waiting(self, connection: socket.socket, yes: bool) -> None:
        """A read of ``connection`` starts (``yes``) or ends waiting for its client."""
        with self._lock:
            if not yes:
                self._waiting.pop(connection, None)
            elif connection in self._network_of:
                self._waiting[connection] = time.monotonic()

    def process_request(self, request: socket.socket, client_address) -> None:
        net = _network(client_address)
        with self._lock:
            if self._open[net] >= self.per_network:
                self.shutdown_request(request)
                return
            self._open[net] += 1
            self._network_of[request] = net
        if not self._slots.acquire(blocking=False):
            self._evict_for(net)
            self._slots.acquire()
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done(request)
            raise

    def _evict_for(self, net: str) -> None:
        """Close the connection a newcomer from ``net`` takes the place of, if any."""
        with self._lock:
            if not self._waiting:
                return
            most = max(self._open[self._network_of[c]] for c in self._waiting)
            if most <= self._open[net]:
                return
            victim = min(
                (c for c in self._waiting if self._open[self._network_of[c]] == most),
                key=self._waiting.__getitem__,
            )
            del self._waiting[victim]
        try:
            victim.shutdown(socket.SHUT_RDWR)  # its read returns: its thread ends, freeing a slot
        except OSError:  # it ended meanwhile (its slot is free, or about to be)
            pass

    def process_request_thread(self, request: socket.socket, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: socket.socket) -> None:
        with self._lock:
            net = self._network_of.pop(request)
            self._waiting.pop(request, None)
            self._open[net] -= 1
            if self._open[net] <= 0:
                del self._open[net]
        self._slots.release()


def _network(client_address) -> str:
    """The client network a connection counts against (as rate limits count)."""
    from server.api.limits import network

    return network(client_address[0])


def encoder_line(memory) -> str:
    """What the service says at start about its encoder: the adapted one `memkit adapt`
    switched to, or the configuration's own model and, if the configuration adapts, how."""
    pipeline = memory.index.pipeline  # opens the active version first
    version = memory.version
    if version is not None and version.number > 0:
        return (
            f"encoder: {version.encoder} (version {version.number}, adapted to this store's posts "
            "by `memkit adapt`)"
        )
    line = f"encoder: {pipeline.encoder_name()} (the configuration's own model)"
    stage = pipeline.encoder_stage
    if stage is not None and stage.adapt is not None:
        line += (
            "; this configuration adapts it to the store's own posts (no labels): run `memkit "
            "adapt` once posts are in, and again as they grow"
        )
    return line


def cmd_app(args) -> int:
    from server import create_app

    app = create_app({"database_url": args.db} if args.db else {})
    app_id, secret = app.extensions["memkit"]["accounts"].register_app(args.name)
    print(
        f"app_id: {app_id}\nsecret: {secret}\n(the secret is shown once; send both as X-App-Id and "
        "X-App-Secret)"
    )
    return 0


def cmd_adapt(args) -> int:
    """The service's maintenance command (server/search/adapt.py)."""
    from server.search.adapt import adapt
    from server.services.memory import Memory
    from server.settings import Settings
    from server.store import connect

    settings = Settings.load({"database_url": args.db} if args.db else {})
    engine = connect(settings.database_url)
    try:
        r = adapt(
            Memory(engine, settings),
            batch=args.batch,
            threads=args.threads,
            jobs=args.jobs,
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
    finally:
        engine.dispose()
    if not r.switched:
        print(
            f"{r.encoder} (version {r.version}) already learned these {r.events:,} posts: nothing "
            "to switch"
        )
        return 0
    print(
        f"version {r.version} active: {r.encoder}, trained on {r.pairs:,} pairs of "
        f"{r.events:,} posts\n"
        f"training {r.train_seconds:.1f} s, re-encoding {r.encode_seconds:.1f} s, "
        f"switch {r.switch_seconds:.2f} s"
    )
    return 0
