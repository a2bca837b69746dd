"""`vanilla-push DIR REPO_ID [--private] [--revision BRANCH]`: upload a trained model directory to the Hub.

Weights (safetensors), config.json with its auto_map, the model's code files, generation_config.json, tokenizer
files, results and the model card (regenerated for REPO_ID) travel; checkpoints, optimizer states, training
arguments and the exports kept beside the model for serving (``ctranslate2-*/``, ``onnx/``: made again from the
weights where they are needed, and naming this machine's paths) do not. A folder of another kind of model is
refused before anything reaches the Hub. The token comes from ``--token``, ``HF_TOKEN`` or ``hf auth login``; it is
never printed.
"""

import argparse
from pathlib import Path

from huggingface_hub import CommitInfo, HfApi
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import get_token, validate_repo_id
from transformers import AutoConfig

from modeling_vanilla.export_checks import check_convertible
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.run_files import FinishedRun

from .card import write_model_card

REQUIRED = ("config.json", "model.safetensors")
IGNORE = ["checkpoint-*", "checkpoint-*/**", "ctranslate2-*/**", "onnx/**", "*.pt", "*.pth", "*.bin", "runs/**", ".*",
          FinishedRun.FILE]  # fmt: skip


def push_model_dir(
    model_dir: str | Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str = "Upload vanilla Transformer",
) -> CommitInfo:
    """Create the repo if needed (and the branch ``revision``), write the card, upload the directory's model files."""
    model_dir = Path(model_dir)
    missing = [name for name in REQUIRED if not (model_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{model_dir} is not a saved model directory: missing {', '.join(missing)}")
    check_convertible(AutoConfig.from_pretrained(model_dir), model_dir)  # the card is this package's
    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise UsageError(f"{repo_id!r} is not a Hub repository id: {error}") from None
    if not (token or get_token()):
        raise UsageError("no Hub token: pass --token, set HF_TOKEN, or log in with `hf auth login`")
    api = HfApi(token=token)
    try:
        repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
        if revision:
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        write_model_card(model_dir, repo_id)
        return api.upload_folder(
            repo_id=repo_id, folder_path=model_dir, revision=revision, commit_message=commit_message,
            ignore_patterns=IGNORE,
        )  # fmt: skip
    except Exception as error:
        if not unreachable(error):
            raise
        raise UsageError(f"could not reach the Hub at {api.endpoint} ({error}): the model was not pushed") from error


def unreachable(error: Exception) -> bool:
    """Whether ``error`` is the HTTP client's failure to reach the server: a TransportError of httpx or httpx2, or
    requests' ConnectionError, by name, since huggingface_hub has used each of these clients across its releases."""
    return any(cls.__name__ in ("TransportError", "ConnectionError") for cls in type(error).__mro__)


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", help="a model directory written by vanilla-train (or save_pretrained)")
    parser.add_argument("repo_id", help="NAME or NAMESPACE/NAME on the Hub")
    parser.add_argument("--private", action="store_true", help="create the repository as private")
    parser.add_argument("--revision", help="branch to push to (created from main if missing)")
    parser.add_argument("--token", help="Hub token (default: HF_TOKEN or the stored login)")
    parser.add_argument("--commit_message", default="Upload vanilla Transformer")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    commit = push_model_dir(args.model_dir, args.repo_id, args.private, args.revision, args.token, args.commit_message)
    print(f"pushed {args.model_dir} -> {commit.commit_url} (commit {commit.oid})")


main = console_script(run)

if __name__ == "__main__":
    main()
