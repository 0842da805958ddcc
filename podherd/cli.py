"""`podherd`: one command for operators. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from podherd import __version__, arguments, local_commands, plan_commands
from podherd.errors import EXIT_FAILED, CliError
from podherd.harness.servers import ServerUnavailable
from podherd.signals import stop_on_signals
from services import entry
from shared.config.model import ConfigError
from shared.nats.bus import StreamRefused
from shared.service.logs import quiet_tls_close

EXIT_USAGE = 2


def _cmd_version(_: argparse.Namespace) -> int:
    print(f"podherd {__version__}")
    return 0


def _cmd_certs(args: argparse.Namespace) -> int:
    from podherd.certs import PARTS, make

    made = make(args.namespace, tuple(args.parts or PARTS), keep=args.dir)
    if made.ephemeral_ca:
        print(
            "podherd certs: a new CA, kept nowhere: certificates issued later will not chain to it "
            "(keep it with --dir DIR, and pass the same DIR again)",
            file=sys.stderr,
        )
    print(made.yaml, end="")
    return 0


def _cmd_config(args: argparse.Namespace) -> int:
    from podherd import config_command

    return config_command.run(args)


def _cmd_run(args: argparse.Namespace) -> int:
    return entry.run(args.service, arguments.loaded(args))


def _cmd_submit(args: argparse.Namespace) -> int:
    import asyncio

    from podherd import client
    from shared.api import codec
    from shared.api.messages import MigrationIntent, PodKey

    config = arguments.loaded(args)
    namespace, name = args.pod
    intent = MigrationIntent(
        idempotency_key=args.key or client.intent_key(namespace, name, args.target_node, mode=args.mode),
        pod=PodKey(namespace=namespace, name=name),
        requester=args.requester,
        target_node=args.target_node,
        mode=args.mode,
        ttl=args.ttl,
        reason=args.reason,
    )
    try:
        codec.decode(codec.encode(intent), MigrationIntent)  # the constraints the tracker will check
    except codec.SchemaError as exc:
        raise CliError(str(exc)) from exc
    if args.via == "kubernetes":
        from podherd import via_kubernetes

        return via_kubernetes.submit_command(config, intent, wait=args.wait, within=args.wait_timeout)
    sender = client.Sender.of(config, args.token_file)

    async def submit() -> int:
        async with client.nats_client(config) as nc:
            reply = await client.request_intent(nc, sender, intent, within=args.timeout)
            print(f"job {reply.job} {'created' if reply.created else 'exists'}")
            if not args.wait:
                return 0
            assert reply.job is not None
            last = await client.follow_job(
                nc, sender.subjects, reply.job, within=args.wait_timeout, show=client.show_record
            )
            return 0 if last.phase == "Succeeded" else EXIT_FAILED

    return asyncio.run(submit())


def _cmd_jobs(args: argparse.Namespace) -> int:
    from podherd import jobs_command

    config = arguments.loaded(args)
    return jobs_command.command(
        config,
        args.name,
        output=args.output,
        selector=args.selector,
        watch=args.watch,
        headers=not args.no_headers,
    )


def _cmd_audit(args: argparse.Namespace) -> int:
    import asyncio

    from podherd import client
    from shared.nats.bus import Subjects

    config = arguments.loaded(args)
    subjects = Subjects(config.nats.subject_prefix)

    async def tail() -> int:
        async with client.nats_client(config) as nc:
            async for data in client.audit_records(nc, subjects, args.job, follow=args.follow):
                sys.stdout.write(data.decode() + "\n")
                sys.stdout.flush()
        return 0

    return asyncio.run(tail())


def _cmd_drain(args: argparse.Namespace) -> int:
    from podherd import drain

    return drain.command(args, arguments.loaded(args))


class _Parser(argparse.ArgumentParser):
    """Usage mistakes are one line too (`podherd <command> --help` has the rest)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--config", help="YAML config file (default: $PODHERD_CONFIG)")
    common.add_argument("--kubeconfig", help="the kubeconfig to use (default: kubernetes.kubeconfig)")
    common.add_argument("--context", help="its context to use (default: its current context)")
    parser = _Parser(prog="podherd", description="Safe pod migration for Kubernetes.")
    parser.add_argument("--version", action="version", version=f"podherd {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sub.add_parser("version", help="print the version").set_defaults(func=_cmd_version)
    config = sub.add_parser(
        "config", parents=[common], help="print the effective configuration after file and environment"
    )
    config.add_argument("--reference", action="store_true", help="print every key, default and variable")
    config.add_argument(
        "--compatibility",
        action="store_true",
        help="print where Podherd reads Koordinator v1.8.0's meaning otherwise, and why",
    )
    config.add_argument(
        "--redis-acl",
        action="store_true",
        help="print the ACL SETUSER lines of each service's Redis user for redis.keyPrefix",
    )
    config.add_argument(
        "--nats-accounts",
        action="store_true",
        help="print the NATS accounts (one user per service, by client certificate) for nats.subjectPrefix",
    )
    config.add_argument(
        "--rbac",
        action="store_true",
        help="print the watcher's role for the watcher.workloadKinds deploy/rbac does not grant",
    )
    config.set_defaults(func=_cmd_config)
    certs = sub.add_parser(
        "certs",
        help="the certificates (a CA of its own) and Redis passwords deploy/ mounts, as Secrets",
    )
    certs.add_argument(
        "parts",
        nargs="*",
        metavar="PART",
        type=arguments.cert_part,
        help=f"only these: {', '.join(arguments.CERT_PARTS)} (default: all)",
    )
    certs.add_argument("--namespace", default="podherd", help="the Secrets' namespace (default: podherd)")
    certs.add_argument(
        "--dir",
        type=arguments.writable_dir,
        help="keep the CA, the files and the passwords here; run again with the same DIR, it reuses them",
    )
    certs.set_defaults(func=_cmd_certs)
    run = sub.add_parser("run", parents=[common], help="run a service (production entry point)")
    run.add_argument(
        "service",
        choices=(*entry.PIPELINE, entry.GATE, entry.PLANNER, "all"),
        help="one service, or the pipeline's four in one process (the planner plans only when enabled)",
    )
    run.set_defaults(func=_cmd_run)
    local_commands.add_sim_parser(sub)
    submit = sub.add_parser("submit", parents=[common], help="ask Podherd to migrate one pod (an intent)")
    submit.add_argument("pod", metavar="NAMESPACE/POD", type=arguments.pod_key)
    submit.add_argument("--target-node", type=arguments.node_name, help="reserve room on this node")
    submit.add_argument("--mode", choices=("ReservationFirst", "EvictDirectly"))
    submit.add_argument(
        "--ttl", type=arguments.duration, help="the job's deadline, e.g. 10m (default: defaultJobTTL)"
    )
    submit.add_argument("--reason", help="why, for the audit trail")
    submit.add_argument("--requester", default="podherd-cli", help="who asks (default: podherd-cli)")
    submit.add_argument("--key", help="idempotency key (default: derived from the pod and options)")
    arguments.token_file(submit)
    submit.add_argument(
        "--wait", action="store_true", help="follow the job to its end; exit 1 unless it succeeds"
    )
    submit.add_argument(
        "--timeout",
        type=arguments.seconds,
        default=10.0,
        help="how long to wait for the intent's answer (10s)",
    )
    _via(submit)
    submit.add_argument(
        "--wait-timeout", type=arguments.seconds, default=600.0, help="how long to follow the job (10m)"
    )
    submit.set_defaults(func=_cmd_submit)
    jobs = sub.add_parser("jobs", parents=[common], help="list PodMigrationJobs (or one): phase, reason, age")
    jobs.add_argument("name", nargs="?", type=arguments.job_name, help="only this job")
    jobs.add_argument("-o", "--output", choices=("table", "wide", "name", "json", "yaml"), default="table")
    jobs.add_argument("--no-headers", action="store_true", help="leave the table's header out")
    jobs.add_argument("-l", "--selector", help="only jobs with these labels (as kubectl's -l)")
    jobs.add_argument("-w", "--watch", action="store_true", help="then print each change as it comes")
    jobs.set_defaults(func=_cmd_jobs)
    audit = sub.add_parser("audit", help="read the audit stream")
    audit_sub = audit.add_subparsers(dest="audit_command", required=True, metavar="COMMAND")
    tail = audit_sub.add_parser("tail", parents=[common], help="print audit records as JSON lines")
    tail.add_argument("--job", help="only this job's records")
    tail.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    tail.set_defaults(func=_cmd_audit)
    plan_commands.add_parsers(sub, common)
    _drain_parser(sub, common)
    local_commands.add_demo_parser(sub)
    return parser


def _drain_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    drain = sub.add_parser(
        "drain",
        parents=[common],
        help="move every pod off a node, each with a job (room reserved first), then leave it cordoned",
    )
    drain.add_argument("node", metavar="NODE", type=arguments.node_name)
    drain.add_argument("--ignore-daemonsets", action="store_true", help="leave DaemonSet-managed pods")
    drain.add_argument(
        "--delete-emptydir-data",
        action="store_true",
        help="move pods with emptyDir volumes (their data goes)",
    )
    drain.add_argument("--force", action="store_true", help="evict pods that declare no controller")
    drain.add_argument("--pod-selector", help="only the pods matching this label selector")
    drain.add_argument(
        "--timeout",
        type=arguments.duration,
        help="each job's ttl and how long to wait, e.g. 10m (default: none)",
    )
    drain.add_argument(
        "--atomic",
        action="store_true",
        help="reserve room for every pod before evicting any; none within --timeout: release all, uncordon",
    )
    drain.add_argument("--dry-run", action="store_true", help="print the plan; cordon and move nothing")
    drain.add_argument("--status", action="store_true", help="the node's drain: each job and how it went")
    drain.add_argument("--requester", default="podherd-cli", help="who asks (default: podherd-cli)")
    arguments.token_file(drain)
    drain.add_argument(
        "--request-timeout",
        type=arguments.seconds,
        default=30.0,
        help="seconds to wait for the drain's answer",
    )
    _via(drain)
    drain.set_defaults(func=_cmd_drain)


def _via(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--via",
        choices=("nats", "kubernetes"),
        default="nats",
        help="nats: an intent to the tracker (a ServiceAccount token, --token-file); kubernetes: the jobs "
        "written through the API server with your kubeconfig's own credentials (docs/operating/security.md)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    quiet_tls_close()
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        with stop_on_signals():
            code = func(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at exit
        return code
    except (CliError, ConfigError, ServerUnavailable, StreamRefused) as exc:
        print(f"podherd: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # the reader went away (`| head`): nothing more to say, and nothing to flush
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:  # a file or address the system refused: named, in one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"podherd: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print(f"podherd: interrupted; {arguments.what_goes_on(args.command, vars(args))}", file=sys.stderr)
        return 130
