"""`podherd sim`: kubesim as a server of its own (compose's kubesim, a developer's cluster)."""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
from pathlib import Path

import yaml

from kubesim.entry import PODHERD_IMAGE, SimOptions, podherd_image, resolve, serve_forever
from podherd.errors import CliError
from podherd.install import SERVICE_ACCOUNTS, install_with_accounts
from podherd.realcluster.serve import serve_real

# Beside the services' kubeconfigs: the CA of the client certificate kubesim presents to webhooks, which the
# gate's `clientCA` names.
WEBHOOK_CALLERS_CA = "api-server-ca.crt"
ACCOUNT_TOKEN_SECONDS = 365 * 86_400  # no kubelet refreshes the tokens of compose's services


def run_sim(args: argparse.Namespace) -> int:
    scenario = None
    if args.scenario:
        try:
            scenario = resolve(args.scenario)
        except (KeyError, ValueError, OSError, yaml.YAMLError) as exc:
            raise CliError(f"scenario {args.scenario!r}: {exc}") from exc
    if args.engine == "real":
        return serve_real(args, scenario, token_seconds=ACCOUNT_TOKEN_SECONDS)
    options = SimOptions(
        evict_in_background=args.evict_in_background,
        record_events=not args.no_events,
        min_request_timeout=args.min_request_timeout,
    )
    if args.run_podherd:
        options.images[PODHERD_IMAGE] = podherd_image()
    for spec in args.service:
        key, _, backends = spec.partition("=")
        addresses = re.fullmatch(r"[^:,=\s]+:\d+(,[^:,=\s]+:\d+)*", backends)
        if not re.fullmatch(r"[a-z0-9-]+/[a-z0-9-]+:\d+", key) or not addresses:
            raise CliError(f"--service {spec!r}: expected NS/NAME:PORT=HOST:PORT[,HOST:PORT]")
        options.services[key] = backends.split(",")
    if args.no_controllers:
        options.scheduler = options.workloads = options.kubelet = options.pdb = False
    kubeconfig = Path(args.kubeconfig) if args.kubeconfig else None
    ready, webhook_ca = None, None
    if args.podherd_accounts:
        if kubeconfig is None:
            raise CliError("--podherd-accounts needs --kubeconfig")
        directory = Path(args.podherd_accounts)
        ready = functools.partial(
            install_with_accounts,
            directory=directory,
            services=SERVICE_ACCOUNTS,
            seconds=ACCOUNT_TOKEN_SECONDS,
        )
        webhook_ca = directory / WEBHOOK_CALLERS_CA
    try:
        asyncio.run(
            serve_forever(
                options,
                scenario,
                args.port,
                kubeconfig=kubeconfig,
                host=args.host,
                advertise_url=args.advertise_url,
                ready=ready,
                webhook_ca=webhook_ca,
            )
        )
    except OSError as exc:
        raise CliError(f"cannot serve on {args.host}:{args.port}: {exc.strerror}") from exc
    return 0
