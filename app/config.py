"""Server settings: command-line flags, each with an environment variable of the same meaning."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from kube.timeutil import duration_seconds

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/dra.sqlite"


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


@dataclass
class Settings:
    listen: str = "127.0.0.1:6443"
    database_url: str = DEFAULT_DATABASE_URL
    feature_gates: str = ""
    # API versions and resources to serve besides (or instead of) the stable ones, upstream's syntax.
    runtime_config: str = ""
    log_level: str = "info"
    # Upstream's watch cache sizing: events of history per resource (0: none), and per resource
    # as "resource[.group]#size"; plus a byte budget of old versions the history may keep.
    default_watch_cache_size: int = 100
    watch_cache_sizes: tuple[str, ...] = ()
    watch_cache_history_bytes: int = 256 * 1024 * 1024
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
    # Upstream's flag; its default is 1. Here each delete is its own commit unless deletes run
    # together, so a collection of thousands took minutes one by one.
    delete_collection_workers: int = 16
    # No upstream counterpart: a client that takes nothing of a watch stream for this long is cut off.
    stream_write_timeout: float = 60.0
    # Serving: HTTPS with these files, or a self-signed certificate made in cert_dir; plain HTTP
    # only when insecure_serving says so, and only on a loopback address.
    tls_cert_file: str = ""
    tls_private_key_file: str = ""
    cert_dir: str = "./data/certs"
    insecure_serving: bool = False
    # Authentication.
    client_ca_file: str = ""
    token_auth_file: str = ""
    anonymous_auth: bool = True
    service_account_key_files: tuple[str, ...] = ()
    service_account_signing_key_file: str = ""
    service_account_issuers: tuple[str, ...] = ()
    api_audiences: tuple[str, ...] = ()
    service_account_max_token_expiration: int = 0
    # Authorization and admission.
    authorization_mode: str = "AlwaysAllow"
    admission_plugins: str = "NodeRestriction"
    disabled_admission_plugins: str = ""
    audit_log_path: str = ""
    # Upstream's flag and default: pods and pod templates with privileged containers are refused.
    allow_privileged: bool = False
    # The `kubernetes` Service and its endpoints (app.controlplane.kubernetesservice), upstream's flags.
    advertise_address: str = ""
    service_cluster_ip_range: str = ""
    endpoint_reconciler_type: str = "lease"

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
    parser.add_argument(
        "--runtime-config",
        default=env("DRA_RUNTIME_CONFIG", d.runtime_config),
        help="comma-separated key=true|false enabling or disabling API versions, upstream syntax: GROUP/VERSION "
        "(v1 for core), GROUP/VERSION/RESOURCE, api/all, api/ga, api/beta, api/alpha; older versions such as "
        "resource.k8s.io/v1beta2 are off by default (DRA_RUNTIME_CONFIG)",
    )
    parser.add_argument("--log-level", default=env("DRA_LOG_LEVEL", d.log_level), help="debug, info, warning, error (DRA_LOG_LEVEL)")
    parser.add_argument(
        "--default-watch-cache-size",
        type=int,
        default=int(env("DRA_DEFAULT_WATCH_CACHE_SIZE", str(d.default_watch_cache_size))),
        help="events of history kept per resource at least (more while younger than 75 s, up to 102400); "
        "0 keeps none: older watches read the event log (DRA_DEFAULT_WATCH_CACHE_SIZE)",
    )
    parser.add_argument(
        "--watch-cache-sizes",
        action="append",
        default=[v for v in [env("DRA_WATCH_CACHE_SIZES", "")] if v],
        help="history size per resource, comma-separated resource[.group]#size (DRA_WATCH_CACHE_SIZES)",
    )
    parser.add_argument(
        "--watch-cache-history-bytes",
        type=int,
        default=int(env("DRA_WATCH_CACHE_HISTORY_BYTES", str(d.watch_cache_history_bytes))),
        help="bytes of replaced and deleted versions the history may keep; the oldest events go first "
        "(DRA_WATCH_CACHE_HISTORY_BYTES)",
    )
    parser.add_argument(
        "--stream-write-timeout",
        type=float,
        default=float(env("DRA_STREAM_WRITE_TIMEOUT", str(d.stream_write_timeout))),
        help="seconds a watch client may take nothing before it is cut off; a LIST is cut off at --request-timeout "
        "(DRA_STREAM_WRITE_TIMEOUT)",
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
    _add_security_arguments(parser, d)
    _add_service_arguments(parser, d)


def _add_service_arguments(parser: argparse.ArgumentParser, d: Settings) -> None:
    """What the ``kubernetes`` Service in ``default`` and its endpoints say, as kube-apiserver's flags do."""
    parser.add_argument(
        "--advertise-address",
        default=env("DRA_ADVERTISE_ADDRESS", d.advertise_address),
        help="the IP address the kubernetes Service's endpoints give for this server; default: the --listen address, "
        "or when that is loopback or unspecified the address of the host's default route (DRA_ADVERTISE_ADDRESS)",
    )
    parser.add_argument(
        "--service-cluster-ip-range",
        default=env("DRA_SERVICE_CLUSTER_IP_RANGE", d.service_cluster_ip_range),
        help="CIDR of service cluster IPs; the kubernetes Service gets its first address (default 10.0.0.0/24); "
        "other Services get none allocated (DRA_SERVICE_CLUSTER_IP_RANGE)",
    )
    parser.add_argument(
        "--endpoint-reconciler-type",
        default=env("DRA_ENDPOINT_RECONCILER_TYPE", d.endpoint_reconciler_type),
        help="lease: the kubernetes Service's endpoints list every live server (each renews a lease); none: no endpoints "
        "(DRA_ENDPOINT_RECONCILER_TYPE)",
    )


def _strings(value: str) -> tuple[str, ...]:
    return tuple(v.strip() for v in value.split(",") if v.strip())


def _add_security_arguments(parser: argparse.ArgumentParser, d: Settings) -> None:
    def flag(name: str, variable: str, default: str, text: str) -> None:
        parser.add_argument(name, default=env(variable, default), help=f"{text} ({variable})")

    flag("--tls-cert-file", "DRA_TLS_CERT_FILE", d.tls_cert_file, "serving certificate (PEM, with its chain); without it a self-signed one is made in --cert-dir")
    flag("--tls-private-key-file", "DRA_TLS_PRIVATE_KEY_FILE", d.tls_private_key_file, "the serving certificate's private key (PEM)")
    flag("--cert-dir", "DRA_CERT_DIR", d.cert_dir, "where the self-signed serving certificate is kept when --tls-cert-file is not given")
    parser.add_argument(
        "--insecure-serving",
        action="store_true",
        help="serve plain HTTP on --listen, which must then be a loopback address: for tests and benchmarks only; "
        "client certificates cannot be used, tokens travel in clear text",
    )
    flag("--client-ca-file", "DRA_CLIENT_CA_FILE", d.client_ca_file, "authenticate client certificates signed by these CAs: CN is the user, each O a group")
    flag("--token-auth-file", "DRA_TOKEN_AUTH_FILE", d.token_auth_file, 'static bearer tokens, CSV lines token,user,uid,"group1,group2"')
    parser.add_argument(
        "--anonymous-auth",
        default=env("DRA_ANONYMOUS_AUTH", "true"),
        choices=["true", "false"],
        help="requests without credentials act as system:anonymous in system:unauthenticated (DRA_ANONYMOUS_AUTH)",
    )
    flag("--service-account-key-file", "DRA_SERVICE_ACCOUNT_KEY_FILE", ",".join(d.service_account_key_files),
         "PEM files (comma-separated) with the public keys that verify service account tokens")  # fmt: skip
    flag("--service-account-signing-key-file", "DRA_SERVICE_ACCOUNT_SIGNING_KEY_FILE", d.service_account_signing_key_file,
         "private key that signs service account tokens; without it a key is made for this process only")  # fmt: skip
    flag("--service-account-issuer", "DRA_SERVICE_ACCOUNT_ISSUER", ",".join(d.service_account_issuers),
         "issuers (comma-separated) of accepted service account tokens; the first one issues (default https://kubernetes.default.svc.cluster.local)")  # fmt: skip
    flag("--api-audiences", "DRA_API_AUDIENCES", ",".join(d.api_audiences), "audiences (comma-separated) a token must name; default: the issuer")
    parser.add_argument(
        "--service-account-max-token-expiration",
        type=int,
        default=int(env("DRA_SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION", str(d.service_account_max_token_expiration))),
        help="longest lifetime (seconds) of a requested token; 0: no limit (DRA_SERVICE_ACCOUNT_MAX_TOKEN_EXPIRATION)",
    )
    flag("--authorization-mode", "DRA_AUTHORIZATION_MODE", d.authorization_mode, "authorizers in order, comma-separated: Node, RBAC, AlwaysAllow, AlwaysDeny")
    flag(
        "--enable-admission-plugins",
        "DRA_ENABLE_ADMISSION_PLUGINS",
        d.admission_plugins,
        "admission plugins besides the default ones, comma-separated: NodeRestriction, ValidatingAdmissionPolicy, ResourceQuota",
    )
    flag(
        "--disable-admission-plugins",
        "DRA_DISABLE_ADMISSION_PLUGINS",
        d.disabled_admission_plugins,
        "admission plugins off, default ones included (ValidatingAdmissionPolicy and ResourceQuota are on by default), comma-separated",
    )
    flag("--audit-log-path", "DRA_AUDIT_LOG_PATH", d.audit_log_path, "append one JSON line per request (Metadata level) to this file; - for standard output")
    parser.add_argument(
        "--allow-privileged",
        nargs="?",
        const="true",
        default=env("DRA_ALLOW_PRIVILEGED", str(d.allow_privileged).lower()),
        choices=["true", "false"],
        help="If true, allow privileged containers. [default=false] (DRA_ALLOW_PRIVILEGED)",
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
        type=duration_seconds,
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
        "--delete-collection-workers",
        type=int,
        default=int(env("DRA_DELETE_COLLECTION_WORKERS", str(d.delete_collection_workers))),
        help="deletes a deletecollection request runs at once (upstream's default is 1; "
        "deletes that run together share a commit; a deleted namespace's cleanup too; below 1 counts as 1) (DRA_DELETE_COLLECTION_WORKERS)",
    )
    parser.add_argument(
        "--etcd-healthcheck-timeout",
        type=duration_seconds,
        default=env("DRA_ETCD_HEALTHCHECK_TIMEOUT", "2s"),
        help="Go duration the database may take to answer the /healthz and /readyz check named etcd (DRA_ETCD_HEALTHCHECK_TIMEOUT)",
    )
    parser.add_argument(
        "--etcd-readycheck-timeout",
        type=duration_seconds,
        default=env("DRA_ETCD_READYCHECK_TIMEOUT", "2s"),
        help="Go duration the database may take to answer the /readyz check named etcd-readiness (DRA_ETCD_READYCHECK_TIMEOUT)",
    )


def settings_from_args(args: argparse.Namespace) -> Settings:
    return Settings(
        listen=args.listen,
        database_url=args.database_url,
        feature_gates=args.feature_gates,
        runtime_config=args.runtime_config,
        log_level=args.log_level,
        default_watch_cache_size=args.default_watch_cache_size,
        watch_cache_sizes=tuple(args.watch_cache_sizes),
        watch_cache_history_bytes=args.watch_cache_history_bytes,
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
        delete_collection_workers=args.delete_collection_workers,
        stream_write_timeout=args.stream_write_timeout,
        etcd_healthcheck_timeout=args.etcd_healthcheck_timeout,
        etcd_readycheck_timeout=args.etcd_readycheck_timeout,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        cert_dir=args.cert_dir,
        insecure_serving=args.insecure_serving,
        client_ca_file=args.client_ca_file,
        token_auth_file=args.token_auth_file,
        anonymous_auth=args.anonymous_auth == "true",
        service_account_key_files=_strings(args.service_account_key_file),
        service_account_signing_key_file=args.service_account_signing_key_file,
        service_account_issuers=_strings(args.service_account_issuer),
        api_audiences=_strings(args.api_audiences),
        service_account_max_token_expiration=args.service_account_max_token_expiration,
        authorization_mode=args.authorization_mode,
        admission_plugins=args.enable_admission_plugins,
        disabled_admission_plugins=args.disable_admission_plugins,
        audit_log_path=args.audit_log_path,
        allow_privileged=args.allow_privileged == "true",
        advertise_address=args.advertise_address,
        service_cluster_ip_range=args.service_cluster_ip_range,
        endpoint_reconciler_type=args.endpoint_reconciler_type,
    )
