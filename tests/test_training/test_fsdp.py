"""FSDP 2 (training/configs/accelerate/fsdp.yaml): what a run does after its last step works on a sharded model.
The sharding is real (``fully_shard`` over a one-process gloo group, as accelerate wraps each Encoder/DecoderLayer);
a GPU run of the config is in docs/performance.md."""

import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml
from helpers import free_port
from torch.distributed.fsdp import StateDictType

from training.train import check_fsdp_state_dict
from vanilla_tools.cli import UsageError
from vanilla_tools.provenance import ROOT

AVERAGE_INTO_SHARDS = """
import os, sys, torch, torch.distributed as dist
from pathlib import Path
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
sys.path.insert(0, str(Path(sys.argv[2])))
from helpers import tiny_config
from modeling_vanilla import VanillaTransformerForSeq2Seq
from training.average import load_average

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[3])
dist.init_process_group("gloo", rank=0, world_size=1)
folder, saved = Path(sys.argv[1]), []
for seed in (1, 2):
    torch.manual_seed(seed)
    model = VanillaTransformerForSeq2Seq(tiny_config())
    model.save_pretrained(folder / f"checkpoint-{seed}")
    saved.append({name: t.detach().clone() for name, t in model.named_parameters()})
torch.manual_seed(3)
model = VanillaTransformerForSeq2Seq(tiny_config())
mesh = init_device_mesh("cpu", (1,))
for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
load_average(model, [folder / "checkpoint-1", folder / "checkpoint-2"])
for name, parameter in model.named_parameters():
    expected = (saved[0][name].double() + saved[1][name].double()) / 2
    assert torch.equal(parameter.full_tensor(), expected.float()), name
assert model.lm_head.weight is model.model.shared.weight
print("averaged", len(saved[0]), "sharded parameters")
"""


def test_checkpoints_are_averaged_into_a_model_sharded_by_fsdp2(tmp_path):
    """Before, load_state_dict failed on the first DTensor parameter ("got mixed torch.Tensor and DTensor") after
    the whole run had trained: seen on an H200 with the config."""
    done = subprocess.run([sys.executable, "-c", AVERAGE_INTO_SHARDS, str(tmp_path), str(ROOT / "tests"),
                           str(free_port())], capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "averaged" in done.stdout


def fsdp_trainer(state_dict_type: StateDictType):
    plugin = SimpleNamespace(state_dict_type=state_dict_type)
    return SimpleNamespace(is_fsdp_enabled=True, accelerator=SimpleNamespace(state=SimpleNamespace(fsdp_plugin=plugin)))


def test_a_sharded_state_dict_is_refused_before_training():
    """From a sharded state dict Trainer's save_model writes no model: the run would end without one (seen on an
    H200: "/tmp/fsdp has no config.json" after the last step)."""
    with pytest.raises(UsageError, match="FSDP with state dict type SHARDED_STATE_DICT: the run would end without"):
        check_fsdp_state_dict(fsdp_trainer(StateDictType.SHARDED_STATE_DICT))
    check_fsdp_state_dict(fsdp_trainer(StateDictType.FULL_STATE_DICT))
    check_fsdp_state_dict(SimpleNamespace(is_fsdp_enabled=False))


def test_the_fsdp_config_saves_full_state_dicts():
    config = yaml.safe_load((ROOT / "training/configs/accelerate/fsdp.yaml").read_text())
    assert config["fsdp_config"]["fsdp_state_dict_type"] == "FULL_STATE_DICT"
