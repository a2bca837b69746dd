"""`python -m benchmarks.preemption`: the grace period a preempted run of the paper's base model needs here.

A cloud machine is preempted with SIGTERM and a grace period before SIGKILL. vanilla-train then finishes the step
in progress and writes a complete checkpoint (``--save_on_signal``, on by default). This starts the wmt14 preset
(the base model and its step of ~25,000 tokens a side) on the bundled Multi30k, sends SIGTERM as soon as the first
step has ended (so the whole second step must finish: the worst case), and measures from the signal to the
process's exit, split into the rest of the step and the checkpoint's write, with the checkpoint's size.

    python -m benchmarks.preemption --json results/benchmarks/preemption.json
"""

import argparse
import json
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import write_record
from training.api import stopping_signal
from vanilla_tools.provenance import provenance

FIRST_STEP = re.compile(r"first training step done")
STOPPED = re.compile(r"stopped by SIGTERM at step (\d+)")


def measure(extra: list[str], timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        output = Path(tmp) / "run"
        command = [
            sys.executable,
            "-m",
            "training.train",
            "--config",
            "wmt14",
            "--dataset",
            "multi30k",
            "--output_dir",
            str(output),
            "--eval_strategy",
            "no",
            "--disable_tqdm",
            "true",
            *extra,
        ]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        lines, signalled, deadline = [], None, time.monotonic() + timeout
        for line in process.stderr:
            lines.append(line)
            if signalled is None and FIRST_STEP.search(line):
                process.send_signal(signal.SIGTERM)
                signalled = time.time()
            if time.monotonic() > deadline:
                process.kill()
                raise SystemExit(f"no exit within {timeout} s:\n{''.join(lines[-20:])}")
        status = process.wait()
        exited = time.time()
        if signalled is None or stopping_signal(status) != "SIGTERM":
            raise SystemExit(
                f"vanilla-train exited with {status} (signal sent: {signalled is not None}):\n{''.join(lines[-30:])}"
            )
        step = int(next(STOPPED.search(line).group(1) for line in lines if STOPPED.search(line)))
        checkpoint = output / f"checkpoint-{step}"
        files = [p for p in checkpoint.rglob("*") if p.is_file()]
        step_done = min(p.stat().st_mtime for p in files)  # the checkpoint's first file: the step had ended
        params = next((line.split("model: ")[1].split(" parameters")[0] for line in lines if "model: " in line), "")
        return {
            "train_command": command,
            "parameters": params,
            "stopped_at_step": step,
            "grace_needed_s": round(exited - signalled, 2),
            "rest_of_step_s": round(step_done - signalled, 2),
            "checkpoint_write_and_exit_s": round(exited - step_done, 2),
            "checkpoint_mib": round(sum(p.stat().st_size for p in files) / 2**20, 1),
            "exit_status": status,
        }


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.preemption",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--json", help="write the record here")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before giving up")
    parser.add_argument("train_args", nargs="*", help="more vanilla-train flags (after --)")
    return parser


def main(argv: list[str] | None = None) -> dict:
    args = arguments().parse_args(argv)
    record = {**provenance(), "measurement": measure(args.train_args, args.timeout)}
    print(json.dumps(record["measurement"], indent=1))
    write_record(record, args.json)
    return record


if __name__ == "__main__":
    main()
