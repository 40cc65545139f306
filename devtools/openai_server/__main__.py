"""`python -m devtools.openai_server --port 8089 ...`: run the fake server until
interrupted; prints its base URL, and its stats on exit."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from devtools.openai_server.answers import STYLES
from devtools.openai_server.config import FAULT_KINDS, fault_kind_setting, latency_setting
from devtools.openai_server.server import HOST, FakeOpenAIServer

# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _fault_pair(text: str) -> tuple[str, float]:
    kind, _, rate = text.partition("=")
    try:
        return fault_kind_setting(kind.strip()), float(rate)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc} (expected KIND=RATE)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m devtools.openai_server",
        description="A local OpenAI-compatible chat server that answers like a FLASK judge. "
        "Prints its base URL (http://127.0.0.1:PORT/v1) and serves until interrupted.",
    )
    parser.add_argument("--port", type=int, default=0, help="TCP port (default 0: a free one)")
    parser.add_argument("--style", choices=STYLES, default="python_dict")
    parser.add_argument("--latency", default="0", help="seconds, or MIN,MAX for a range")
    parser.add_argument("--rpm", type=int, help="requests per window (default: no limit)")
    parser.add_argument("--tpm", type=int, help="tokens per window (default: no limit)")
    parser.add_argument("--rate-window", type=float, default=60.0, help="seconds (default 60)")
    parser.add_argument("--fault-rate", type=float, help="share of requests given a fault")
    parser.add_argument(
        "--fault-kinds",
        help=f"comma-separated kinds for --fault-rate (default all: {','.join(FAULT_KINDS)})",
    )
    parser.add_argument(
        "--fault",
        type=_fault_pair,
        action="append",
        metavar="KIND=RATE",
        help="a rate per kind; repeatable; instead of --fault-rate",
    )
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument("--fail-first", type=int, default=0, help="fail the first N requests")
    parser.add_argument("--fail-first-kind", choices=FAULT_KINDS, default="http_503")
    parser.add_argument(
        "--hang-seconds",
        type=float,
        default=30.0,
        help="how long a 'timeout' fault hangs before closing",
    )
    parser.add_argument("--na-rate", type=float, default=0.0)
    parser.add_argument("--position-bias", type=float, default=0.0)
    parser.add_argument(
        "--content-scores",
        action="store_true",
        help="key scores on the instruction and the response's first sentence (bias probes)",
    )
    parser.add_argument(
        "--length-bias", type=float, default=0.0, help="up to +K for long responses"
    )
    parser.add_argument("--self-preference", default="", help="a family name the judge favours")
    parser.add_argument("--bandwagon", type=float, default=0.0, help="rate of following the crowd")
    parser.add_argument("--distraction", type=float, default=0.0, help="rate of being distracted")
    parser.add_argument(
        "--metadata-truth",
        metavar="FILE",
        help="JSON {instruction: {domains, skills, difficulty}} answered to metadata prompts",
    )
    parser.add_argument(
        "--metadata-wrong-rate",
        type=float,
        default=0.0,
        help="share of instructions whose metadata is answered wrong on purpose",
    )
    parser.add_argument("--api-key", help="require 'Authorization: Bearer KEY'")
    parser.add_argument("--model", action="append", help="accepted model names (default: any)")
    parser.add_argument("-v", "--verbose", action="store_true", help="log every request")
    args = parser.parse_args(argv)

    fault_kinds = args.fault_kinds.split(",") if args.fault_kinds else None
    try:
        truth = json.loads(Path(args.metadata_truth).read_text()) if args.metadata_truth else None
        server = FakeOpenAIServer(
            args.port,
            style=args.style,
            latency=latency_setting(args.latency),
            rpm=args.rpm,
            tpm=args.tpm,
            rate_window=args.rate_window,
            faults=dict(args.fault) if args.fault else None,
            fault_rate=args.fault_rate,
            fault_kinds=fault_kinds,
            fault_seed=args.fault_seed,
            fail_first=args.fail_first,
            fail_first_kind=args.fail_first_kind,
            hang_seconds=args.hang_seconds,
            na_rate=args.na_rate,
            position_bias=args.position_bias,
            content_scores=args.content_scores,
            length_bias=args.length_bias,
            self_preference=args.self_preference,
            bandwagon=args.bandwagon,
            distraction=args.distraction,
            metadata_truth=truth,
            metadata_wrong_rate=args.metadata_wrong_rate,
            api_key=args.api_key,
            models=args.model,
            log_requests=args.verbose,
        )
    except (ValueError, OSError) as exc:
        parser.error(str(exc))

    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    try:
        server.start()
    except OSError as exc:
        print(f"cannot listen on {HOST}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(server.url, flush=True)
    try:
        while not done.wait(0.5):
            pass
    finally:
        server.stop()
        print(json.dumps(server.stats(), sort_keys=True), file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
