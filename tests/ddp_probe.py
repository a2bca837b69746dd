"""Run by the distributed tests under torchrun / accelerate launch: train, then save this rank's weights."""

import sys
from pathlib import Path

from safetensors.torch import save_file

from training.train import build_trainer, parse_args

if __name__ == "__main__":
    model_args, data_args, training_args = parse_args(sys.argv[1:])
    trainer, _ = build_trainer(model_args, data_args, training_args)
    trainer.train()
    model = trainer.accelerator.unwrap_model(trainer.model)
    weights = {name: p.detach().clone() for name, p in model.named_parameters()}  # tied weights once
    out = (
        Path(training_args.output_dir) / f"rank{training_args.process_index}-of-{training_args.world_size}.safetensors"
    )
    save_file(weights, str(out))
