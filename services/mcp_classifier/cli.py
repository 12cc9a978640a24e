"""Command line: parses flags into settings and runs a command; the wiring itself is in wiring.py.

Nothing else imports this module."""

from __future__ import annotations

import argparse
import asyncio
import functools
import logging
import re
import sys
import types
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import ValidationError

from . import __version__
from .settings import ENV_PREFIX, SETTINGS_GROUPS, Settings, settings_fields
from .telemetry import configure_logging
from .util.omp import apply_omp_wait_policy

if TYPE_CHECKING:
    from .cache.runtime import RedisRuntime
    from .telemetry import GatewayMetrics

log = logging.getLogger("mcp_classifier")


# ---- settings <-> flags ---------------------------------------------------------------------
# Generated from the Settings fields by hand because the CLI has subcommands with positional
# arguments; pydantic-settings' own CLI source does not combine those with our env handling.
def _flag_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        return _flag_type(inner[0]) if len(inner) == 1 else {"type": str}
    if origin is typing.Literal:
        return {"choices": list(args), "type": type(args[0])}
    if annotation is bool:
        return {"action": argparse.BooleanOptionalAction}
    if annotation in (int, float, str):
        return {"type": annotation}
    if annotation is Path:
        return {"type": Path}
    return {"type": str}


_SENTENCE_END = re.compile(r"\.\s+(?=[A-Z])")  # a full stop before a capital: "e.g. a" or "0.6B" go on


def _short_help(description: str | None) -> str:
    """The description's first sentence, whole: never cut mid-thought; docs/configuration.md has the rest."""
    return _SENTENCE_END.split(description or "", maxsplit=1)[0].strip().rstrip(".")


CLASSIFIER_FLAG = "classifier_flags"  # where argparse gathers each --classifier NAME=FILE
CLASSIFY_PORT_FLAG = "classify_port_flags"  # and each --classify-port NAME=PORT
# Repeatable NAME=VALUE flags beside a setting of the same pairs, comma-joined: (group, flag, dest, metavar, setting).
PAIR_FLAGS = (
    ("categories", "--classifier", CLASSIFIER_FLAG, "NAME=FILE", "classifiers"),
    ("serving", "--classify-port", CLASSIFY_PORT_FLAG, "NAME=PORT", "classify_ports"),
)
PAIR_FLAG_HELP = {
    CLASSIFIER_FLAG: "one more classifier on the same model (repeatable): adds to classifiers",
    CLASSIFY_PORT_FLAG: "a port whose POST /classify answers classifier NAME (repeatable): adds to classify_ports",
}


def add_settings_flags(parser: argparse.ArgumentParser, *, show_all: bool = False) -> None:
    """Every setting is a flag of every command; --help lists the common groups, --help-all every group."""
    fields = settings_fields()
    parser.formatter_class = functools.partial(argparse.HelpFormatter, max_help_position=36)
    hidden = [group.title for group in SETTINGS_GROUPS if not group.common]
    for group in SETTINGS_GROUPS:
        shown = show_all or group.common
        arguments = parser.add_argument_group(f"{group.title} (env: {ENV_PREFIX}<NAME>)") if shown else parser
        for name in group.fields:
            field = fields[name]
            arguments.add_argument(
                "--" + name.replace("_", "-"),
                dest=name,
                default=argparse.SUPPRESS,
                metavar=name.rsplit("_", 1)[-1].upper(),
                help=f"{_short_help(field.description)} [{field.default}]" if shown else argparse.SUPPRESS,
                **_flag_type(field.annotation),
            )
        for flag_group, flag, dest, metavar, _setting in PAIR_FLAGS:
            if group.name == flag_group:
                arguments.add_argument(
                    flag,
                    dest=dest,
                    action="append",
                    default=argparse.SUPPRESS,
                    metavar=metavar,
                    help=PAIR_FLAG_HELP[dest] if shown else argparse.SUPPRESS,
                )
    if not show_all:
        parser.add_argument_group("more settings", f"{', '.join(hidden)}: see --help-all or docs/configuration.md")


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Flags given on the command line override env vars, which override defaults."""
    overrides = {name: getattr(args, name) for name in settings_fields() if hasattr(args, name)}
    for _group, _flag, dest, _metavar, setting in PAIR_FLAGS:
        if hasattr(args, dest):  # --classifier NAME=FILE, repeated: the same list as --classifiers, joined (so each pair flag)
            overrides[setting] = ",".join([*filter(None, [overrides.get(setting)]), *getattr(args, dest)])
    return Settings(**overrides)


# ---- commands -------------------------------------------------------------------------------
def cmd_serve(settings: Settings) -> int:
    from .util.cpus import resolve_workers

    workers = resolve_workers(settings.serving.workers, settings.serving.max_workers)
    if workers > 1:
        from .serving.shared import WorkersError
        from .serving.supervisor import serve_workers

        try:
            return serve_workers(settings, workers)
        except WorkersError as exc:
            raise CliError(f"serve: {exc}") from exc
    from .cache.runtime import RedisRuntime
    from .telemetry import GatewayMetrics

    # Redis first (an embedded redis-server when no URL is given): it is stopped in the finally below.
    metrics = GatewayMetrics()
    redis = RedisRuntime(settings.cache, metrics.registry, rate_limited=settings.edge.rate_limit_requests > 0)
    try:
        return _serve(settings, metrics, redis)
    finally:
        redis.stop_embedded()


def _serve(settings: Settings, metrics: GatewayMetrics, redis: RedisRuntime) -> int:
    from .serving.gateway import bind, bind_classify_ports, run_gateway, say_ready, url_of

    sock = bind(settings.serving.host, settings.serving.port)
    url = url_of(sock)
    return run_gateway(
        settings,
        metrics,
        redis,
        sock,
        announce=True,
        on_ready=lambda start_seconds: say_ready(settings.serving, settings.model, url, start_seconds),
        classify_sockets=bind_classify_ports(settings.serving),
    )


def cmd_stdio(settings: Settings) -> int:
    from .transports.stdio import serve_stdio
    from .wiring import build_gateway

    # stdio serves one local host process: the in-process model, unless an embedder address is given.
    # The backend starts in the background, so initialize, ping and tools/list answer at once.
    gateway = build_gateway(settings, force_local=not settings.serving.backend.startswith("grpc://"))
    dispatcher, backend = gateway.dispatcher, gateway.backend

    async def run() -> bool:
        """Serve until end of input; True when the model was still loading then (nobody waits for it)."""
        await backend.start()
        try:
            await serve_stdio(dispatcher)  # every answer pending at end of input is written first
        finally:
            abandoned = gateway.startup.loading
            await backend.close()
        return abandoned

    if asyncio.run(run()):
        # The load runs on an executor thread that cannot be interrupted, and a normal exit joins it, which
        # would hold `printf ... | mcp-classifier stdio` until the model is loaded (about 10 s with the builtin
        # model). Every answer is out and the load's caches are written atomically: leaving now loses nothing.
        import os

        log.info("end of input while the model was still loading: exiting without waiting for the load")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def cmd_classify(settings: Settings, texts: Sequence[str], with_probabilities: bool) -> int:
    from .wiring import build_classifier

    classifier = build_classifier(settings)
    for result in classifier.classify(list(texts)):
        sys.stdout.write(orjson.dumps(result.to_public(with_probabilities)).decode() + "\n")
    return 0


def cmd_serve_config(settings: Settings) -> int:
    import yaml

    from .embedder.serve_config import serve_config

    sys.stdout.write(yaml.safe_dump(serve_config(settings), sort_keys=False))
    return 0


class CliError(Exception):
    """A failure the user can fix (bad file, unreachable URL): printed as one line, exit code 1."""


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return _run_eval(settings, args)
    except Exception as exc:
        import httpx

        from .evaluation.dataset import DatasetError
        from .evaluation.systems import RemoteError

        if isinstance(exc, (DatasetError, RemoteError, httpx.HTTPError)):
            raise CliError(f"eval: {exc}") from exc
        raise


def _run_eval(settings: Settings, args: argparse.Namespace) -> int:
    from .evaluation.dataset import accepted_labels, load_dataset, query_topics
    from .evaluation.metrics import Prediction, evaluate
    from .evaluation.report import summary_table, write_report
    from .evaluation.systems import predict_local, predict_remote

    queries = load_dataset(args.data)
    texts = [q.text for q in queries]
    systems: list[tuple[str, Callable[[], list[Prediction]]]] = []
    if args.local or not args.url:
        from .wiring import build_classifier

        systems.append(
            (
                f"local {settings.model.name}",
                lambda: predict_local(build_classifier(settings).classify, texts, settings.batching.batch_size),
            )
        )
    for url in args.url or []:
        systems.append((url, functools.partial(predict_remote, url, texts)))
    print(f"evaluating {len(systems)} system(s) on {len(queries)} labelled queries from {args.data}", file=sys.stderr)
    threshold = args.threshold
    if threshold is None:
        from .classify.registry import ClassifierRegistry

        threshold = ClassifierRegistry.read(settings.categories).config().policy.low_confidence.threshold
    reasoning, tags = [q.expected_use_reasoning for q in queries], [q.tag for q in queries]
    topics = query_topics(queries)
    evaluations = []
    for name, run in systems:
        predictions = run()
        truth = accepted_labels(queries, [p.category for p in predictions])  # a two-topic query is right on either
        evaluations.append(evaluate(name, truth, predictions, reasoning, texts, tags, threshold, topics))
    report = write_report(evaluations, args.out, args.data.name)
    print(summary_table(evaluations))
    print(f"\nreport: {report} (JSON: {report.with_suffix('.json')})", file=sys.stderr)
    return 0


def cmd_doctor(settings: Settings, args: argparse.Namespace) -> int:
    from .evaluation.commands import run_doctor
    from .evaluation.dataset import DatasetError

    try:
        run_doctor(settings, args.queries, args.out)
    except DatasetError as exc:
        raise CliError(f"doctor: {exc}") from exc
    return 0


def cmd_eval_tools(settings: Settings, args: argparse.Namespace) -> int:
    from .evaluation.commands import run_eval_tools
    from .evaluation.dataset import DatasetError

    try:
        run_eval_tools(settings, args.queries, args.tools, args.feedback)
    except DatasetError as exc:
        raise CliError(f"eval-tools: {exc}") from exc
    return 0


def cmd_loadtest(args: argparse.Namespace) -> int:
    from .loadtest.runner import LoadtestOptions, run_loadtest

    if args.steps and args.shape == "stages":
        raise CliError("loadtest: --steps and --shape stages are two different shapes: choose one")

    options = LoadtestOptions(
        url=args.url,
        backend=args.backend,
        users=args.users,
        spawn_rate=args.spawn_rate,
        duration_s=args.duration,
        hit_ratio=args.hit_ratio,
        probabilities_ratio=args.probabilities_ratio,
        length_mix=args.length_mix,
        api_key=args.api_key,
        out=args.out,
        compare=args.compare,
        shape="steps" if args.steps else args.shape,
        processes=args.processes,
        steps=args.steps,
        step_duration_s=args.step_duration,
        slo_p99_ms=args.slo_p99_ms,
        max_failure_ratio=args.max_failure_ratio,
        warmup_timeout_s=args.warmup_timeout,
    )
    try:
        return run_loadtest(options)
    except RuntimeError as exc:
        raise CliError(f"loadtest: {exc}") from exc


def _ratio(value: str) -> float:
    ratio = float(value)
    if not 0.0 <= ratio <= 1.0:
        raise argparse.ArgumentTypeError(f"{value} is not between 0 and 1")
    return ratio


def _steps(value: str) -> tuple[int, ...]:
    try:
        steps = tuple(int(part) for part in value.split(","))
    except ValueError:
        steps = ()
    if not steps or min(steps) < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a list of user counts such as 1,2,4,8")
    return steps


def add_loadtest_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    loadtest = sub.add_parser(
        "loadtest",
        help="Locust load test against --url, or a local stack it starts and stops; writes stats, report.md and plots",
    )
    loadtest.add_argument("--url", help="a running gateway (http://HOST:PORT); without it a local stack is started on free ports")
    loadtest.add_argument("--backend", choices=["local", "ray"], default="local", help="backend of the local stack [default: local]")
    loadtest.add_argument("--users", type=int, default=16, help="concurrent Locust users [default: 16]")
    loadtest.add_argument("--spawn-rate", type=float, default=16.0, help="users started per second [default: 16]")
    loadtest.add_argument("--duration", type=int, default=30, help="seconds of load [default: 30]")
    loadtest.add_argument("--hit-ratio", type=_ratio, default=0.0, help="share of requests that repeat a warmed-up text [default: 0]")
    loadtest.add_argument("--probabilities-ratio", type=_ratio, default=0.5, help="share of calls with with_probabilities [default: 0.5]")
    loadtest.add_argument("--length-mix", default="short:0.4,medium:0.4,long:0.2", help="query-length mix [default: %(default)s]")
    loadtest.add_argument("--shape", choices=["constant", "stages"], default="constant", help="stages: ramp, plateau, spike, plateau")
    loadtest.add_argument(
        "--steps", type=_steps, default=(), help="a capacity curve: user counts held one after another, e.g. 1,2,4,8,16 (replaces --users)"
    )
    loadtest.add_argument("--step-duration", type=int, default=20, help="seconds each --steps step is held and measured [default: 20]")
    loadtest.add_argument(
        "--slo-p99-ms", type=float, default=100.0, help="the p99 a step must stay within to count as capacity [default: 100]"
    )
    loadtest.add_argument(
        "--max-failure-ratio", type=_ratio, default=0.0, help="share of measured requests that may fail before the run fails [default: 0]"
    )
    loadtest.add_argument(
        "--warmup-timeout",
        type=float,
        default=120.0,
        help="seconds the cache warm-up (--hit-ratio) may take, before and apart from the steps [default: 120]",
    )
    loadtest.add_argument("--processes", type=int, default=1, help="Locust processes (more than 1 for load beyond one core)")
    loadtest.add_argument("--api-key", help="bearer key for a gateway with keys (or env MCP_LOADTEST_API_KEY; prefer the env var)")
    loadtest.add_argument("--compare", help="a second REST-style MCP classifier to run the same workload against, side by side")
    loadtest.add_argument("--out", type=Path, default=Path("loadtest-report"), help="report folder [default: loadtest-report]")


def build_parser(*, show_all: bool = False) -> argparse.ArgumentParser:
    """``show_all`` (--help-all) lists every settings group in a command's help, not only the common ones."""
    parser = argparse.ArgumentParser(prog="mcp-classifier", description="MCP classification service for LLM routers.")
    parser.add_argument("--version", action="version", version=f"mcp-classifier {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve MCP over HTTP (JSON-RPC on /mcp, REST on /mcp/<method>)", usage="%(prog)s [options]")
    add_settings_flags(serve, show_all=show_all)
    stdio = sub.add_parser("stdio", help="serve MCP over stdin/stdout (newline-delimited JSON-RPC)", usage="%(prog)s [options]")
    add_settings_flags(stdio, show_all=show_all)
    classify = sub.add_parser("classify", help="classify texts and print one result JSON per line")
    classify.add_argument("texts", nargs="+", metavar="TEXT")
    classify.add_argument("--with-probabilities", action="store_true", help="add probabilities and entropy")
    add_settings_flags(classify, show_all=show_all)
    evaluate = sub.add_parser("eval", help="evaluate on labelled queries (JSONL/CSV: text, category[, expected_use_reasoning])")
    evaluate.add_argument("--data", type=Path, required=True, help="labelled file (.jsonl or .csv)")
    evaluate.add_argument("--url", action="append", help="a running MCP classifier to evaluate (REST style); repeatable")
    evaluate.add_argument("--local", action="store_true", help="also evaluate the local model when --url is given")
    evaluate.add_argument("--out", type=Path, default=Path("eval-report"), help="report folder [default: eval-report]")
    evaluate.add_argument(
        "--threshold",
        type=float,
        help="the router's confidence threshold for the answered-share columns [default: the policy's low_confidence.threshold]",
    )
    add_settings_flags(evaluate, show_all=show_all)
    doctor = sub.add_parser(
        "doctor", help="check a categories file before deploying: confusable categories, stray examples, expected accuracy and ECE"
    )
    doctor.add_argument("--queries", type=Path, help="labelled queries (JSONL/CSV: text, category) to check as well")
    doctor.add_argument("--out", type=Path, help="also write doctor.md, doctor.json and a similarity heatmap here")
    add_settings_flags(doctor, show_all=show_all)
    eval_tools = sub.add_parser("eval-tools", help="tool retrieval: recall@1/5/10 and MRR of the tool filter, beside BM25")
    eval_tools.add_argument("queries", type=Path, help="JSONL: {query, relevant: [tool names]}")
    eval_tools.add_argument(
        "--tools",
        type=Path,
        help="JSON array of MCP or OpenAI function tools, or a saved tools/list result [default: tools.json beside the queries]",
    )
    eval_tools.add_argument(
        "--feedback",
        type=int,
        metavar="N",
        help="also give N of each tool's one-tool requests (half at most) as feedback from use, and print recall on the "
        "others with and without it",
    )
    add_settings_flags(eval_tools, show_all=show_all)
    add_loadtest_parser(sub)
    serve_cfg = sub.add_parser("serve-config", help="print the Ray Serve config YAML (the RayService's serveConfigV2)")
    add_settings_flags(serve_cfg, show_all=show_all)
    return parser


# The commands that serve until stopped: their log is what an operator reads. The others answer once, and their
# output is the answer: how the model loaded is noise there unless asked for.
SERVING_COMMANDS = frozenset({"serve", "stdio"})


def console_log_level(command: str, settings: Settings) -> str:
    """The one-shot commands log warnings only, unless --verbose (info) or a log level was set (flag or env)."""
    serving = settings.serving
    if command in SERVING_COMMANDS or "log_level" in serving.model_fields_set:
        return serving.log_level
    return "info" if serving.verbose else "warning"


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    show_all = "--help-all" in arguments
    args = build_parser(show_all=show_all).parse_args(["--help" if a == "--help-all" else a for a in arguments])
    try:
        settings = settings_from_args(args)
    except ValidationError as exc:
        print(f"mcp-classifier: invalid settings:\n{exc}", file=sys.stderr)
        return 2
    configure_logging(console_log_level(args.command, settings), settings.serving.log_format, progress_bars=settings.serving.verbose)
    apply_omp_wait_policy(settings.engine.omp_wait_policy, settings.engine.omp_spin_count)  # before anything imports torch
    from .classify.categories import CategoryFileError
    from .engine.errors import ModelLoadError

    try:
        if args.command == "serve":
            return cmd_serve(settings)
        if args.command == "stdio":
            return cmd_stdio(settings)
        if args.command == "serve-config":
            return cmd_serve_config(settings)
        if args.command == "eval":
            return cmd_eval(settings, args)
        if args.command == "eval-tools":
            return cmd_eval_tools(settings, args)
        if args.command == "doctor":
            return cmd_doctor(settings, args)
        if args.command == "loadtest":
            return cmd_loadtest(args)
        return cmd_classify(settings, args.texts, args.with_probabilities)
    except (CategoryFileError, ModelLoadError, OSError, CliError) as exc:
        print(f"mcp-classifier: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
