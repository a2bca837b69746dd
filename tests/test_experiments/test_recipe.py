"""The Multi30k recipe chosen on validation (experiments.recipe): candidates are the preset with flags changed,
trained, recorded with their validation score, steps and machine, skipped once recorded, and listed on a page."""

import json
import subprocess

import yaml
from training_helpers import write_corpus

from experiments import recipe
from training.arguments import parse_args
from vanilla_tools.provenance import ROOT, generated


def test_every_candidate_is_the_preset_scored_on_validation_only():
    assert recipe.NAMES[0] == "preset" and len(set(recipe.NAMES)) == len(recipe.NAMES)
    for candidate in recipe.CANDIDATES:
        model_args, data_args, training_args = parse_args([*candidate.settings("multi30k"), "--output_dir", "x"])
        assert model_args.final_splits == ["validation"] and model_args.translate_examples == 0
        assert model_args.max_train_minutes == 54  # the preset's budget, for every candidate
    flags = {c.name: dict(zip(c.flags[::2], c.flags[1::2], strict=True)) for c in recipe.CANDIDATES}
    big = flags["dmodel-384-dropout-0.3"]
    assert int(big["--d_model"]) // int(big["--num_attention_heads"]) == 64  # d_k as the preset's
    tiny = flags["tiny-wu2021"]  # its published peak learning rate, 0.005 at the end of warmup (§5.3's formula)
    peak = float(tiny["--lr_scale"]) * (int(tiny["--d_model"]) * int(tiny["--warmup_steps"])) ** -0.5
    assert abs(peak - 0.005) < 1e-5
    assert generated(str(recipe.PAGE.relative_to(ROOT))) and generated(str(recipe.RESULTS.relative_to(ROOT)) + "/x")


def test_the_command_trains_records_skips_and_reports(tmp_path):
    """Two candidates on a tiny preset end to end: trained, recorded with their validation BLEU (the summary's),
    steps and code, skipped on the second call; the page lists both, best first."""
    corpus = write_corpus(tmp_path / "data", pairs=60)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({
        "base": "demo", "dataset": "files", "train_files": corpus["train"], "validation_files": corpus["validation"],
        "d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "num_attention_heads": 2, "ffn_dim": 64,
        "vocab_size": 300, "max_tokens_per_batch": 256, "warmup_steps": 4, "max_steps": 3,
        "disable_tqdm": True}))  # fmt: skip
    argv = ["--config", str(preset), "--candidates", "preset", "warmup-1200", "--runs", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results"), "--page", str(tmp_path / "recipe.md")]  # fmt: skip
    recipe.run(argv)
    records = {r["candidate"]: r for r in recipe.read_records(tmp_path / "results")}
    assert set(records) == {"preset", "warmup-1200"}
    for name, record in records.items():
        summary = json.loads((tmp_path / "results" / name / "summary.json").read_text())
        assert record["validation_bleu"] == summary["validation"]["bleu"] and not summary["test"]
        assert record["steps"] == 3 and record["epochs"] > 0 and record["fp32_gflops_before"] > 0
        assert record["code"]["commit"] and record["machine"]["cpu_cores"] >= 1
    assert records["warmup-1200"]["settings"][-2:] == ["--warmup_steps", "1200"]
    assert "--warmup_steps 1200" in records["warmup-1200"]["command"]
    page = (tmp_path / "recipe.md").read_text().splitlines()
    rows = [line for line in page if line.startswith("| preset |") or line.startswith("| warmup-1200 |")]
    best = max(records.values(), key=lambda r: r["validation_bleu"])["candidate"]
    assert len(rows) == 2 and rows[0].startswith(f"| {best} |")
    path = tmp_path / "results" / "preset" / recipe.RECORD
    stamp = path.stat().st_mtime_ns
    recipe.run(argv)  # recorded: skipped
    assert path.stat().st_mtime_ns == stamp


def test_the_page_is_generated_from_the_committed_records():
    found = subprocess.run(["git", "-C", str(ROOT), "ls-files", "results/recipe/*/recipe.json"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    records = [json.loads((ROOT / path).read_text()) for path in found]
    assert recipe.PAGE.read_text() == recipe.report(records)
