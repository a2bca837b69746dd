"""A run's launches (training/run/launches.py): the history a checkpoint carries, and a checkpoint without one."""

import json
from types import SimpleNamespace

from transformers import TrainerControl, TrainerState, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME

from training.run.launches import LAUNCHES_FILE, Launches


def test_a_relaunch_extends_the_checkpoints_history_and_a_checkpoint_without_one_is_named_unrecorded(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    run = SimpleNamespace(device="cpu", processes=1, precision="no")  # what Launches reads of the resolved run
    first = Launches(run)
    first.on_train_begin(args, TrainerState(global_step=0), TrainerControl())
    checkpoint = tmp_path / "checkpoint-120"
    checkpoint.mkdir()
    first.write(checkpoint, 120)
    second = Launches(run)
    second.resume(checkpoint)
    second.on_train_begin(args, TrainerState(global_step=120), TrainerControl())
    second.on_train_begin(args, TrainerState(global_step=130), TrainerControl())  # train() again: the same launch
    history = second.history(240, minutes=2.5)
    assert [(launch["first_step"], launch["last_step"]) for launch in history] == [(0, 120), (120, 240)]
    assert history[1]["train_minutes"] == 2.5 and history[0]["train_minutes"] >= 0
    assert history[0]["precision"] == "fp32" and history[0]["device"]["type"] == "cpu" and history[0]["processes"] == 1
    assert history[0]["code"] == history[1]["code"] and "commit" in history[0]["code"]

    # a checkpoint of vanilla-train before launches were recorded: one launch, its start unknown
    old = tmp_path / "checkpoint-60"
    old.mkdir()
    TrainerState(global_step=60).save_to_json(str(old / TRAINER_STATE_NAME))
    resumed = Launches(run)
    resumed.resume(old)
    assert not (old / LAUNCHES_FILE).exists()
    assert resumed.history(60)[0] == {"last_step": 60, "recorded": False}
    assert resumed.history(60)[1]["first_step"] == 60  # nothing left to train: this launch began and ended there
    assert json.loads((checkpoint / LAUNCHES_FILE).read_text())[0]["last_step"] == 120
