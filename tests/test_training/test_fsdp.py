"""FSDP (training/configs/accelerate/fsdp.yaml: FSDP 2; FSDP 1 too): what a run does after its last step works on a
sharded model. The sharding is real (FSDP 1's wrapper or FSDP 2's ``fully_shard`` over a two-process gloo group, each
Encoder/DecoderLayer a unit, as accelerate wraps them); a GPU run of the config is in docs/performance.md."""

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

pytestmark = pytest.mark.slow

AVERAGE_INTO_SHARDS = """
import functools, os, sys, torch, torch.distributed as dist
from pathlib import Path
from safetensors.torch import save_file
sys.path.insert(0, sys.argv[2])
from helpers import tiny_config
from modeling_vanilla import VanillaTransformerForSeq2Seq
from modeling_vanilla.modeling_vanilla import DecoderLayer, EncoderLayer
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import FullyShardedDataParallel, fully_shard
from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
from training.average import load_average


def shard(model, version):
    # as accelerate wraps it: each Encoder/DecoderLayer a unit, then the whole model
    if version == 1:  # use_orig_params False, accelerate's default: the inner module holds flat parameters
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={EncoderLayer, DecoderLayer})
        return FullyShardedDataParallel(model, auto_wrap_policy=policy, device_id=torch.device("cpu"))
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def full(model, version):
    if version == 1:
        with FullyShardedDataParallel.summon_full_params(model):
            named = model.named_parameters()
            return {name.replace("_fsdp_wrapped_module.", ""): p.detach().clone() for name, p in named}
    return {name: p.full_tensor() for name, p in model.named_parameters()}


def rank(index, folder, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=index, world_size=2)
    saved = [VanillaTransformerForSeq2Seq.from_pretrained(folder / f"checkpoint-{seed}") for seed in (1, 2)]
    runs = [(version, compiled, "checkpoint") for version, compiled in ((1, False), (2, False), (1, True), (2, True))]
    for version, compiled, name in [*runs, (2, False, "all-names")]:
        torch.manual_seed(3)
        model = shard(VanillaTransformerForSeq2Seq(tiny_config()), version)
        # as a --torch_compile run hands it over: accelerate compiles the model it wrapped (compiled lazily: unrun)
        load_average(torch.compile(model) if compiled else model, [folder / f"{name}-1", folder / f"{name}-2"])
        weights = full(model, version)
        for name, a in saved[0].named_parameters():
            expected = ((a.double() + dict(saved[1].named_parameters())[name].double()) / 2).float()
            assert torch.equal(weights[name], expected), (version, compiled, name)
        if version == 2:  # each rank holds half of each weight, loaded from its part of the average
            local = model.model.shared.weight.to_local()
            assert torch.equal(local, weights["model.shared.weight"].chunk(2)[index]) and local.shape[0] < 61
            assert model.lm_head.weight is model.model.shared.weight
    dist.destroy_process_group()


if __name__ == "__main__":
    folder = Path(sys.argv[1])
    for seed in (1, 2):
        torch.manual_seed(seed)
        model = VanillaTransformerForSeq2Seq(tiny_config())
        model.save_pretrained(folder / f"checkpoint-{seed}")  # the tied weight once, as model.shared.weight
        (folder / f"all-names-{seed}").mkdir()  # as a run under FSDP saves it: under each of its four names
        weights = {name: tensor.clone() for name, tensor in model.state_dict().items()}
        save_file(weights, folder / f"all-names-{seed}" / "model.safetensors", metadata={"format": "pt"})
    torch.multiprocessing.spawn(rank, args=(folder, sys.argv[3]), nprocs=2)
    print("averaged into the shards of 2 ranks: FSDP 1 and 2, each eager and compiled")
"""


def test_checkpoints_are_averaged_into_a_model_sharded_by_fsdp(tmp_path):
    """Two gloo processes, each loading its shards of the mean, with FSDP 1 and 2, each eager and compiled (one pair
    of processes for the four: a pair costs ~15 s of imports and process-group setup), and with FSDP 2 from
    checkpoints holding the tied weight under all four of its names, as a run under FSDP saves them. On lent H200s
    the FSDP config's run failed after the whole run had trained: load_state_dict, then (torch 2.11)
    set_model_state_dict, on a DTensor parameter ("got mixed torch.Tensor and DTensor"), then on the tied weight's
    other names ("unexpected weights in the checkpoints: ['lm_head.weight', ...]"); with FSDP 1 the inner module's
    flat parameters took none of the checkpoints' names, and compiled the wrapper's ``_orig_mod.`` names none."""
    script = tmp_path / "average_into_shards.py"  # a file: spawn's children import __main__ from it
    script.write_text(AVERAGE_INTO_SHARDS)
    done = subprocess.run([sys.executable, str(script), str(tmp_path), str(ROOT / "tests"), str(free_port())],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "averaged into the shards of 2 ranks: FSDP 1 and 2, each eager and compiled" in done.stdout


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
