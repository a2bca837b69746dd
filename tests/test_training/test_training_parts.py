"""The training recipe's parts: tokenizer (§5.1), data reading, token batches (§5.1), schedule (§5.3), metrics."""

import gzip
import logging
import math
import os
from pathlib import Path

import datasets
import numpy as np
import pytest
import torch
from training_helpers import ENGLISH, GERMAN, train_argv, write_corpus
from transformers import AutoTokenizer, Seq2SeqTrainingArguments, TrainerControl, TrainerState
from transformers.trainer_utils import TrainOutput

from training.arguments import parse_args
from training.build import build_trainer, resolve_run
from training.data.batching import TokenBatchSampler, make_batches, make_exact_batches
from training.data.corpus import DataArguments, load_parallel_data, read_parallel_files, tokenize_splits
from training.data.tokenizer import train_tokenizer
from training.run import stopping
from training.run.checkpoints import checkpoint_write_guard, complete_checkpoints, mark_complete, resolve_checkpoint
from training.run.launches import Launches
from training.run.record import resolved_arguments, run_record, write_recipe
from training.run.run_settings import BATCHES
from training.run.stopping import TimeBudget
from training.schedules import InverseSqrtSchedule, NoamSchedule
from training.step.allocator import keep_freed_memory
from training.step.trainer import launch_metrics
from vanilla_tools.cli import UsageError
from vanilla_tools.metrics import score_translations, tokenized_bleu
from vanilla_tools.run_files import TrainingRecipe
from vanilla_tools.text_form import TextForm


def test_tokenizer_is_shared_and_round_trips(tokenizer, tmp_path):
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.eos_token_id) == (0, 1, 2)
    batch = tokenizer(ENGLISH, text_target=GERMAN)
    assert all(ids[-1] == 2 for ids in batch["input_ids"] + batch["labels"])  # every sequence ends with </s>
    assert tokenizer.batch_decode(batch["labels"], skip_special_tokens=True) == GERMAN  # detokenized, cased
    # punctuation is split from words before BPE ("meadow." is "▁meadow" "."), and decoding joins it back
    assert tokenizer.convert_ids_to_tokens(batch["input_ids"][0])[-3:] == ["▁meadow", ".", "</s>"]
    text = "A dog reads a book. Two men play."
    assert tokenizer.decode(tokenizer(text)["input_ids"], skip_special_tokens=True) == text
    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert loaded(ENGLISH)["input_ids"] == batch["input_ids"]
    assert len(loaded) <= 200


def test_tokenizer_rejects_a_vocabulary_smaller_than_its_specials():
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(ENGLISH, vocab_size=3)


def test_bundled_multi30k_has_its_published_sizes():
    data = load_parallel_data(DataArguments(), TextForm())
    assert {split: len(d) for split, d in data.items()} == {"train": 29000, "validation": 1014, "test": 1000}
    assert data["train"][0] == {
        "source": "Two young, White males are outside near many bushes.",
        "target": "Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
    }


def write(path, lines: list[bytes]):
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return str(path)


def test_bad_lines_are_dropped_as_pairs_and_counted(tmp_path, caplog):
    source = write(tmp_path / "s.en", [b"one", b"", b"three \xff bad", b"four", b"five"])
    target = write(tmp_path / "t.de", [b"eins", b"zwei", b"drei", b"   ", "fünf".encode()])
    pairs, report = read_parallel_files([source, target], DataArguments(cache_dir=str(tmp_path / "cache")))
    assert pairs.to_dict() == {"source": ["one", "five"], "target": ["eins", "fünf"]}  # never misaligned
    assert report.kept == 2 and report.dropped == {"empty": 2, "invalid UTF-8": 1}
    with caplog.at_level(logging.INFO, logger="training.data.corpus"):
        report.log("train", "s.en and t.de")
    assert "kept 2 pairs; dropped: 2 empty, 1 invalid UTF-8" in caplog.text


def test_mismatched_line_counts_stop_before_training(tmp_path):
    source = write(tmp_path / "s.en", [b"a", b"b", b"c"])
    target = write(tmp_path / "t.de", [b"x", b"y"])
    with pytest.raises(ValueError, match="has 3 lines but .* has 2"):
        read_parallel_files([source, target], DataArguments(cache_dir=str(tmp_path / "cache")))


def test_tsv_jsonl_and_gzip(tmp_path):
    args = DataArguments(cache_dir=str(tmp_path / "cache"))

    def read(*paths, target_lang="de"):
        return read_parallel_files(list(paths), DataArguments(cache_dir=args.cache_dir, target_lang=target_lang))[0]

    tsv = write(tmp_path / "d.tsv", [b"hello\thallo", b"bye\ttschuess"])
    assert read(tsv).to_dict() == {"source": ["hello", "bye"], "target": ["hallo", "tschuess"]}
    bad_tsv = write(tmp_path / "bad.tsv", [b"hello\thallo", b"no tab here"])
    with pytest.raises(ValueError, match="bad.tsv:2: expected 2 tab-separated columns"):
        read(bad_tsv)
    jsonl = write(
        tmp_path / "d.jsonl", [b'{"en": "cat", "de": "Katze"}', b'{"translation": {"en": "dog", "de": "Hund"}}']
    )
    assert read(jsonl).to_dict() == {"source": ["cat", "dog"], "target": ["Katze", "Hund"]}
    with pytest.raises(ValueError, match="needs keys 'en' and 'fr'"):
        read(jsonl, target_lang="fr")
    with gzip.open(tmp_path / "s.en.gz", "wb") as f:
        f.write(b"a\nb\n")
    with gzip.open(tmp_path / "t.de.gz", "wb") as f:
        f.write(b"x\ny\n")
    assert read(str(tmp_path / "s.en.gz"), str(tmp_path / "t.de.gz")).to_dict() == {
        "source": ["a", "b"],
        "target": ["x", "y"],
    }


@pytest.mark.slow
def test_several_processes_read_runs_of_lines_in_the_files_order(tmp_path):
    """Large plain files are read by one process per core, each its own run of lines: the rows are those (and in
    the order) one process reads, and an error names its line in the whole file."""
    count = 60_000  # 100-byte lines: enough for the work to be split
    source = write(tmp_path / "s.en", [f"{i:07d} ".encode() + b"x" * 91 for i in range(count)])
    target = write(tmp_path / "t.de", [f"{i:07d} ".encode() + b"y" * 91 if i % 1000 else b"" for i in range(count)])
    split = read_parallel_files([source, target], DataArguments(cache_dir=str(tmp_path / "a")))
    single = read_parallel_files(
        [source, target], DataArguments(cache_dir=str(tmp_path / "b"), preprocessing_num_workers=1)
    )

    def tables(dataset):
        return sum("parallel_text-train" in f["filename"] for f in dataset.cache_files)

    assert tables(split[0]) == 2 and tables(single[0]) == 1  # written by two processes, then by one
    assert split[0]["source"] == single[0]["source"] and split[1] == single[1]
    assert split[1].kept == count - 60 and split[1].dropped == {"empty": 60}
    lines = [f"{i}\t{i}".encode() for i in range(count)]
    lines[55_000] = b"three\tcolumns\there"
    with pytest.raises(ValueError, match=r"d.tsv:55001: expected 2 tab-separated columns, found 3"):
        read_parallel_files([write(tmp_path / "d.tsv", lines)], DataArguments(cache_dir=str(tmp_path / "c")))


def test_a_changed_file_is_read_again_and_an_unchanged_one_from_the_cache(tmp_path):
    """The Arrow cache of a file is keyed by its path, size and modification time."""
    args = DataArguments(cache_dir=str(tmp_path / "cache"))
    source = write(tmp_path / "s.en", [b"one", b"two"])
    target = write(tmp_path / "t.de", [b"eins", b"zwei"])
    first = read_parallel_files([source, target], args)[0]
    again = read_parallel_files([source, target], args)[0]
    assert again.cache_files == first.cache_files
    write(tmp_path / "t.de", [b"eins", b"drei"])
    os.utime(target, ns=(0, Path(target).stat().st_mtime_ns + 10**9))
    assert read_parallel_files([source, target], args)[0]["target"] == ["eins", "drei"]


def test_hub_dataset_offline_fails_clearly(monkeypatch):
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)  # as HF_HUB_OFFLINE=1 at start-up
    with pytest.raises(RuntimeError, match="could not load Hub dataset 'wmt14'.*--dataset multi30k"):
        load_parallel_data(DataArguments(dataset="wmt14", dataset_config="de-en"), TextForm())


def test_tokenization_truncates_keeping_eos_and_counts(tokenizer, tmp_path, caplog):
    long_source = " ".join(ENGLISH * 4)
    source = write(tmp_path / "s.en", [long_source.encode(), b"A dog."])
    target = write(tmp_path / "t.de", [b"Ein Hund.", b"Ein Hund."])
    args = DataArguments(dataset="files", train_files=[source, target], max_source_length=8, cache_dir=str(tmp_path))
    with caplog.at_level(logging.INFO, logger="training.data.corpus"):
        data = tokenize_splits(load_parallel_data(args, TextForm()), tokenizer, args)
    first = data["train"][0]
    assert len(first["input_ids"]) == 8 and first["input_ids"][-1] == tokenizer.eos_token_id
    assert data["train"]["truncated"] == [True, False]
    assert data["train"]["source_length"] == [8, len(tokenizer("A dog.")["input_ids"])]
    assert "2 pairs tokenized, 1 truncated" in caplog.text
    tokenizer.save_pretrained(tmp_path / "tokenizer")  # the same tokenizer, loaded from disk: the same cache
    again = tokenize_splits(
        load_parallel_data(args, TextForm()), AutoTokenizer.from_pretrained(tmp_path / "tokenizer"), args
    )
    assert again["train"].cache_files == data["train"].cache_files


# ---- §5.1 token-count batches ----------------------------------------------------------------------------------
def lengths(n: int, seed: int = 0) -> tuple[list[int], list[int]]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 40, (n,), generator=g).tolist(), torch.randint(3, 45, (n,), generator=g).tolist()


def test_evaluation_during_training_samples_every_length():
    from training.step.evaluation import shortest_first, spread_sample

    sizes = (3, 9, 1, 7, 5, 2, 8, 4, 6, 10)
    validation = shortest_first(datasets.Dataset.from_dict({"source_length": sizes, "target_length": sizes}))
    picked = spread_sample(validation, 4)["source_length"]
    assert picked == [1, 4, 7, 10]  # shortest, two in between, longest
    assert len(spread_sample(validation, 50)) == 10


def as_lists(batches: list) -> list[list[int]]:
    return [batch.tolist() for batch in batches]


def test_batches_respect_the_token_budget_on_both_sides():
    src, tgt = lengths(500)
    batches = make_batches(src, tgt, 300, sorted(range(500), key=lambda i: (src[i], tgt[i])))
    assert sorted(i for b in batches for i in b) == list(range(500))
    for b in batches:
        assert len(b) * max(src[i] for i in b) <= 300 and len(b) * max(tgt[i] for i in b) <= 300


def test_a_short_tail_joins_the_last_batch_so_every_rank_has_pairs():
    # budget 10 cuts [0, 1] | [2, 3] | [4]; with two ranks the lone tail pair would leave rank 1 an empty batch
    assert as_lists(make_batches([5] * 5, [5] * 5, 10, list(range(5)), min_size=2)) == [[0, 1], [2, 3, 4]]
    assert as_lists(make_batches([5] * 5, [5] * 5, 10, list(range(5)))) == [[0, 1], [2, 3], [4]]


@pytest.mark.parametrize("count", [37, 60, 120])
def test_exact_batches_meet_the_count_with_the_smallest_budget(count):
    src, tgt = lengths(500)
    order = sorted(range(500), key=lambda i: (src[i], tgt[i]))
    batches = make_exact_batches(src, tgt, count, order, min_size=2)
    assert len(batches) == count and [i for b in batches for i in b] == order  # contiguous, in length order
    assert min(len(b) for b in batches) >= 2
    budget = max(len(b) * max(max(src[i], tgt[i]) for i in b) for b in batches)
    assert len(make_batches(src, tgt, budget - 1, order, 2)) > count  # no smaller budget needs only `count`


def test_exact_batches_refuse_a_count_the_pairs_cannot_fill():
    with pytest.raises(ValueError, match="3 pairs cannot fill 2 batches of at least 2"):
        make_exact_batches([4, 5, 6], [4, 5, 6], 2, [0, 1, 2], min_size=2)


def reference_batches(src, tgt, max_tokens, seed, min_size=1):
    """The sampler's batches as the list-based planner computed them before it moved to numpy (the Multi30k
    preset's recorded runs used it): the new planner must give the very same batches for the same seed."""
    generator = torch.Generator().manual_seed(seed)
    tie = torch.randperm(len(src), generator=generator).tolist()
    order = sorted(range(len(src)), key=lambda i: (src[i], tgt[i], tie[i]))
    batches, batch, longest_source, longest_target = [], [], 0, 0
    for index in order:
        source, target = max(longest_source, src[index]), max(longest_target, tgt[index])
        if len(batch) >= min_size and (len(batch) + 1) * max(source, target) > max_tokens:
            batches.append(batch)
            batch, source, target = [], src[index], tgt[index]
        batch.append(index)
        longest_source, longest_target = source, target
    if len(batch) < min_size and batches:
        batches[-1].extend(batch)
    elif batch:
        batches.append(batch)
    return [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]


@pytest.mark.parametrize("replicas", [1, 3])
def test_numpy_planner_gives_the_batches_of_the_list_planner(replicas):
    src, tgt = lengths(3000)
    sampler = TokenBatchSampler(src, tgt, 300, num_replicas=replicas, seed=5)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        assert as_lists(sampler.global_batches()) == reference_batches(src, tgt, 300 * replicas, 5 + epoch, replicas)
    assert len(sampler) == len(sampler.global_batches())


@pytest.mark.parametrize("scale", [1, 2**40])  # lengths packed into one int64 key, and too long to pack
def test_length_order_sorts_by_source_then_target_then_tie_break(scale):
    src, tgt = lengths(200)
    src = [s * scale for s in src]
    sampler = TokenBatchSampler(src, tgt, max(src) * 4)
    tie = np.random.default_rng(0).permutation(200)
    assert sampler.length_order(tie).tolist() == sorted(range(200), key=lambda i: (src[i], tgt[i], tie[i]))
    assert sampler.length_order().tolist() == sorted(range(200), key=lambda i: (src[i], tgt[i], i))


def test_sampler_shuffles_per_epoch_with_a_fixed_batch_count():
    src, tgt = lengths(400)
    sampler = TokenBatchSampler(src, tgt, 256, seed=3)
    epoch0 = list(sampler)
    assert len(epoch0) == len(sampler) and sorted(i for b in epoch0 for i in b) == list(range(400))
    sampler.set_epoch(1)
    epoch1 = list(sampler)
    assert len(epoch1) == len(epoch0) and epoch1 != epoch0
    sampler.set_epoch(0)
    assert list(sampler) == epoch0  # a resumed run sees the same batches


def test_length_sorted_batches_carry_little_padding():
    g = torch.Generator().manual_seed(0)
    src = torch.randint(3, 40, (2000,), generator=g)
    tgt = (src * 1.1 + torch.randint(-2, 3, (2000,), generator=g)).clamp(min=2)  # correlated, as translations are
    sampler = TokenBatchSampler(src.tolist(), tgt.tolist(), 1024)
    sides = [sampler.source_lengths.tolist(), sampler.target_lengths.tolist()]
    padded = sum(len(b) * max(side[i] for i in b) for b in sampler.global_batches() for side in sides)
    assert sampler.padding() == pytest.approx(1 - sum(map(sum, sides)) / padded, abs=1e-12)
    assert sampler.padding() < 0.10


def test_ranks_split_each_global_batch():
    src, tgt = lengths(300)
    single = list(TokenBatchSampler(src, tgt, 512, num_replicas=1, seed=1))
    ranks = [list(TokenBatchSampler(src, tgt, 256, num_replicas=2, rank=r, seed=1)) for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(single)
    for whole, part0, part1 in zip(single, *ranks, strict=True):
        assert sorted(part0 + part1) == sorted(whole) and part0 and part1


def test_sampler_rejects_a_budget_below_the_longest_sentence():
    with pytest.raises(ValueError, match="max_tokens_per_batch=10 is smaller than the longest sequence"):
        TokenBatchSampler([5, 12], [4, 6], 10)


# ---- §5.3 schedule and checkpoints ------------------------------------------------------------------------------
def test_noam_schedule_is_the_papers_formula():
    schedule, d_model = NoamSchedule(warmup_steps=4000), 512
    for step in (1, 100, 3999, 4000, 4001, 10_000, 100_000):
        expected = d_model**-0.5 * min(step**-0.5, step * 4000**-1.5)
        assert d_model**-0.5 * schedule(step - 1) == pytest.approx(expected, rel=1e-12)
    peak = max(range(1, 20_000), key=lambda s: schedule(s - 1))
    assert peak == 4000 and d_model**-0.5 * schedule(peak - 1) == pytest.approx(6.99e-4, rel=1e-3)
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=d_model**-0.5)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, NoamSchedule(4000))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(d_model**-0.5 * 4000**-1.5)  # step 1 is not wasted
    state = scheduler.state_dict()
    assert state["lr_lambdas"][0] == {"warmup_steps": 4000}  # saved with checkpoints


def fairseq_inverse_sqrt(num_updates: int) -> float:
    """fairseq's InverseSquareRootSchedule.step_update as it writes it: --lr 0.005, --warmup-updates 2000,
    --warmup-init-lr 1e-7."""
    lr_step = (0.005 - 1e-7) / 2000
    decay_factor = 0.005 * 2000**0.5
    return 1e-7 + num_updates * lr_step if num_updates < 2000 else decay_factor * num_updates**-0.5


def test_inverse_sqrt_is_fairseqs_schedule_with_its_warmup_from_an_initial_rate():
    optimizer = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], lr=0.005)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, InverseSqrtSchedule(2000, 0.005, 1e-7))
    rates = {0: optimizer.param_groups[0]["lr"]}  # the first step's: 1e-7
    for step in range(1, 8001):
        optimizer.step()
        scheduler.step()
        rates[step] = optimizer.param_groups[0]["lr"]
    for step, expected in (
        (0, 1e-7),
        (1, 1e-7 + (0.005 - 1e-7) / 2000),
        (1000, 0.00250005),
        (2000, 0.005),
        (8000, 0.0025),
    ):
        assert rates[step] == pytest.approx(expected, rel=1e-9) == fairseq_inverse_sqrt(step)
    assert max(rates.values()) == rates[2000]
    assert scheduler.state_dict()["lr_lambdas"][0] == {"warmup_steps": 2000, "peak": 0.005, "warmup_init_lr": 1e-7}


def test_resume_ignores_checkpoints_that_were_not_completely_written(tmp_path):
    for step, complete in ((2, True), (4, True), (6, False)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        for name in ("model.safetensors", "optimizer.pt"):
            (tmp_path / f"checkpoint-{step}" / name).write_bytes(b"state")
        if complete:
            mark_complete(tmp_path / f"checkpoint-{step}", step)
    assert [p.name for p in complete_checkpoints(tmp_path)] == ["checkpoint-2", "checkpoint-4"]
    assert resolve_checkpoint("auto", str(tmp_path)).endswith("checkpoint-4")
    assert resolve_checkpoint(None, str(tmp_path)) is None
    with pytest.raises(ValueError, match="checkpoint-6 is not a complete checkpoint"):
        resolve_checkpoint(str(tmp_path / "checkpoint-6"), str(tmp_path))


def test_the_checkpoint_being_completed_is_not_called_unfinished(tmp_path, caplog):
    """A save names the incomplete folders it finds, but not the one it is completing (each save of the multi30k
    run logged "ignoring .../checkpoint-N: it was not completely written" for the checkpoint it then completed)."""
    for step in (2, 4, 6):
        (tmp_path / f"checkpoint-{step}").mkdir()
    mark_complete(tmp_path / "checkpoint-2", 2)
    with caplog.at_level(logging.WARNING), checkpoint_write_guard(tmp_path, tmp_path / "checkpoint-6"):
        pass
    assert caplog.messages == [f"ignoring {tmp_path / 'checkpoint-4'}: it was not completely written"]


# ---- metrics -----------------------------------------------------------------------------------------------------
def test_a_launch_resolves_its_batch_plan_and_settings_once_and_writes_the_accumulation_there(tmp_path):
    """--tokens_per_step decides the accumulation, which the resolution writes into the arguments before anything is
    built. The run a launch resolves (its checkpoints' batch plan, the settings a relaunch compares) holds the decided
    accumulation from the start, and whether --save_on_signal stops it."""
    argv = [
        "--config",
        "multi30k",
        "--output_dir",
        str(tmp_path),
        "--max_tokens_per_batch",
        "1024",
        "--tokens_per_step",
        "4096",
    ]
    model_args, data_args, training_args = parse_args(argv)
    assert training_args.gradient_accumulation_steps == 1  # as parsed
    resolved = resolve_run(model_args, data_args, training_args)
    assert resolved.batch_plan == {
        "tokens_per_batch": 1024,
        "gradient_accumulation_steps": 4,
        "processes": 1,
        "max_tokens_per_batch": 1024,
    }
    assert {key: resolved.settings[key] for key in BATCHES} == {
        "tokens_per_batch": 1024,
        "gradient_accumulation_steps": 4,
    }
    assert resolved.save_on_signal and not resolve_run(*parse_args([*argv, "--save_on_signal", "false"])).save_on_signal
    assert training_args.gradient_accumulation_steps == 4  # written once, where the run is resolved


def test_sacrebleu_scores_and_signature():
    perfect = score_translations(GERMAN, GERMAN)
    assert perfect.bleu == 100.0 and perfect.chrf == 100.0 and perfect.length_ratio == 1.0
    assert perfect.signature.startswith("nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:")
    partial = score_translations(["Ein Hund läuft.", "Zwei Männer.", "Eine Frau liest ein Buch."], GERMAN)
    assert 0 < partial.bleu < 100 and partial.length_ratio < 1.0
    assert score_translations(["ein hund läuft über die wiese."], GERMAN[:1]).bleu < 100  # cased
    with pytest.raises(ValueError, match="2 hypotheses but 3 references"):
        score_translations(GERMAN[:2], GERMAN)
    assert perfect.bleu_lc_tok is None  # no target language, no tokenized score


def test_tokenized_bleu_lowercases_normalizes_and_tokenizes_as_moses():
    # case aside, the hypothesis is the reference without its last token ".": all precisions 1, brevity 6/7
    scores = score_translations(["EIN HUND läuft über die Wiese"], ["Ein Hund läuft über die Wiese."], "de")
    assert scores.bleu_lc_tok == round(100 * math.exp(1 - 7 / 6), 2) == 84.65
    assert scores.bleu == 43.01  # cased: "EIN HUND" matches nothing
    assert scores.lc_tok_signature.startswith("nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:")
    assert scores.lc_tok_signature.endswith("|pre:lc+moses-norm+moses-tok-de")
    # German quotes are normalized to ", and split from the word they enclose, on both sides
    assert tokenized_bleu(["Er sagt „Hallo“ zu ihr."], ['Er sagt "Hallo" zu ihr.'], "de")[0] == 100.0
    assert score_translations(["Er sagt „Hallo“ zu ihr."], ['Er sagt "Hallo" zu ihr.']).bleu < 100


@pytest.mark.parametrize(
    ("strategy", "step_saves_and_evaluates"),
    [("steps", True), ("epoch", False)],  # "epoch": the Trainer's end-of-epoch handling saves and evaluates once
)
def test_time_budget_stops_saves_and_evaluates_once_crossed(monkeypatch, tmp_path, strategy, step_saves_and_evaluates):
    clock = iter([100.0, 100.0 + 59.0, 100.0 + 61.0])  # train begins; one step under a minute; one over
    monkeypatch.setattr(stopping.time, "monotonic", lambda: next(clock))
    args = Seq2SeqTrainingArguments(
        str(tmp_path), eval_strategy=strategy, save_strategy=strategy, use_cpu=True, report_to="none"
    )
    budget, state, control = TimeBudget(minutes=1), TrainerState(), TrainerControl()
    budget.on_train_begin(args, state, control)
    budget.on_step_end(args, state, control)
    assert not (control.should_training_stop or control.should_save or control.should_evaluate)
    budget.on_step_end(args, state, control)
    assert control.should_training_stop
    assert control.should_save == control.should_evaluate == step_saves_and_evaluates
    with pytest.raises(ValueError, match="minutes > 0"):
        TimeBudget(minutes=0)


@pytest.mark.parametrize(("step", "saves"), [(120, True), (123, False), (179, False), (180, True), (230, True)])
def test_time_budget_skips_a_checkpoint_right_after_a_regular_one(monkeypatch, tmp_path, step, saves):
    clock = iter([100.0, 100.0 + 61.0])
    monkeypatch.setattr(stopping.time, "monotonic", lambda: next(clock))
    args = Seq2SeqTrainingArguments(str(tmp_path), save_strategy="steps", use_cpu=True, report_to="none")
    budget, state, control = TimeBudget(minutes=1), TrainerState(global_step=step, save_steps=120), TrainerControl()
    budget.on_train_begin(args, state, control)
    budget.on_step_end(args, state, control)
    assert control.should_training_stop and control.should_save == saves


def test_allocator_settings_apply_on_glibc():
    assert keep_freed_memory()  # the CI machine runs glibc; elsewhere it returns False and changes nothing


# Resumed at step 6, ended at 10 of 20, losses summing to 5.0 over its 4 steps in 2 s, 32 pairs a step: releases
# before 5.19 report 5.0 / 10 and the whole schedule's 20 steps as run, later ones 5.0 / 4 and its own 4
BEFORE_519 = {"train_loss": 0.5, "train_steps_per_second": 10.0, "train_samples_per_second": 320.0}
SINCE_519 = {"train_loss": 1.25, "train_steps_per_second": 2.0, "train_samples_per_second": 64.0}


@pytest.mark.parametrize(
    "release, reported",
    [
        ("5.17.0", BEFORE_519),
        ("5.18.0", BEFORE_519),
        ("5.19.0.dev0", SINCE_519),
        ("5.19.0", SINCE_519),
        ("5.24.0", SINCE_519),
    ],
)
def test_a_launch_reports_its_own_steps_on_every_release(release, reported):
    result = launch_metrics(TrainOutput(10, reported["train_loss"], {**reported, "epoch": 2.0}), 6, 20, release)
    assert (result.training_loss, result.metrics) == (1.25, {**SINCE_519, "epoch": 2.0})


def test_a_launch_from_scratch_stopped_early_reports_the_steps_it_ran():
    """10 of 20 steps (the time budget) in 2 s: before 5.19, 10 steps a second; its loss is the run's mean."""
    stopped = launch_metrics(TrainOutput(10, 0.5, {"train_loss": 0.5, "train_steps_per_second": 10.0}), 0, 20, "5.17.0")
    assert stopped.metrics == {"train_loss": 0.5, "train_steps_per_second": 5.0}
    fresh = TrainOutput(10, 0.5, {"train_loss": 0.5, "train_steps_per_second": 5.0})
    assert launch_metrics(fresh, 0, 10, "5.24.0") == fresh


# ---- precision ---------------------------------------------------------------------------------------------------
def test_every_label_of_the_precision_is_what_the_trainers_accelerator_autocasts(tmp_path, monkeypatch):
    """--bf16 and ACCELERATE_MIXED_PRECISION (unset, accelerate's "no", or bf16 as the package's accelerate configs
    set it) in every combination: each is refused in one line, or the run record, the launch and the training recipe
    (the model card's) name the dtype that the built trainer's accelerator autocasts a matrix product to."""
    monkeypatch.setattr("training.arguments.cpu_bf16", lambda: True)  # bf16 allowed here, whatever this CPU has
    corpus = write_corpus(tmp_path / "data")
    dtypes = {"fp32": torch.float32, "bf16 autocast": torch.bfloat16}
    refused, ran = [], []
    for variable in (None, "no", "bf16"):
        for flag in ("false", "true"):
            if variable is None:
                monkeypatch.delenv("ACCELERATE_MIXED_PRECISION", raising=False)
            else:
                monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", variable)
            output = tmp_path / f"{variable}-{flag}"
            try:
                model_args, data_args, training_args = parse_args(
                    train_argv(corpus, output, "--max_steps", "1", "--bf16", flag)
                )
            except UsageError as refusal:
                assert "--bf16 false" in str(refusal) and f"ACCELERATE_MIXED_PRECISION={variable}" in str(refusal)
                refused.append((variable, flag))
                continue
            resolved = resolve_run(model_args, data_args, training_args)
            trainer, _ = build_trainer(model_args, data_args, training_args, resolved)
            with trainer.accelerator.autocast():
                autocast = torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype
            run = run_record(resolved_arguments(model_args, data_args, training_args, resolved), 1, "cpu")
            write_recipe(output, model_args, data_args, training_args, trainer.model, trainer.decoding.final, resolved)
            recipe = TrainingRecipe.read(output).recipe
            labels = {run["precision"], Launches(resolved).this["precision"], recipe["precision"]}
            assert len(labels) == 1 and dtypes[labels.pop()] == autocast, (variable, flag)
            ran.append((variable, flag, autocast))
    assert refused == [("bf16", "false")]
    fp32, bf16 = torch.float32, torch.bfloat16
    assert ran == [
        (None, "false", fp32),
        (None, "true", bf16),
        ("no", "false", fp32),
        ("no", "true", bf16),
        ("bf16", "true", bf16),
    ]
