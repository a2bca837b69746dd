"""Build the model card (README.md) of a trained model directory with huggingface_hub's ModelCard API."""

import json
import re
from importlib.metadata import requires
from pathlib import Path

from huggingface_hub import EvalResult, ModelCard, ModelCardData

from modeling_vanilla.compat import TESTED_RELEASES
from vanilla_tools.corpora import DISPLAY, test_set_name
from vanilla_tools.run_files import EvalResults, TrainingRecipe

TEMPLATE = Path(__file__).resolve().parent / "template.md"
LANGUAGE_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech", "ro": "Romanian"}


def torch_floor() -> str:
    """The oldest torch release the package declares (pyproject's ``torch>=``): ``"2.10"``. In a checkout, its
    pyproject.toml as it stands (the package may run uninstalled, or an editable install's metadata be older);
    otherwise the installed package's metadata."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    if pyproject.is_file():
        requirements = re.findall(r'"(torch>=[^"]+)"', pyproject.read_text())
    else:
        requirements = requires("vanilla-transformer") or []
    return next(r.removeprefix("torch>=") for r in requirements if r.startswith("torch>="))


def build_model_card(model_dir: str | Path, repo_id: str | None = None, license: str = "cc-by-nc-4.0") -> ModelCard:
    """The card of ``model_dir``: metadata (languages, license, datasets, tags, pipeline tag, library, model-index
    with BLEU and chrF), architecture, the recipe actually used, how to load it, limitations and citations."""
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir} has no config.json: not a saved model directory")
    config = json.loads((model_dir / "config.json").read_text())
    results = EvalResults.read(model_dir) or EvalResults()
    recipe = TrainingRecipe.read(model_dir) or TrainingRecipe()  # a model not trained here: the defaults
    source, target, dataset = recipe.source_lang, recipe.target_lang, recipe.dataset
    dataset_id, dataset_name = DISPLAY.get(dataset, (dataset, dataset))
    repo_id = repo_id or model_dir.name

    eval_results, rows = [], []
    split_names = {"validation": "validation", "test": test_set_name(dataset)}
    for split, label in split_names.items():
        metrics = results.split(split)
        if not metrics:
            continue
        rows.append(
            {
                "split": label,
                "bleu": metrics[f"{split}_bleu"],
                "chrf": metrics[f"{split}_chrf"],
                "length_ratio": metrics[f"{split}_length_ratio"],
                "bleu_lc_tok": metrics.get(f"{split}_bleu_lc_tok", "n/a"),
            }
        )
        for metric, name in (("bleu", "sacreBLEU"), ("chrf", "chrF")):
            eval_results.append(
                EvalResult(
                    task_type="translation",
                    task_name=f"Translation {source}-{target}",
                    dataset_type=dataset_id or "custom",
                    dataset_name=f"{dataset_name} {label}",
                    dataset_split=label,
                    dataset_config=f"{source}-{target}",
                    metric_type=metric,
                    metric_name=name,
                    metric_value=metrics[f"{split}_{metric}"],
                )
            )
    card_data = ModelCardData(
        language=[source, target],
        license=license,
        library_name="transformers",
        pipeline_tag="translation",
        tags=["translation", "transformer", "attention-is-all-you-need", "vanilla-transformer", "custom_code"],
        datasets=[dataset_id] if dataset_id else None,
        metrics=["bleu", "chrf"],
        model_name=repo_id,
        eval_results=eval_results or None,
    )
    signatures = [results.split(split).get(f"{split}_signature") for split in split_names]
    signature = next((s for s in signatures if s), "n/a")
    return ModelCard.from_template(
        card_data,
        template_path=str(TEMPLATE),
        model_name=repo_id.split("/")[-1],
        repo_id=repo_id,
        source_name=LANGUAGE_NAMES.get(source, source),
        target_name=LANGUAGE_NAMES.get(target, target),
        dataset_name=dataset_name,
        results=rows,
        signature=signature,
        num_beams=recipe.num_beams,
        length_penalty=recipe.length_penalty,
        encoder_layers=config["encoder_layers"],
        decoder_layers=config["decoder_layers"],
        d_model=config["d_model"],
        heads=config["num_attention_heads"],
        ffn_dim=config["ffn_dim"],
        vocab_size=config["vocab_size"],
        parameters=f"{recipe.parameters:,}" if recipe.parameters is not None else "n/a",
        positions=f"{config['position_embedding_type']} ({config.get('sinusoidal_layout', '')})",
        recipe=recipe.recipe,
        text_form=text_form if isinstance(text_form := config.get("text_form"), dict) else None,
        transformers_releases=" to ".join(TESTED_RELEASES),
        torch_floor=torch_floor(),
    )


def write_model_card(model_dir: str | Path, repo_id: str | None = None, **kwargs) -> Path:
    """Write ``README.md`` (the card) into ``model_dir``."""
    path = Path(model_dir) / "README.md"
    build_model_card(model_dir, repo_id, **kwargs).save(path)
    return path
