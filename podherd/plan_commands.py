"""The `plan` and `rebalance` commands: their arguments (the descheduler's option names) and what they do."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from podherd import arguments
from podherd.errors import CliError
from shared.config.planner import POLICY_NAMES, READS

RESOURCES = ("cpu", "memory", "pods")


def percentages(text: str) -> dict[str, float]:
    """RESOURCE=PERCENT[,...] over cpu, memory and pods, as the descheduler's thresholds."""
    found: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in RESOURCES:
            raise argparse.ArgumentTypeError(f"{part!r} is not RESOURCE=PERCENT with cpu, memory or pods")
        try:
            number = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a percentage (for example cpu=20)") from None
        if not 0 <= number <= 100:
            raise argparse.ArgumentTypeError(f"{part!r}: a percentage is from 0 to 100")
        found[name.strip()] = number
    return found


def at_least_one(text: str) -> int:
    return arguments.whole_number(text, least=1)


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    plan = sub.add_parser("plan", parents=[common], help="plan a defragmentation or a rebalance (dry)")
    plan.add_argument(
        "--policy",
        choices=("defrag", *POLICY_NAMES),
        default="defrag",
        help="defrag (room for a pending pod, the default) or a descheduler policy",
    )
    plan.add_argument(
        "--pod", metavar="NAMESPACE/POD", help="defrag: the pod to make room for (default: largest pending)"
    )
    plan.add_argument("--apply", action="store_true", help="publish the plan's moves as intents")
    plan.add_argument("-o", "--output", choices=("table", "wide", "json", "yaml"), default="table")
    plan.add_argument(
        "--picture",
        metavar="FILE.png",
        type=arguments.writable_file,
        help="a descheduler policy's plan: draw each node's fill before and after",
    )
    _policy_options(plan)
    plan.set_defaults(func=plan_command)
    rebalance = sub.add_parser(
        "rebalance", parents=[common], help="carry out a policy's plan as jobs and follow them to their end"
    )
    rebalance.add_argument(
        "--policy",
        choices=POLICY_NAMES,
        required=True,
    )
    rebalance.add_argument("--requester", default="podherd-cli", help="who asks (default: podherd-cli)")
    rebalance.add_argument(
        "--atomic",
        action="store_true",
        help="reserve room for every move before any pod goes; none within --atomic-timeout: release all",
    )
    rebalance.add_argument(
        "--atomic-timeout",
        type=arguments.duration,
        default="5m",
        help="how long the moves may wait for all of their room (default: 5m)",
    )
    rebalance.add_argument(
        "--within",
        dest="follow_timeout",
        type=arguments.seconds,
        help="how long to follow the jobs, 10m or seconds (default: until they end)",
    )
    _policy_options(rebalance)
    rebalance.set_defaults(func=rebalance_command)


def _policy_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--thresholds",
        type=percentages,
        help="Low/HighNodeUtilization: under all of these a node is underutilized (default: each 20)",
    )
    parser.add_argument(
        "--target-thresholds",
        type=percentages,
        help="LowNodeUtilization: over any of these a node is overutilized (default: each 50)",
    )
    parser.add_argument(
        "--number-of-nodes",
        type=int,
        help="LowNodeUtilization: act only above this many underutilized (default: 0)",
    )
    parser.add_argument("--max-pods-per-node", type=at_least_one, help="maxNoOfPodsToEvictPerNode")
    parser.add_argument("--max-pods-per-namespace", type=at_least_one, help="maxNoOfPodsToEvictPerNamespace")
    parser.add_argument("--max-pods-total", type=at_least_one, help="maxNoOfPodsToEvictTotal")
    parser.add_argument(
        "--recent",
        type=arguments.duration,
        help="a pod moved within this long stays, so no plan undoes a recent move (default: 30m)",
    )
    arguments.token_file(parser)
    parser.add_argument(
        "--timeout",
        type=arguments.seconds,
        default=10.0,
        help="how long to wait for each intent's answer (10s)",
    )


# The policies that read each option (the defragmentation plan, `defrag`, reads --pod alone): one given
# to a policy that does not read it is refused, never silently ignored.
READ_BY: dict[str, tuple[str, ...]] = {
    **{
        option: tuple(name for name in POLICY_NAMES if option in READS[name])
        for option in ("thresholds", "target_thresholds", "number_of_nodes")
    },
    "max_pods_per_node": POLICY_NAMES,
    "max_pods_per_namespace": POLICY_NAMES,
    "max_pods_total": POLICY_NAMES,
    "recent": POLICY_NAMES,
    "pod": ("defrag",),
    "picture": POLICY_NAMES,
}


def refuse_unread(args: argparse.Namespace) -> None:
    """A CliError naming the first option given that `args.policy` does not read."""
    for option, policies in READ_BY.items():
        if getattr(args, option, None) is not None and args.policy not in policies:
            flag = "--" + option.replace("_", "-")
            raise CliError(f"{flag} is read by {', '.join(policies)}, not by {args.policy}")


def plan_command(args: argparse.Namespace) -> int:
    refuse_unread(args)
    if args.policy == "defrag":
        from podherd import defrag_command

        return defrag_command.run(args)
    from podherd import plan_output, rebalance

    config = arguments.loaded(args)
    outcome = rebalance.make_plan(rebalance.options_of(args), config)
    for lacking in outcome.unread:
        print(f"warning: {lacking}", file=sys.stderr)
    print(plan_output.render(outcome, args.output))
    if args.picture:
        plan_output.picture(outcome, args.picture)
    if args.apply:
        return rebalance.execute(args, config, outcome)
    return 0


def rebalance_command(args: argparse.Namespace) -> int:
    from podherd import plan_output, rebalance

    refuse_unread(args)
    config = arguments.loaded(args)
    outcome = rebalance.make_plan(rebalance.options_of(args), config)
    for lacking in outcome.unread:
        print(f"warning: {lacking}", file=sys.stderr)
    print(plan_output.render(outcome, "table"), flush=True)
    if not outcome.planning.moves:
        return 0
    return rebalance.execute(args, config, outcome)
