"""FSDP (training/configs/accelerate/fsdp.yaml: FSDP 2; FSDP 1 too): what a run does after its last step works on a
sharded model. The sharding is real (FSDP 1's wrapper or FSDP 2's ``fully_shard`` over a two-process gloo group, each
Encoder/DecoderLayer a unit, as accelerate wraps them); a GPU run of the config is in docs/performance.md."""

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers import free_port
from torch.distributed.fsdp import StateDictType

from training.build import check_fsdp_state_dict
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
from training.step.average import load_average


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


SAVE_AND_RESUME = """
import os, sys, torch, torch.distributed as dist
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from helpers import tiny_config
from modeling_vanilla import VanillaTransformerForSeq2Seq
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from training.step.ties import hold_ties_once

TIED = ("embed_tokens.weight", "shared.weight", "lm_head.weight")


def say(line):  # one write: the two processes' lines do not interleave
    sys.stdout.write(line + "\\n")
    sys.stdout.flush()


def sharded(seed, hooked):
    torch.manual_seed(seed)
    model = VanillaTransformerForSeq2Seq(tiny_config())
    if hooked:  # as train.py does under FSDP
        hold_ties_once(model)
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    for layer in [*model.model.encoder.layers, *model.model.decoder.layers]:
        fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def rank(index, folder, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=index, world_size=2)
    full = {}
    for hooked in (False, True):  # as accelerate saves a checkpoint: before the hooks, and with them
        model = sharded(1, hooked)
        full[hooked] = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
        saved = sorted(name for name in full[hooked] if name.endswith(TIED))
        say(f"{'hooked' if hooked else 'unhooked'} saves {saved}")
    if index == 0:  # as Trainer saves a checkpoint or the final model under FSDP
        model.save_pretrained(folder / "sharded", state_dict=dict(full[True]))  # (it drops the tied names it holds)
        VanillaTransformerForSeq2Seq(tiny_config()).save_pretrained(folder / "plain")
    # resuming: accelerate's load_fsdp_model, as one process (each its full state dict) and several (rank 0's, sent)
    cases = (("unhooked", False, False, False), ("hooked, all names", True, False, False),
             ("hooked", True, True, False), ("hooked, broadcast", True, True, True))
    for label, hooked, once, broadcast in cases:
        resumed = sharded(2, hooked)
        options = StateDictOptions(full_state_dict=True, cpu_offload=broadcast, broadcast_from_rank0=broadcast)
        try:
            set_model_state_dict(resumed, dict(full[once]) if index == 0 or not broadcast else {}, options=options)
        except RuntimeError as error:
            say(f"{label} failed: {str(error).splitlines()[-1]}")
            continue
        weights = {name: parameter.full_tensor() for name, parameter in resumed.named_parameters()}
        same = all(torch.equal(weights[name], full[False][name]) for name in weights)
        tied = resumed.lm_head.weight is resumed.model.shared.weight
        say(f"{label} loaded rank {index} {'equal' if same else 'DIFFERENT'} {'tied' if tied else 'UNTIED'}")
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.multiprocessing.spawn(rank, args=(Path(sys.argv[1]), sys.argv[3]), nprocs=2)
"""


def two_processes(tmp_path: Path, name: str, source: str) -> subprocess.CompletedProcess:
    """Runs ``source`` as the script ``name`` in tmp_path (a file: spawn's children import __main__ from it), which
    spawns its two gloo processes; asserts it exited 0 and returns what it printed."""
    script = tmp_path / name
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path), str(ROOT / "tests"), str(free_port())],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_a_model_sharded_by_fsdp_2_saves_its_own_code_and_its_checkpoints_resume(tmp_path):
    """On a lent H200 the FSDP config's run saved torch's FSDP modules as the model's code, with auto_map naming
    ``_fsdp_init.FSDPVanillaTransformerForSeq2Seq`` (``fully_shard`` swaps the class), so no checkpoint of the run
    loaded; and resuming failed in torch's ``set_model_state_dict`` on the tied weight's other names ("mixed
    torch.Tensor and DTensor"). Two gloo processes: the sharded model saves what the unsharded one saves, and loads
    from its own code files; with train.py's hooks (training/step/ties.py) a checkpoint holds the tied weight once and
    loads into the shards, as one process and as several, and a checkpoint of all four names as one process."""
    from transformers import AutoModelForSeq2SeqLM

    done = two_processes(tmp_path, "save_and_resume.py", SAVE_AND_RESUME)
    names = [
        "lm_head.weight",
        "model.decoder.embed_tokens.weight",
        "model.encoder.embed_tokens.weight",
        "model.shared.weight",
    ]
    assert f"unhooked saves {names}" in done.stdout and "hooked saves ['model.shared.weight']" in done.stdout
    assert done.stdout.count("unhooked failed: ") == 2 and "mixed torch.Tensor and DTensor" in done.stdout
    for index in (0, 1):
        for label in ("hooked, all names", "hooked", "hooked, broadcast"):
            assert f"{label} loaded rank {index} equal tied" in done.stdout
    sharded, plain = tmp_path / "sharded", tmp_path / "plain"
    assert sorted(path.name for path in sharded.iterdir()) == sorted(path.name for path in plain.iterdir())
    config = json.loads((sharded / "config.json").read_text())
    assert config["auto_map"] == json.loads((plain / "config.json").read_text())["auto_map"]
    assert config["architectures"] == ["VanillaTransformerForSeq2Seq"]
    # (what the plain save's code files load from the Hub is test_hf_contract's)
    assert (
        type(AutoModelForSeq2SeqLM.from_pretrained(sharded, trust_remote_code=True)).__name__
        == config["architectures"][0]
    )


def test_checkpoints_are_averaged_into_a_model_sharded_by_fsdp(tmp_path):
    """Two gloo processes, each loading its shards of the mean, with FSDP 1 and 2, each eager and compiled (one pair
    of processes for the four: a pair costs ~15 s of imports and process-group setup), and with FSDP 2 from
    checkpoints holding the tied weight under all four of its names, as a run under FSDP saves them. On lent H200s
    the FSDP config's run failed after the whole run had trained: load_state_dict, then (torch 2.11)
    set_model_state_dict, on a DTensor parameter ("got mixed torch.Tensor and DTensor"), then on the tied weight's
    other names ("unexpected weights in the checkpoints: ['lm_head.weight', ...]"); with FSDP 1 the inner module's
    flat parameters took none of the checkpoints' names, and compiled the wrapper's ``_orig_mod.`` names none."""
    done = two_processes(tmp_path, "average_into_shards.py", AVERAGE_INTO_SHARDS)
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
