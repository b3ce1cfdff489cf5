"""Server settings: command-line flags, each with an environment variable of the same meaning."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from kube.timeutil import parse_go_duration

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/dra.sqlite"


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


@dataclass
class Settings:
    listen: str = "127.0.0.1:6443"
    database_url: str = DEFAULT_DATABASE_URL
    feature_gates: str = ""
    log_level: str = "info"
    watch_cache_size: int = 100_000
    compaction_interval: float = 60.0
    compaction_window: float = 300.0
    compaction_min_retain: int = 1000
    poll_interval: float = 1.0
    max_body_bytes: int = 3 * 1024 * 1024
    min_request_timeout: float = 1800.0
    bookmark_interval: float = 60.0
    workers: int = 1
    # Upstream's limits and their defaults (kube-apiserver flags of the same names).
    max_requests_inflight: int = 400
    max_mutating_requests_inflight: int = 200
    request_timeout: float = 60.0
    etcd_healthcheck_timeout: float = 2.0
    etcd_readycheck_timeout: float = 2.0
    # No upstream counterpart: open watches hold memory until they end.
    max_watches: int = 10_000

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0] or "127.0.0.1"

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


def add_server_arguments(parser: argparse.ArgumentParser) -> None:
    d = Settings()
    parser.add_argument("--listen", default=env("DRA_LISTEN", d.listen), help="host:port to serve on (DRA_LISTEN)")
    parser.add_argument(
        "--database-url",
        default=env("DRA_DATABASE_URL", d.database_url),
        help="SQLAlchemy URL: sqlite:///path (default, embedded) or postgresql://user@host/db (DRA_DATABASE_URL)",
    )
    parser.add_argument(
        "--feature-gates",
        default=env("DRA_FEATURE_GATES", d.feature_gates),
        help="comma-separated Gate=true|false, upstream syntax (DRA_FEATURE_GATES)",
    )
    parser.add_argument("--log-level", default=env("DRA_LOG_LEVEL", d.log_level), help="debug, info, warning, error (DRA_LOG_LEVEL)")
    parser.add_argument(
        "--watch-cache-size",
        type=int,
        default=int(env("DRA_WATCH_CACHE_SIZE", str(d.watch_cache_size))),
        help="events kept in memory for watch resumption (DRA_WATCH_CACHE_SIZE)",
    )
    parser.add_argument(
        "--compaction-interval",
        type=float,
        default=float(env("DRA_COMPACTION_INTERVAL", str(d.compaction_interval))),
        help="seconds between event-log compactions; 0 disables (DRA_COMPACTION_INTERVAL)",
    )
    parser.add_argument(
        "--compaction-window",
        type=float,
        default=float(env("DRA_COMPACTION_WINDOW", str(d.compaction_window))),
        help="seconds of event history always kept for watch resumption (DRA_COMPACTION_WINDOW)",
    )
    parser.add_argument(
        "--compaction-min-retain",
        type=int,
        default=int(env("DRA_COMPACTION_MIN_RETAIN", str(d.compaction_min_retain))),
        help="events always kept regardless of age (DRA_COMPACTION_MIN_RETAIN)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=float(env("DRA_POLL_INTERVAL", str(d.poll_interval))),
        help="seconds between event-log polls for other replicas' writes; Postgres also wakes on NOTIFY (DRA_POLL_INTERVAL)",
    )
    parser.add_argument(
        "--bookmark-interval",
        type=float,
        default=float(env("DRA_BOOKMARK_INTERVAL", str(d.bookmark_interval))),
        help="seconds between BOOKMARK events on watches that asked for them (DRA_BOOKMARK_INTERVAL)",
    )


    parser.add_argument(
        "--max-requests-inflight",
        type=int,
        default=int(env("DRA_MAX_REQUESTS_INFLIGHT", str(d.max_requests_inflight))),
        help="the most read-only requests (get, list) served at once; more are refused with 429; 0: no limit (DRA_MAX_REQUESTS_INFLIGHT)",
    )
    parser.add_argument(
        "--max-mutating-requests-inflight",
        type=int,
        default=int(env("DRA_MAX_MUTATING_REQUESTS_INFLIGHT", str(d.max_mutating_requests_inflight))),
        help="the most writes served at once; more are refused with 429; 0: no limit (DRA_MAX_MUTATING_REQUESTS_INFLIGHT)",
    )
    parser.add_argument(
        "--request-timeout",
        type=_duration,
        default=env("DRA_REQUEST_TIMEOUT", "1m0s"),
        help="Go duration after which a request other than a watch is answered 504; a request's ?timeout= may shorten it (DRA_REQUEST_TIMEOUT)",
    )
    parser.add_argument(
        "--min-request-timeout",
        type=int,
        default=int(env("DRA_MIN_REQUEST_TIMEOUT", str(int(d.min_request_timeout)))),
        help="seconds a watch without timeoutSeconds stays open at least (a random time up to twice this) (DRA_MIN_REQUEST_TIMEOUT)",
    )
    parser.add_argument(
        "--max-watches",
        type=int,
        default=int(env("DRA_MAX_WATCHES", str(d.max_watches))),
        help="the most watches open at once; more are refused with 429; 0: no limit (DRA_MAX_WATCHES)",
    )
    parser.add_argument(
        "--etcd-healthcheck-timeout",
        type=_duration,
        default=env("DRA_ETCD_HEALTHCHECK_TIMEOUT", "2s"),
        help="Go duration the database may take to answer the /healthz and /readyz check named etcd (DRA_ETCD_HEALTHCHECK_TIMEOUT)",
    )
    parser.add_argument(
        "--etcd-readycheck-timeout",
        type=_duration,
        default=env("DRA_ETCD_READYCHECK_TIMEOUT", "2s"),
        help="Go duration the database may take to answer the /readyz check named etcd-readiness (DRA_ETCD_READYCHECK_TIMEOUT)",
    )


def _duration(text: str) -> float:
    """A flag's Go duration (``1m0s``) in seconds (argparse parses string defaults with it too)."""
    try:
        return parse_go_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(
        listen=args.listen,
        database_url=args.database_url,
        feature_gates=args.feature_gates,
        log_level=args.log_level,
        watch_cache_size=args.watch_cache_size,
        compaction_interval=args.compaction_interval,
        compaction_window=args.compaction_window,
        compaction_min_retain=args.compaction_min_retain,
        poll_interval=args.poll_interval,
        bookmark_interval=args.bookmark_interval,
        max_requests_inflight=args.max_requests_inflight,
        max_mutating_requests_inflight=args.max_mutating_requests_inflight,
        request_timeout=args.request_timeout,
        min_request_timeout=float(args.min_request_timeout),
        max_watches=args.max_watches,
        etcd_healthcheck_timeout=args.etcd_healthcheck_timeout,
        etcd_readycheck_timeout=args.etcd_readycheck_timeout,
    )
