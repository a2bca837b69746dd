"""Table 3 on Multi30k (experiments.table3): one resumable command, its records and the page generated from them."""

import json

import yaml
from training_helpers import write_corpus

from experiments import table3

BASE = [1.0, 1.2, 1.1]  # a base row's three seeds: mean 1.1, noise band (their range) 0.2


def test_verdicts_against_the_noise_band_of_the_base_seeds():
    assert table3.verdict(1.5, BASE, paper_delta=+0.3) == "holds"
    assert table3.verdict(0.7, BASE, paper_delta=+0.3) == "opposite"
    assert table3.verdict(1.25, BASE, paper_delta=+0.3) == "within the noise"
    assert table3.verdict(1.5, BASE, paper_delta=0.0) == "paper: no change; here outside the noise"
    assert table3.verdict(1.5, BASE, paper_delta=None) == "n/a"  # a row the paper does not have
    assert table3.verdict(1.5, [1.0], paper_delta=+0.3) == "n/a"  # one seed: no band


def test_every_row_is_a_distinct_vanilla_train_command():
    names = [row.name for row in table3.ROWS]
    assert len(names) == len(set(names)) == 24
    argv = table3.command(table3.ROWS[3], 100, "multi30k", table3.Path("out"), table3.Path("rec"))
    assert argv[:2] == ["--config", "multi30k"] and argv[-6:] == [
        "--num_attention_heads", "1", "--output_dir", "out", "--summary_dir", "rec"]  # fmt: skip
    parsed = table3.parse_args(argv)
    assert parsed[0].num_attention_heads == 1 and parsed[0].final_splits == ["validation"]
    assert parsed[2].max_steps == 100 and parsed[2].save_strategy == "no" and parsed[0].average_last == 0


def test_the_command_trains_records_skips_and_reports(tmp_path):
    """Two rows of a tiny preset end to end: trained, recorded with perplexity and BLEU, skipped on the second call,
    trained again when their settings change; the page lists them beside the paper's rows."""
    corpus = write_corpus(tmp_path / "data", pairs=60)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({
        "base": "demo", "dataset": "files", "train_files": corpus["train"], "validation_files": corpus["validation"],
        "d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "num_attention_heads": 2, "ffn_dim": 64,
        "vocab_size": 300, "max_tokens_per_batch": 256, "warmup_steps": 4, "disable_tqdm": True}))  # fmt: skip
    argv = [
        "--config",
        str(preset),
        "--steps",
        "2",
        "--rows",
        "base-seed1",
        "B-dk-32",
        "--runs",
        str(tmp_path / "runs"),
        "--results",
        str(tmp_path / "results"),
        "--page",
        str(tmp_path / "t.md"),
    ]
    table3.run(argv)
    record = json.loads((tmp_path / "results" / "B-dk-32" / "table3.json").read_text())
    assert record["steps"] == 2 and record["flags"] == ["--head_dim", "32"] and record["validation_ppl"] > 1
    assert record["validation_tokens"] > 20 * 5 and 0 <= record["validation_bleu"] <= 100
    assert record["paper"] == {"change": "d_k = 32", "ppl": 5.01, "bleu": 25.4, "params_m": 60}
    assert record["code"]["commit"] and record["command"].startswith("python -m training.train --config")
    page = (tmp_path / "t.md").read_text()
    assert "2 of 24 rows recorded, 2 steps each" in page and "| (B) B-dk-32 | d_k = 32 |" in page
    stamp = (tmp_path / "results" / "B-dk-32" / "table3.json").stat().st_mtime_ns
    table3.run(argv)  # recorded: skipped
    assert (tmp_path / "results" / "B-dk-32" / "table3.json").stat().st_mtime_ns == stamp
    table3.run([*argv[:3], "3", *argv[4:]])  # other settings: trained again
    assert json.loads((tmp_path / "results" / "B-dk-32" / "table3.json").read_text())["steps"] == 3


def test_the_page_is_the_generators_output():
    """docs/table3.md is never edited by hand: it is what --report makes of results/table3/."""
    assert table3.PAGE.read_text() == table3.report(table3.records(table3.RESULTS))
