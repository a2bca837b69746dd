"""Push to and load from the Hub through the real huggingface_hub / transformers clients, over HTTP to the test
server in hub_server.py (127.0.0.1, no network); the model card; the token never leaks."""

import json
import math
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import huggingface_hub
import pytest
import torch
from helpers import BLOCK_PACKAGE
from hub_server import HubServer
from huggingface_hub import HfApi, ModelCard, hf_hub_download
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

import modeling_vanilla  # noqa: F401  (registers the model with the Auto classes)
from hub_card import build_model_card
from hub_card import card as card_module
from modeling_vanilla.compat import TESTED_RELEASES

TESTS = Path(__file__).resolve().parents[1]  # where the probes and helpers are
ALICE, BOB = "hf_alice_0123456789abcdefSECRET", "hf_bob_0123456789abcdefSECRET"


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    with HubServer(tmp_path_factory.mktemp("hub"), {ALICE: "alice", BOB: "bob"}) as server:
        yield server


def client_env(hub: HubServer, home: Path, token: str | None, package: bool = True) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(home), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    if token:
        env["HF_TOKEN"] = token
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS.parent), str(TESTS)]) if package else ""
    return env


def run(args: list[str], env: dict, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


def declared_torch_floor() -> str:
    return re.search(r'"torch>=([\d.]+)"', (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())[1]


def test_the_card_takes_the_torch_floor_from_the_checkout_or_the_installed_package(monkeypatch, tmp_path):
    assert card_module.torch_floor() == declared_torch_floor()
    # installed from a wheel: no pyproject.toml beside the package, the metadata of make's fresh install
    monkeypatch.setattr(card_module, "__file__", str(tmp_path / "hub_card" / "card.py"))
    assert card_module.torch_floor() == declared_torch_floor()


def test_model_card_round_trips(trained_run, tmp_path):
    output = tmp_path / "model"
    shutil.copytree(trained_run["output"], output, ignore=shutil.ignore_patterns("checkpoint-*"))
    recipe = json.loads((output / "training_recipe.json").read_text())
    assert recipe["dataset"] == "files" and build_model_card(output).data.datasets is None
    (output / "training_recipe.json").write_text(json.dumps({**recipe, "dataset": "multi30k"}))
    card = build_model_card(output, "alice/m30k-tiny")
    path = output / "card-test.md"
    card.save(path)
    loaded = ModelCard.load(path)
    data = loaded.data
    assert data.language == ["en", "de"] and data.pipeline_tag == "translation"
    assert data.library_name == "transformers" and data.license == "cc-by-nc-4.0" and data.datasets == ["multi30k"]
    results = json.loads((output / "eval_results.json").read_text())
    values = {(r.dataset_split, r.metric_type): r.metric_value for r in data.eval_results}
    assert values == {
        ("validation", "bleu"): results["validation"]["validation_bleu"],
        ("validation", "chrf"): results["validation"]["validation_chrf"],
        ("test2016", "bleu"): results["test"]["test_bleu"],
        ("test2016", "chrf"): results["test"]["test_chrf"],
    }
    text = loaded.text
    test_row = [results["test"][f"test_{key}"] for key in ("bleu", "chrf", "length_ratio", "bleu_lc_tok")]
    assert f"| test2016 | {' | '.join(map(str, test_row))} |" in text
    assert f"{recipe['parameters']:,}" in text and "1 encoder + 1 decoder" in text and "32 / 2 / 64" in text
    assert "Adam(beta1=0.9, beta2=0.999" in text and "| label smoothing | 0.1 |" in text
    assert "trust_remote_code=True" in text and 'revision="<commit sha>"' in text
    oldest, newest = TESTED_RELEASES
    assert f"tested on transformers {oldest} to {newest} and needs torch {declared_torch_floor()} or newer" in " ".join(
        text.split()
    )
    assert "@inproceedings{vaswani2017attention" in text and "@inproceedings{elliott-etal-2016-multi30k" in text
    assert (trained_run["output"] / "README.md").is_file()  # vanilla-train writes the card next to the final model


def test_writes_need_a_valid_token(hub):
    with pytest.raises(HfHubHTTPError) as anonymous:
        HfApi(endpoint=hub.endpoint, token=False).create_repo("nobody/x")
    assert anonymous.value.response.status_code == 401
    with pytest.raises(HfHubHTTPError) as wrong:
        HfApi(endpoint=hub.endpoint, token="hf_not_a_real_token").create_repo("x")
    assert wrong.value.response.status_code == 401
    HfApi(endpoint=hub.endpoint, token=ALICE).create_repo("alice/owned")
    with pytest.raises(HfHubHTTPError) as foreign:
        HfApi(endpoint=hub.endpoint, token=BOB).upload_file(
            path_or_fileobj=b"x", path_in_repo="x.txt", repo_id="alice/owned"
        )
    assert foreign.value.response.status_code in (401, 403, 404)


@pytest.mark.slow
def test_push_then_load_anywhere_with_pinned_revisions(hub, trained_run, tmp_path):
    """vanilla-push, then model/tokenizer.push_to_hub of changed weights; a fresh process without the package loads
    both revisions with trust_remote_code, AutoModel and AutoTokenizer, and translates."""
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["output"], model_dir, ignore=shutil.ignore_patterns("checkpoint-*"))
    for export in ("ctranslate2-int8/model.bin", "ctranslate2-int8/vanilla_source.json", "onnx/encoder.onnx"):
        (model_dir / export).parent.mkdir(exist_ok=True)  # as serving leaves them beside the model
        (model_dir / export).write_text("{}")
    push = run(
        [sys.executable, "-m", "hub_card.push", str(model_dir), "m30k"],
        client_env(hub, tmp_path / "h1", ALICE),
        TESTS.parent,
    )
    assert "alice/m30k" in push.stdout
    api = HfApi(endpoint=hub.endpoint, token=ALICE)
    first = api.model_info("alice/m30k").sha
    files = set(api.list_repo_files("alice/m30k"))
    assert {
        "config.json",
        "model.safetensors",
        "generation_config.json",
        "configuration_vanilla.py",
        "modeling_vanilla.py",
        "pipeline_vanilla.py",
        "tokenizer.json",
        "tokenizer_config.json",
        "README.md",
    } <= files
    assert not any(f.startswith(("checkpoint-", "ctranslate2-", "onnx/")) or f.endswith((".bin", ".pt")) for f in files)
    assert (
        model_dir / "run_finished.json"
    ).is_file() and "run_finished.json" not in files  # the run's, not the model's
    config = json.loads(
        Path(hf_hub_download("alice/m30k", "config.json", endpoint=hub.endpoint, cache_dir=tmp_path / "c")).read_text()
    )
    assert config["auto_map"]["AutoModelForSeq2SeqLM"] == "modeling_vanilla.VanillaTransformerForSeq2Seq"

    # a second version through the standard Python API: model.push_to_hub / tokenizer.push_to_hub
    second_version = textwrap.dedent(f"""
        import torch
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        import modeling_vanilla
        model = AutoModelForSeq2SeqLM.from_pretrained("alice/m30k")  # the package is installed: no remote code
        with torch.no_grad():
            model.model.shared.weight.mul_(1.5)
        model.push_to_hub("alice/m30k", commit_message="scale embeddings")
        AutoTokenizer.from_pretrained("alice/m30k").push_to_hub("alice/m30k")
        model.save_pretrained({str(tmp_path / "v2")!r})
    """)
    run([sys.executable, "-c", second_version], client_env(hub, tmp_path / "h2", ALICE), tmp_path)
    second = api.model_info("alice/m30k").sha
    assert second != first

    load = BLOCK_PACKAGE + textwrap.dedent(f"""
        import json, torch
        from transformers import (AutoModel, AutoModelForSeq2SeqLM, AutoTokenizer, DataCollatorForSeq2Seq,
                                  Seq2SeqTrainer, Seq2SeqTrainingArguments, pipeline)
        try:
            import modeling_vanilla
            raise SystemExit("modeling_vanilla must not be importable here")
        except ModuleNotFoundError:
            pass
        tokenizer = AutoTokenizer.from_pretrained("alice/m30k", trust_remote_code=True)
        batch = tokenizer(["Two dogs play in the snow."], return_tensors="pt")
        out = {{}}
        for name, revision in (("latest", None), ("first", {first!r})):
            model = AutoModelForSeq2SeqLM.from_pretrained("alice/m30k", trust_remote_code=True, revision=revision)
            assert type(model).__module__.startswith("transformers_modules"), type(model).__module__
            out[name] = model.model.shared.weight[:5, :5].tolist()
        base = AutoModel.from_pretrained("alice/m30k", trust_remote_code=True)
        out["base"] = type(base).__name__
        generated = model.generate(**batch, max_new_tokens=8, num_beams=1)
        out["generated"] = generated.tolist()
        out["translation"] = tokenizer.batch_decode(generated, skip_special_tokens=True)[0]
        # transformers 5 removed its "translation" task; the checkpoint's own pipeline (pipeline_vanilla.py) answers
        translator = pipeline("translation", model="alice/m30k", trust_remote_code=True)
        out["pipeline"] = translator("Two dogs play in the snow.", max_new_tokens=8, num_beams=1)
        # fine-tuning as a Trainer script does it: one Seq2SeqTrainer step on two pairs
        pairs = tokenizer(["A dog runs.", "Two men talk."], text_target=["Ein Hund rennt.", "Zwei Männer reden."])
        features = [{{key: pairs[key][i] for key in ("input_ids", "attention_mask", "labels")}} for i in range(2)]
        before = model.model.shared.weight.detach().clone()
        arguments = Seq2SeqTrainingArguments({str(tmp_path / "finetune")!r}, max_steps=1, per_device_train_batch_size=2,
                                             learning_rate=1e-3, report_to=[], save_strategy="no", use_cpu=True)
        trainer = Seq2SeqTrainer(model=model.train(), args=arguments, train_dataset=features,
                                 data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
        out["fine_tuning_loss"] = trainer.train().training_loss
        out["weights_moved"] = not torch.equal(model.model.shared.weight.detach(), before)
        print("RESULT", json.dumps(out))
    """)
    result = run([sys.executable, "-c", load], client_env(hub, tmp_path / "h3", None, package=False), tmp_path)
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, result.stdout[-3000:] + result.stderr[-3000:]
    out = json.loads(lines[0][7:])
    v1 = load_file(model_dir / "model.safetensors")["model.shared.weight"][:5, :5]
    v2 = load_file(tmp_path / "v2" / "model.safetensors")["model.shared.weight"][:5, :5]
    torch.testing.assert_close(torch.tensor(out["first"]), v1)
    torch.testing.assert_close(torch.tensor(out["latest"]), v2)
    assert out["base"] == "VanillaTransformerModel" and isinstance(out["translation"], str)
    # the remote code decodes the tokens this package decodes, and its pipeline gives them as text
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    here = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "v2")
    batch = tokenizer(["Two dogs play in the snow."], return_tensors="pt")
    assert out["generated"] == here.generate(**batch, max_new_tokens=8, num_beams=1).tolist()
    assert out["pipeline"] == [{"translation_text": out["translation"].strip()}]
    assert math.isfinite(out["fine_tuning_loss"]) and out["fine_tuning_loss"] > 0 and out["weights_moved"]
    # the tokenizer, loaded as the card says, neither prompts for remote code nor warns about the model type
    assert "Do you wish to run the custom code" not in result.stderr
    assert "instantiate a model of type" not in result.stderr


def test_private_repos_and_branches(hub, trained_run, tmp_path):
    model_dir = tmp_path / "model"
    shutil.copytree(trained_run["output"], model_dir, ignore=shutil.ignore_patterns("checkpoint-*"))
    env = client_env(hub, tmp_path / "h", ALICE)
    run(
        [sys.executable, "-m", "hub_card.push", str(model_dir), "alice/secret", "--private", "--revision", "exp"],
        env,
        TESTS.parent,
    )
    alice = HfApi(endpoint=hub.endpoint, token=ALICE)
    assert alice.model_info("alice/secret").private
    assert "model.safetensors" in alice.list_repo_files("alice/secret", revision="exp")
    assert "model.safetensors" not in alice.list_repo_files("alice/secret")  # main holds only the initial commit
    for token in (False, BOB):
        with pytest.raises(RepositoryNotFoundError):
            HfApi(endpoint=hub.endpoint, token=token).model_info("alice/secret")
        with pytest.raises(RepositoryNotFoundError):
            hf_hub_download(
                "alice/secret",
                "config.json",
                revision="exp",
                endpoint=hub.endpoint,
                token=token,
                cache_dir=tmp_path / "c",
            )
    path = hf_hub_download(
        "alice/secret", "config.json", revision="exp", endpoint=hub.endpoint, token=ALICE, cache_dir=tmp_path / "c"
    )
    assert json.loads(Path(path).read_text())["model_type"] == "vanilla_transformer"


def test_train_refuses_a_hub_push_it_cannot_make_before_training(hub, tmp_path, monkeypatch):
    """A wrong token, and --hub_strategy checkpoint (the state to resume from, training_args.bin among it), are
    refused with one line (a user's error) before the first step, not after the run."""
    from training_helpers import train_argv, write_corpus

    from training.train import run as train
    from vanilla_tools.cli import user_error

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.endpoint)
    corpus = write_corpus(tmp_path / "data", pairs=20)
    for token, extra, error in (
        ("hf_wrong_token", (), r"the Hub at http://127.0.0.1:\d+ refused to create alice/refused \(401\): the token"),
        (
            ALICE,
            ("--hub_strategy", "checkpoint"),
            "--hub_strategy checkpoint: vanilla-train pushes models, not the state to resume from",
        ),
    ):
        monkeypatch.setenv("HF_TOKEN", token)
        output = tmp_path / f"out-{len(extra)}"
        argv = train_argv(
            corpus, output, "--max_steps", "2", "--push_to_hub", "true", "--hub_model_id", "alice/refused", *extra
        )
        with pytest.raises(Exception, match=error) as refused:
            train(argv)
        assert user_error(refused.value) and token not in str(refused.value)
        assert not (output / "tokenizer.json").exists() and not list(output.glob("checkpoint-*"))


def test_a_checkpoint_the_hub_cannot_take_is_named_and_training_goes_on(hub, trained_run, monkeypatch, caplog):
    """A push of a checkpoint during training that fails (here the Hub gone) is a warning naming it; the run trains on
    and its final push tries again."""
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from training.run.checkpoints import complete_checkpoints
    from training.run.hub_push import HubPush

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_TOKEN", ALICE)
    args = TrainingArguments(
        output_dir=str(trained_run["output"]), push_to_hub=True, hub_model_id="alice/mid-run", report_to="none"
    )
    push = HubPush(args)  # the repository is made before training
    assert HfApi(endpoint=hub.endpoint, token=ALICE).model_info("alice/mid-run").id == "alice/mid-run"
    assert HubPush.trainer_args(args).push_to_hub is False and args.push_to_hub is True
    newest = complete_checkpoints(trained_run["output"])[-1]
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    state = TrainerState(global_step=int(newest.name.split("-")[1]), is_world_process_zero=True)
    push.on_save(args, state, TrainerControl())
    assert f"could not push {newest.name} to the Hub (could not reach the Hub at http://127.0.0.1:9" in caplog.text


@pytest.mark.slow
def test_train_pushes_and_the_token_never_leaks(hub, tmp_path):
    """vanilla-train --push_to_hub (--hub_strategy every_save, Trainer's default): each checkpoint's model and
    tokenizer, then the final model with its card, reach the Hub, and no commit holds the run's own files (Trainer's
    upload sent its lock and training_args.bin with every checkpoint); the token is in no log,
    exception, card or file written on the client side."""
    from training_helpers import train_argv, write_corpus

    corpus = write_corpus(tmp_path / "data", pairs=60)
    output = tmp_path / "out"
    argv = train_argv(
        corpus,
        output,
        "--max_steps",
        "2",
        "--save_strategy",
        "steps",
        "--save_steps",
        "1",
        "--eval_strategy",
        "no",
        "--num_beams",
        "1",
        "--average_last",
        "2",
        "--push_to_hub",
        "true",
        "--hub_model_id",
        "alice/trained",
    )
    home = tmp_path / "home"
    result = run([sys.executable, "-m", "training.train", *argv], client_env(hub, home, ALICE), TESTS.parent)
    history = hub.history("alice/trained")
    assert [message for message, _ in history] == [
        "initial commit",
        "Training in progress, step 1",
        "Training in progress, step 2",
        "vanilla-train: final model, tokenizer, results and card",
    ]
    model = {"model.safetensors", "config.json", "generation_config.json", "tokenizer.json", "modeling_vanilla.py"}
    assert model <= history[1][1] and "README.md" not in history[1][1]  # a checkpoint: its model, no card yet
    final = history[-1][1]
    assert model | {"README.md", "eval_results.json", "training_recipe.json"} <= final
    assert (output / "training_args.bin").is_file() and (output / ".vanilla-train.lock").is_file()
    assert (output / "checkpoint-2" / "optimizer.pt").is_file() and (output / "checkpoint-2" / "trainer_state.json")
    for _, files in history:  # vanilla-push's files, never the run's
        run_files = {
            "training_args.bin",
            ".vanilla-train.lock",
            "optimizer.pt",
            "trainer_state.json",
            "learning_curve.csv",
            "batch_plan.json",
            "launches.json",
        }
        assert not run_files & {Path(name).name for name in files}, files
    card = ModelCard.load(
        hf_hub_download("alice/trained", "README.md", endpoint=hub.endpoint, token=ALICE, cache_dir=tmp_path / "c")
    )
    assert card.data.pipeline_tag == "translation" and "alice/trained" in card.text

    secret = ALICE.encode()
    assert secret not in (result.stdout + result.stderr).encode()
    for folder in (output, home, tmp_path / "c"):
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret not in path.read_bytes(), f"token written to {path}"
