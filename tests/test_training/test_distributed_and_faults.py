"""Data-parallel training and evaluation with torchrun and accelerate (2 CPU processes over gloo), and resuming
after SIGKILL at every point of a run that writes and rotates checkpoints."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from helpers import free_port
from safetensors.torch import load_file
from training_helpers import TINY_SHAPE, assert_same_weights, train_argv, write_corpus

pytestmark = pytest.mark.slow

TESTS = Path(__file__).resolve().parents[1]  # where the probes and helpers are
BIN = Path(sys.executable).parent


def run(command: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env, cwd=TESTS.parent)


def launch(launcher: str, processes: int = 2) -> list[str]:
    """The command line that starts ``processes`` CPU processes over gloo (then the script and its arguments)."""
    port = str(free_port())
    if launcher == "torchrun":
        return [str(BIN / "torchrun"), "--nproc_per_node", str(processes), "--master_port", port]
    # on a machine without GPUs, --multi_gpu starts the processes over gloo through torchrun
    return [
        str(BIN / "accelerate"),
        "launch",
        "--multi_gpu",
        "--num_processes",
        str(processes),
        "--main_process_port",
        port,
    ]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return write_corpus(tmp_path_factory.mktemp("data"))


def without_evaluation(corpus) -> dict:
    return {"train": corpus["train"]}


def sgd_argv(corpus, output: Path, tokens_per_device: int, steps: int, saving: tuple[str, ...]) -> list[str]:
    """A run of ``steps`` SGD steps saving as ``saving`` says. SGD: Adam's first steps divide by |gradient|, which
    magnifies rounding differences of near-zero gradients between a 1- and a 2-process sum; SGD keeps the comparison
    about data parallelism itself."""
    return train_argv(
        without_evaluation(corpus),
        output,
        "--max_steps",
        str(steps),
        *saving,
        "--optim",
        "sgd",
        "--bf16",
        "false",
        "--max_tokens_per_batch",
        str(tokens_per_device),
    )


def ddp_argv(corpus, output: Path, tokens_per_device: int) -> list[str]:
    return sgd_argv(corpus, output, tokens_per_device, 5, ("--save_strategy", "no"))


@pytest.fixture(scope="module")
def single_process_weights(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("single")
    result = run([sys.executable, str(TESTS / "ddp_probe.py"), "train", *ddp_argv(corpus, output, 512)])
    assert result.returncode == 0, result.stderr[-3000:]
    return load_file(output / "rank0-of-1.safetensors")


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_processes_equal_one_with_the_same_global_batch(launcher, corpus, single_process_weights, tmp_path):
    result = run([*launch(launcher), str(TESTS / "ddp_probe.py"), "train", *ddp_argv(corpus, tmp_path, 256)])
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [load_file(tmp_path / f"rank{r}-of-2.safetensors") for r in (0, 1)]
    assert ranks[0].keys() == single_process_weights.keys()
    for name, tensor in ranks[0].items():
        assert torch.equal(tensor, ranks[1][name]), name  # DDP keeps the replicas identical
        torch.testing.assert_close(tensor, single_process_weights[name], atol=1e-6, rtol=1e-5, msg=name)
    assert not torch.equal(ranks[0]["model.shared.weight"], torch.zeros_like(ranks[0]["model.shared.weight"]))


def test_a_finished_run_leaves_no_gloo_thread_to_the_interpreters_exit(corpus, tmp_path):
    """run() ends its process group while Python is whole: a gloo thread left running at the interpreter's exit can
    abort a run that succeeded (SIGABRT). The probe fails if one is left."""
    argv = train_argv(without_evaluation(corpus), tmp_path, "--max_steps", "2", "--save_strategy", "no")
    result = run([*launch("torchrun"), str(TESTS / "ddp_probe.py"), "run", *argv])
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads((tmp_path / "eval_results.json").read_text())


@pytest.fixture(scope="module")
def trained_model(corpus, tmp_path_factory):
    """A model trained for 6 steps in one process, with its tokenizer."""
    output = tmp_path_factory.mktemp("model")
    result = run(
        [
            sys.executable,
            "-m",
            "training.train",
            *train_argv(without_evaluation(corpus), output, "--max_steps", "6", "--save_strategy", "no"),
        ]
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return output


def evaluation(command: list[str], corpus, model: Path, output: Path) -> dict:
    # 20 validation and 20 test pairs in batches of 3: the ranks' last batches are uneven and get padded
    argv = train_argv(
        corpus,
        output,
        "--model_name_or_path",
        str(model),
        "--num_beams",
        "2",
        "--per_device_eval_batch_size",
        "3",
        "--translate_examples",
        "0",
    )
    result = run([*command, str(TESTS / "ddp_probe.py"), "evaluate", *argv])
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(next(output.glob("evaluation-of-*.json")).read_text())


@pytest.fixture(scope="module")
def one_process_scores(corpus, trained_model, tmp_path_factory) -> dict:
    return evaluation([sys.executable], corpus, trained_model, tmp_path_factory.mktemp("one"))


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_process_evaluation_scores_what_one_process_scores(
    launcher, corpus, trained_model, one_process_scores, tmp_path
):
    """The final evaluation on 2 processes translates every pair once, in order: the same BLEU, chrF and length
    ratio as one process, on the same model."""
    one = one_process_scores
    two = evaluation(launch(launcher), corpus, trained_model, tmp_path)
    for split in ("validation", "test"):
        for metric in ("bleu", "chrf", "length_ratio"):
            key = f"{split}_{metric}"
            assert two[split][key] == one[split][key], key
    assert one["test"]["test_chrf"] > 0


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_two_process_training_with_evaluation_runs_to_the_end(launcher, corpus, tmp_path):
    """What a user runs: data-parallel vanilla-train with evaluations during training and the final scoring."""
    argv = train_argv(
        corpus,
        tmp_path,
        "--max_steps",
        "4",
        "--eval_strategy",
        "steps",
        "--eval_steps",
        "2",
        "--per_device_eval_batch_size",
        "3",
        "--save_steps",
        "2",
    )
    result = run([*launch(launcher), "-m", "training.train", *argv])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stderr.count("vanilla_train: precision: ") == 1  # the run's story told once, not once a process
    results = json.loads((tmp_path / "eval_results.json").read_text())
    curve = (tmp_path / "learning_curve.csv").read_text().splitlines()
    assert [line.split(",")[1] for line in curve[1:]] == ["2", "4"]
    assert 0 <= results["validation"]["validation_bleu"] <= 100 and 0 < results["test"]["test_chrf"] <= 100


def test_a_launch_that_runs_fewer_processes_than_asked_says_so(corpus, tmp_path):
    argv = train_argv(without_evaluation(corpus), tmp_path, "--max_steps", "1", "--save_strategy", "no")
    result = run([str(BIN / "accelerate"), "launch", "--num_processes", "2", "-m", "training.train", *argv])
    assert result.returncode == 0, result.stderr[-3000:]
    assert "the launcher asked for 2 processes but 1 is running" in result.stderr


def test_a_flag_against_the_accelerate_configs_precision_is_refused_under_accelerate_launch(corpus, tmp_path):
    """The package's DDP config says mixed_precision: bf16; under `accelerate launch` with it (here on one CPU
    process), --bf16 false would have trained in bf16 autocast recorded as fp32: refused before any data is read."""
    ddp = yaml.safe_load((TESTS.parent / "training/configs/accelerate/ddp.yaml").read_text())
    one_cpu = {"distributed_type": "NO", "num_processes": 1, "use_cpu": True, "mixed_precision": ddp["mixed_precision"]}
    config = tmp_path / "cpu.yaml"
    config.write_text(yaml.safe_dump({"compute_environment": "LOCAL_MACHINE", **one_cpu}))
    argv = train_argv(without_evaluation(corpus), tmp_path / "out", "--max_steps", "1", "--bf16", "false")
    result = run([str(BIN / "accelerate"), "launch", "--config_file", str(config), "-m", "training.train", *argv])
    refusal = "error: --bf16 false asks for fp32, but ACCELERATE_MIXED_PRECISION=bf16 (accelerate launch's config's"
    assert result.returncode != 0 and refusal in result.stderr and not (tmp_path / "out").exists()


# ---- faults ------------------------------------------------------------------------------------------------------
def fault_argv(corpus, output: Path) -> list[str]:
    """12 steps, a checkpoint every 3 and only the newest kept (save_total_limit=1): every checkpoint write
    replaces the only complete one."""
    return train_argv(
        without_evaluation(corpus), output, "--max_steps", "12", "--save_steps", "3", "--save_total_limit", "1"
    )


@pytest.fixture(scope="module")
def uninterrupted(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("uninterrupted")
    result = run([str(BIN / "vanilla-train"), *fault_argv(corpus, output)])
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in output.glob("checkpoint-*")) == ["checkpoint-12"]
    return load_file(output / "model.safetensors")


@pytest.mark.parametrize(
    ("point", "step", "resumes_from"),
    [
        ("step", 8, "checkpoint-6"),  # mid-step, between checkpoints
        ("write", 9, "checkpoint-6"),  # model written, optimizer not
        ("marker", 9, "checkpoint-6"),  # every file written, not yet marked complete
        ("rotation", 9, "checkpoint-9"),  # checkpoint-9 complete, checkpoint-6 half deleted
    ],
)
def test_sigkill_then_resume_gives_the_weights_of_an_uninterrupted_run(
    point, step, resumes_from, corpus, uninterrupted, tmp_path
):
    argv = fault_argv(corpus, tmp_path)
    killed = run([sys.executable, str(TESTS / "kill_probe.py"), point, str(step), *argv])
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not (tmp_path / "model.safetensors").exists()
    resumed = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {tmp_path / resumes_from}" in resumed.stderr
    got = load_file(tmp_path / "model.safetensors")
    assert uninterrupted.keys() == got.keys()
    for name in uninterrupted:
        assert torch.equal(uninterrupted[name], got[name]), name
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-12"]  # leftovers rotated away


@pytest.mark.parametrize(
    ("number", "point", "step", "stops_at", "off_schedule"),
    [
        (signal.SIGTERM, "step", 8, 8, True),  # mid-step between checkpoints: the step finishes, then its checkpoint
        (signal.SIGTERM, "write", 6, 7, True),  # while checkpoint-6 is written: it completes; stops after step 7
        (signal.SIGINT, "step", 9, 9, False),  # Ctrl-C on a step that is saved anyway: one checkpoint, on schedule
        (signal.SIGTERM, "evaluation", 4, 4, True),  # the evaluation after step 4 is abandoned
        # evaluated each epoch (the multi30k preset): the epoch's end after the signal's checkpoint evaluates nothing
        # and saves nothing more (it evaluated, the signal stopped that, and the step was checkpointed again: a
        # second marker listing the first, which no relaunch would resume)
        (signal.SIGTERM, "epoch", 8, 8, True),
    ],
    ids=["term-mid-step", "term-while-writing", "int-on-a-save-step", "term-during-evaluation", "term-mid-epoch"],
)
def test_a_signal_saves_a_checkpoint_then_resume_gives_the_uninterrupted_weights(
    number, point, step, stops_at, off_schedule, corpus, uninterrupted, tmp_path
):
    """Preemption (SIGTERM) or Ctrl-C (SIGINT): the step finishes, a complete checkpoint is written, the run exits
    with 128 + the signal's number saying how to go on, and resuming gives the weights of a run never stopped."""
    argv = fault_argv(corpus, tmp_path)
    if point == "evaluation":  # the same run with a validation set, evaluated every 4 steps
        argv = train_argv(
            corpus, tmp_path, *argv[argv.index("--max_steps") :], "--eval_strategy", "steps", "--eval_steps", "4"
        )
    if point == "epoch":  # the same run with a validation set, evaluated at each epoch's end
        argv = train_argv(corpus, tmp_path, *argv[argv.index("--max_steps") :], "--eval_strategy", "epoch")
        point = "step"
    stopped = run([sys.executable, str(TESTS / "signal_probe.py"), number.name, point, str(step), *argv])
    assert stopped.returncode == 128 + number, stopped.stderr[-3000:]
    checkpoint = tmp_path / f"checkpoint-{stops_at}"
    assert f"stopped by {number.name} at step {stops_at}: {checkpoint} is complete" in stopped.stderr
    assert (checkpoint / ".checkpoint-complete").is_file() and not (tmp_path / "model.safetensors").exists()
    assert (checkpoint / "saved-on-signal").is_file() == off_schedule
    resumed = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming from {checkpoint}" in resumed.stderr
    assert_same_weights(uninterrupted, tmp_path)
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-12"]


def checkpointed_argv(corpus, output: Path) -> list[str]:
    return train_argv(without_evaluation(corpus), output, "--max_steps", "6", "--save_steps", "3")


@pytest.fixture(scope="module")
def stopped_run(corpus, tmp_path_factory) -> Path:
    """A run killed after its checkpoint at step 3 (complete, with every file listed in its marker)."""
    output = tmp_path_factory.mktemp("stopped")
    result = run([sys.executable, str(TESTS / "kill_probe.py"), "step", "5", *checkpointed_argv(corpus, output)])
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    return output


@pytest.fixture
def checkpointed_run(corpus, stopped_run, tmp_path):
    """A copy of the stopped run for one test to damage, and the command that resumes it."""
    output = tmp_path / "run"
    shutil.copytree(stopped_run, output)
    return checkpointed_argv(corpus, output), output / "checkpoint-3"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda c: (c / "optimizer.pt").unlink(), r"cannot resume from .*checkpoint-3: optimizer.pt is missing"),
        (
            lambda c: os.truncate(c / "model.safetensors", 100),
            r"cannot resume from .*checkpoint-3: model.safetensors has 100 bytes, \d+ when saved",
        ),
        (lambda c: (c / "scheduler.pt").write_bytes(b""), r"scheduler.pt has 0 bytes, \d+ when saved"),
        (  # as FSDP's SHARDED_STATE_DICT saves it: a folder of shards for the model (which its config refuses now)
            lambda c: ((c / "model.safetensors").unlink(), (c / "pytorch_model_fsdp_0").mkdir()),
            r"cannot resume from .*checkpoint-3: FSDP saved it sharded \(not a FULL_STATE_DICT\), .* "
            r"--overwrite_output_dir starts over$",
        ),
    ],
    ids=["optimizer-missing", "model-truncated", "scheduler-emptied", "sharded-by-fsdp"],
)
def test_resume_refuses_a_damaged_checkpoint_by_name(damage, message, checkpointed_run):
    argv, checkpoint = checkpointed_run
    damage(checkpoint)
    result = run([str(BIN / "vanilla-train"), *argv, "--resume_from_checkpoint", "auto"])
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("vanilla-train: error: ") and re.search(message, last), last


# ---- the paper's WMT14 preset, on 2 machines ------------------------------------------------------------------
def hub_style_dataset(corpus, folder: Path) -> Path:
    """The corpus as a dataset in the Hub's translation format (a `translation` column of {en, de}), which
    --dataset loads from a folder as it would wmt14 from the Hub."""
    folder.mkdir()
    for split in ("train", "validation", "test"):
        source, target = (Path(p).read_text(encoding="utf-8").splitlines() for p in corpus[split])
        rows = [json.dumps({"translation": {"en": s, "de": t}}) for s, t in zip(source, target, strict=True)]
        (folder / f"{split}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def test_the_wmt14_preset_runs_on_two_machines(corpus, tmp_path):
    """--config wmt14 with only the sizes made tiny, its data through the Hub-dataset path, on two "machines" of
    one process each (two `accelerate launch --machine_rank` on this host, over gloo): both end, the step size is
    computed (128 tokens x 2 devices x 2 accumulation = 512), the last checkpoints are averaged and the test set
    scored."""
    data = hub_style_dataset(corpus, tmp_path / "wmt14-like")
    port = str(free_port())
    argv = [
        "-m",
        "training.train",
        "--config",
        "wmt14",
        "--dataset",
        str(data),
        "--dataset_config",
        "",
        "--output_dir",
        str(tmp_path / "out"),
        *TINY_SHAPE,
        "--vocab_size",
        "300",
        "--max_tokens_per_batch",
        "128",
        "--tokens_per_step",
        "512",
        "--max_steps",
        "4",
        "--warmup_steps",
        "2",
        "--save_steps",
        "2",
        "--eval_steps",
        "2",
        "--average_last",
        "2",
        "--per_device_eval_batch_size",
        "8",
        "--max_eval_samples",
        "8",
        "--disable_tqdm",
        "true",
        "--translate_examples",
        "0",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS.parent), str(TESTS)])}

    def machine(rank: int) -> subprocess.Popen:
        launch = [
            str(BIN / "accelerate"),
            "launch",
            "--multi_gpu",
            "--num_machines",
            "2",
            "--num_processes",
            "2",
            "--machine_rank",
            str(rank),
            "--main_process_ip",
            "127.0.0.1",
            "--main_process_port",
            port,
        ]
        return subprocess.Popen(
            [*launch, *argv], cwd=TESTS.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )

    machines = [machine(0), machine(1)]
    outputs = [m.communicate(timeout=600) for m in machines]
    for m, (_, err) in zip(machines, outputs, strict=True):
        assert m.returncode == 0, err[-3000:]
    log = outputs[0][1]
    assert "tokens per step per side: 128 per device x 2 devices x 2 accumulation = 512 (asked: 512)" in log
    results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert results["averaged_checkpoints"] == ["checkpoint-2", "checkpoint-4"]
    assert results["test"]["test_signature"].startswith("nrefs:1|case:mixed") and results["train"]["epoch"] > 0


# ---- two runs at once ---------------------------------------------------------------------------------------------
def test_a_second_run_on_the_same_output_dir_is_refused_and_a_dead_runs_lock_taken_over(corpus, tmp_path):
    """The first run holds its output directory; a second one is refused naming it (PID, host), without touching
    it; once the first is killed (SIGKILL: no cleanup), the next run takes the lock over and says whose it was."""
    import time

    argv = train_argv(without_evaluation(corpus), tmp_path, "--max_steps", "100000", "--save_steps", "1000")
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    first = subprocess.Popen(
        [str(BIN / "vanilla-train"), *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        lock = tmp_path / ".vanilla-train.lock"
        deadline = time.monotonic() + 120
        while not (lock.is_file() and lock.read_text().strip()) and first.poll() is None:
            assert time.monotonic() < deadline, "the first run never took its lock"
            time.sleep(0.2)
        holder = json.loads(lock.read_text())
        assert holder["pid"] == first.pid
        second = run([str(BIN / "vanilla-train"), *argv, "--max_steps", "2"])
        assert second.returncode == 1
        named = rf"\(PID {first.pid} on {re.escape(holder['host'])}, started [0-9: -]+\)"
        assert re.search(rf"error: {re.escape(str(tmp_path))} is in use by another run {named}", second.stderr)
        assert first.poll() is None  # the first run goes on
    finally:
        first.kill()
        first.wait(timeout=60)
    third = run([str(BIN / "vanilla-train"), *argv, "--max_steps", "2"])
    assert third.returncode == 0, third.stderr[-3000:]
    assert f"taking over the lock of PID {first.pid} on {holder['host']}" in third.stderr
    assert lock.read_text() == ""  # released at the end: nobody to name


def test_two_runs_filling_one_data_cache_at_once(corpus, tmp_path):
    """Two runs tokenizing the same corpus into the same (empty) cache at the same time both finish and train on
    the same data (the same weights, seeded alike); a third reads the cache they left and trains the same."""
    cache = tmp_path / "cache"
    commands = [
        [
            str(BIN / "vanilla-train"),
            *train_argv(
                without_evaluation(corpus),
                tmp_path / name,
                "--max_steps",
                "3",
                "--save_strategy",
                "no",
                "--cache_dir",
                str(cache),
            ),
        ]
        for name in ("a", "b", "c")
    ]
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    together = [
        subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, text=True) for c in commands[:2]
    ]
    for process in together:
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 0, stderr[-3000:]
    after = run(commands[2])
    assert after.returncode == 0, after.stderr[-3000:]
    weights = [load_file(tmp_path / name / "model.safetensors") for name in ("a", "b", "c")]
    for name in weights[0]:
        assert torch.equal(weights[0][name], weights[1][name]) and torch.equal(weights[0][name], weights[2][name])


# ---- resuming on another number of processes ----------------------------------------------------------------------
def saving_sgd_argv(corpus, output: Path, tokens_per_device: int, steps: int) -> list[str]:
    return sgd_argv(corpus, output, tokens_per_device, steps, ("--save_steps", "3"))


def train_on(processes: int, argv: list[str]) -> subprocess.CompletedProcess:
    prefix = [sys.executable] if processes == 1 else launch("torchrun", processes)
    return run([*prefix, "-m", "training.train", *argv])


@pytest.fixture(scope="module")
def six_steps_on_one_process(corpus, tmp_path_factory):
    output = tmp_path_factory.mktemp("six")
    assert train_on(1, saving_sgd_argv(corpus, output, 512, 6)).returncode == 0
    return load_file(output / "model.safetensors")


@pytest.mark.parametrize(("first", "then"), [(2, 1), (1, 2)])
def test_resuming_on_another_number_of_processes_keeps_the_batches(
    first, then, corpus, six_steps_on_one_process, tmp_path
):
    """3 steps on ``first`` processes, then 3 more resumed on ``then`` with the same batches (512 tokens a step):
    the weights of 6 uninterrupted steps. Resuming with other batches is refused, naming the flag that keeps them."""
    started = train_on(first, saving_sgd_argv(corpus, tmp_path, 512 // first, 3))
    assert started.returncode == 0, started.stderr[-3000:]
    halved = 256 // then  # batches of 256 tokens instead of 512
    refused = train_on(then, [*saving_sgd_argv(corpus, tmp_path, halved, 6), "--resume_from_checkpoint", "auto"])
    assert refused.returncode != 0
    assert (
        f"{tmp_path / 'checkpoint-3'} was trained in batches of {first} processes x {512 // first} tokens x 1 "
        f"accumulated; this run would take {then} x {halved} x 1"
    ) in refused.stderr
    assert f"pass --max_tokens_per_batch {512 // then} and --gradient_accumulation_steps 1" in refused.stderr
    resumed = train_on(then, [*saving_sgd_argv(corpus, tmp_path, 512 // then, 6), "--resume_from_checkpoint", "auto"])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"resuming a run of {first} processes on {then}: the same batches of 512 tokens" in resumed.stderr
    got = load_file(tmp_path / "model.safetensors")
    for name, tensor in six_steps_on_one_process.items():
        torch.testing.assert_close(got[name], tensor, atol=1e-6, rtol=1e-5, msg=name)
