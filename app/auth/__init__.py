"""Who is asking and what they may do: authentication, authorization, admission by identity,
impersonation and the audit log, with kube-apiserver's rules, reasons and answers.

The request path runs them in upstream's order: authenticate (``authenticators``), apply
impersonation (``impersonation``), authorize the request's attributes (``attributes``) with the
configured authorizers in order (``authorizers``: Node, RBAC, AlwaysAllow), then the write's
admission by identity (``noderestriction``), and log one audit line per request (``audit``).
"""
