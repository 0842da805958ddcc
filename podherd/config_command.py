"""`podherd config`: the effective configuration, its reference, and what it implies elsewhere (Redis ACL
users, NATS accounts, the watcher's role for the configured workload kinds)."""

from __future__ import annotations

import argparse

import msgspec
import yaml

from podherd import arguments, compatibility
from podherd.reference import config_reference
from shared.access.workload_rbac import workload_rbac
from shared.core.redact import redacted
from shared.ledger.acl import setuser_lines
from shared.nats.bus import Subjects
from shared.nats.permissions import accounts_file


def run(args: argparse.Namespace) -> int:
    if args.reference:
        print(config_reference(), end="")
        return 0
    if args.compatibility:
        print(compatibility.page(), end="")
        return 0
    config = arguments.loaded(args)
    if args.redis_acl:
        print(setuser_lines(config.redis.key_prefix), end="")
        return 0
    if args.nats_accounts:
        print(accounts_file(Subjects(config.nats.subject_prefix)), end="")
        return 0
    if args.rbac:
        docs = workload_rbac(config.watcher.workload_kinds)
        print(yaml.safe_dump_all(docs, sort_keys=False) if docs else "# deploy/rbac grants them\n", end="")
        return 0
    print(yaml.safe_dump(redacted(msgspec.to_builtins(config)), sort_keys=False), end="")
    return 0
