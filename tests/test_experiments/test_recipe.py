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


def test_the_band_is_the_prediction_interval_for_one_more_preset_run():
    band = recipe.Band.of([39.0, 40.0, 40.0, 40.0, 41.0, 40.0])
    # mean 40, s = sqrt(2/5), t(0.975, 5) = 2.5706: 40 -+ 2.5706 * 0.63246 * sqrt(7/6) = 40 -+ 1.7561
    assert band.runs == 6 and band.mean == 40.0
    assert abs(band.high - 41.7561) < 1e-3 and abs(band.low - 38.2439) < 1e-3
    assert [band.place(x) for x in (41.75, 41.76, 38.24)] == ["within", "above", "below"]
    assert recipe.Band.of([40.0, 41.0]) is None


def test_the_preset_changes_only_for_the_best_candidate_above_the_band():
    band = recipe.Band.of([40.0, 40.5, 41.0])  # 40.5 -+ 4.303 * 0.5 * sqrt(4/3): 38.02-42.98

    def records(**scores):
        return [{"candidate": name.replace("_", "-"), "validation_bleu": bleu} for name, bleu in scores.items()]

    assert recipe.chosen(records(preset=40.0, a=42.9, b=42.0), band) == "preset"  # within: not told apart
    assert recipe.chosen(records(preset=40.0, a=43.5, b=43.1, c=39.0), band) == "a"
    assert recipe.chosen(records(preset=44.5, a=43.1), band) == "a"  # the preset's own run is not a candidate
    assert recipe.chosen(records(a=50.0), None) == "preset"  # too few preset runs: nothing replaces it


def preset_repeat(results, name: str, bleu: float, role: str = "seed") -> None:
    (results / name).mkdir(parents=True)
    (results / name / "summary.json").write_text(json.dumps({"role": role, "validation": {"bleu": bleu}}))


def test_the_command_trains_records_skips_and_reports(tmp_path):
    """Two candidates on a tiny preset end to end: trained, recorded with their validation BLEU (the summary's),
    steps and code, skipped on the second call; the page lists both, best first, against the band of the preset's
    runs (two repeats with role canonical or seed, an ablation that is not one, and the preset candidate), and the
    figure of their learning curves beside it."""
    for name, bleu, role in (("canonical", 1.0, "canonical"), ("repeat", 2.0, "seed"), ("other", 90.0, "ablation")):
        preset_repeat(tmp_path / "repeats", name, bleu, role)
    corpus = write_corpus(tmp_path / "data", pairs=60)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({
        "base": "demo", "dataset": "files", "train_files": corpus["train"], "validation_files": corpus["validation"],
        "d_model": 32, "encoder_layers": 1, "decoder_layers": 1, "num_attention_heads": 2, "ffn_dim": 64,
        "vocab_size": 300, "max_tokens_per_batch": 256, "warmup_steps": 4, "max_steps": 3,
        "disable_tqdm": True}))  # fmt: skip
    argv = ["--config", str(preset), "--candidates", "preset", "warmup-1200", "--runs", str(tmp_path / "runs"),
            "--results", str(tmp_path / "results"), "--page", str(tmp_path / "recipe.md"),
            "--repeats", str(tmp_path / "repeats")]  # fmt: skip
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
    runs = [1.0, 2.0, records["preset"]["validation_bleu"]]
    band = recipe.Band.of(runs)
    assert recipe.preset_runs(list(records.values()), tmp_path / "repeats") == runs
    assert f"**{band.low:.2f}-{band.high:.2f}**" in "\n".join(page)
    assert f"Chosen so far: **{recipe.chosen(list(records.values()), band)}**." in page
    assert f"![The validation check of every candidate against training minutes]({recipe.CURVES})" in page
    assert (tmp_path / recipe.CURVES).read_bytes().startswith(b"\x89PNG")
    path = tmp_path / "results" / "preset" / recipe.RECORD
    stamp = path.stat().st_mtime_ns
    recipe.run(argv)  # recorded: skipped
    assert path.stat().st_mtime_ns == stamp


def test_the_page_is_generated_from_the_committed_records():
    found = subprocess.run(["git", "-C", str(ROOT), "ls-files", "results/recipe/*/recipe.json"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    records = [json.loads((ROOT / path).read_text()) for path in found]
    assert recipe.PAGE.read_text() == recipe.report(records, recipe.preset_runs(records, recipe.REPEATS))
