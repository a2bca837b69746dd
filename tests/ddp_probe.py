"""Run by the distributed tests under torchrun / accelerate launch (or as one plain process).

ddp_probe.py train ARGS...      train, then save this rank's weights (rank{R}-of-{N}.safetensors)
ddp_probe.py evaluate ARGS...   vanilla-train's final evaluation of --model_name_or_path on the validation and
                                test files (evaluation-of-{N}.json, written by rank 0)
ddp_probe.py run ARGS...        vanilla-train's run(ARGS)

Each mode then fails if a gloo thread outlives the process group's end: left to the interpreter's exit, one can
abort a run that succeeded (SIGABRT, "terminate called without an active exception", when it releases a collective's
tensors while Python finalizes).
"""

import gc
import json
import os
import sys
from pathlib import Path

from accelerate import PartialState
from safetensors.torch import save_file

from training.arguments import parse_args
from training.build import build_trainer, resolve_run
from training.step.evaluation import final_evaluation
from training.train import run


def gloo_threads() -> list[str]:
    """The names of this process's threads that gloo started (pt_gloo_runloop, gloo_tcp_loop)."""
    names = (Path(f"/proc/self/task/{task}/comm").read_text().strip() for task in os.listdir("/proc/self/task"))
    return [name for name in names if "gloo" in name]


def probe(mode: str, argv: list[str]) -> None:
    model_args, data_args, training_args = parse_args(argv)
    run = resolve_run(model_args, data_args, training_args)
    trainer, data = build_trainer(model_args, data_args, training_args, run)
    output, ranks = Path(training_args.output_dir), training_args.world_size
    if mode == "train":
        trainer.train()
        model = trainer.accelerator.unwrap_model(trainer.model)
        weights = {name: p.detach().clone() for name, p in model.named_parameters()}  # tied weights once
        save_file(weights, str(output / f"rank{training_args.process_index}-of-{ranks}.safetensors"))
    elif mode == "evaluate":
        results, _ = final_evaluation(trainer, data, trainer.decoding.final, model_args.length_penalty_candidates)
        if trainer.is_world_process_zero():
            (output / f"evaluation-of-{ranks}.json").write_text(json.dumps(results, indent=1))
    else:
        sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    gc.disable()  # an automatic collection could free a trainer left in a reference cycle, by chance
    mode, argv = sys.argv[1], sys.argv[2:]
    if mode == "run":
        run(argv)  # ends the process group itself
    else:
        probe(mode, argv)  # a trainer still held here would keep the process group and its threads alive
        PartialState().destroy_process_group()  # as run() does
    if left := gloo_threads():
        sys.exit(f"gloo threads outlive the process group: {left}")
