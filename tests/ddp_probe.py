"""Run by the distributed tests under torchrun / accelerate launch (or as one plain process).

ddp_probe.py train ARGS...      train, then save this rank's weights (rank{R}-of-{N}.safetensors)
ddp_probe.py evaluate ARGS...   vanilla-train's final evaluation of --model_name_or_path on the validation and
                                test files (evaluation-of-{N}.json, written by rank 0)
"""

import json
import sys
from pathlib import Path

from safetensors.torch import save_file

from training.arguments import parse_args
from training.evaluation import final_evaluation
from training.train import build_trainer
from vanilla_tools.decoding import Decoding

if __name__ == "__main__":
    mode, argv = sys.argv[1], sys.argv[2:]
    model_args, data_args, training_args = parse_args(argv)
    trainer, data = build_trainer(model_args, data_args, training_args)
    output, ranks = Path(training_args.output_dir), training_args.world_size
    if mode == "train":
        trainer.train()
        model = trainer.accelerator.unwrap_model(trainer.model)
        weights = {name: p.detach().clone() for name, p in model.named_parameters()}  # tied weights once
        save_file(weights, str(output / f"rank{training_args.process_index}-of-{ranks}.safetensors"))
    elif mode == "evaluate":
        decoding = Decoding.resolve(trainer.model.generation_config)
        results = final_evaluation(trainer, data, decoding, model_args.length_penalty_candidates)
        if trainer.is_world_process_zero():
            (output / f"evaluation-of-{ranks}.json").write_text(json.dumps(results, indent=1))
    else:
        sys.exit(f"unknown mode {mode!r}")
    trainer.accelerator.end_training()  # as vanilla-train: no process group left for the interpreter's exit
