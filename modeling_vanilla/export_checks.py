"""What both converters (CTranslate2, ONNX) check before writing anything, and vanilla-push before reaching the Hub:
that the model is this package's; and that an export goes where it may: never into the folder of the model it
converts nor above it (replacing the folder would delete the model before it is read), and over an existing path only
when asked to replace it. So the partial export a failed write leaves can be removed whole."""

from pathlib import Path

from transformers import PretrainedConfig

from .configuration_vanilla import VanillaTransformerConfig


def check_export_folder(model_dir: str | Path, output_dir: str | Path, force: bool) -> None:
    """Raise ValueError if ``output_dir`` is ``model_dir`` or a folder above it; FileExistsError if it is a file, or
    exists and ``force`` is False."""
    output_dir = Path(output_dir)
    if Path(model_dir).is_dir():
        source = Path(model_dir).resolve()
        if output_dir.resolve() in (source, *source.parents):
            raise ValueError(f"the output folder {output_dir} holds the model {model_dir}: export to another folder")
    if output_dir.exists() and not output_dir.is_dir():
        raise FileExistsError(f"{output_dir} is a file, not a folder: export to a folder")
    if output_dir.exists() and not force:
        raise FileExistsError(f"{output_dir} exists; pass force=True (--force) to replace it")


def check_convertible(config: PretrainedConfig, model_dir: str | Path) -> None:
    """Raise ValueError unless ``config`` (of the model saved in ``model_dir``) is this package's: another model
    loaded as this class would not match its weights (its export would translate nonsense), and its card would not
    describe it."""
    if config.model_type != VanillaTransformerConfig.model_type:
        raise ValueError(
            f"{model_dir} holds a {config.model_type} model, not this package's: a MarianMTModel "
            "converts with from_marian first (docs/hub.md)"
        )
