"""`vanilla-push DIR REPO_ID [--private] [--revision BRANCH]`: upload a trained model directory to the Hub.

Weights (safetensors), config.json with its auto_map, the model's code files, generation_config.json, tokenizer
files, results and the model card (regenerated for REPO_ID) travel; checkpoints, optimizer states, training
arguments and the exports kept beside the model for serving (``ctranslate2-*/``, ``onnx/``: made again from the
weights where they are needed, and naming this machine's paths) do not. A folder of another kind of model is
refused before anything reaches the Hub. The token comes from ``--token``, ``HF_TOKEN`` or ``hf auth login``; it is
never printed.
"""

import argparse
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from huggingface_hub import CommitInfo, HfApi
from huggingface_hub.errors import HfHubHTTPError, HFValidationError
from huggingface_hub.utils import get_token, validate_repo_id
from transformers import AutoConfig

from modeling_vanilla.export_checks import check_convertible
from vanilla_tools.cli import UsageError, console_script
from vanilla_tools.run_files import FinishedRun

from .card import write_model_card

REQUIRED = ("config.json", "model.safetensors")
IGNORE = [
    "checkpoint-*",
    "checkpoint-*/**",
    "ctranslate2-*/**",
    "onnx/**",
    "*.pt",
    "*.pth",
    "*.bin",
    "runs/**",
    ".*",
    FinishedRun.FILE,
]


@dataclass(frozen=True)
class HubRepo:
    """A model repository on the Hub, with the branch ``revision`` (None: main) and the token to write with (None:
    HF_TOKEN or the stored login; never printed, so kept out of the repr)."""

    repo_id: str
    private: bool = False
    revision: str | None = None
    token: str | None = field(default=None, repr=False)

    def open(self) -> "HubRepo":
        """Check the id and the token, then create the repository (and the branch) unless it exists: the same repo
        as the Hub names it (``NAME`` becomes ``USER/NAME``)."""
        try:
            validate_repo_id(self.repo_id)
        except HFValidationError as error:
            raise UsageError(f"{self.repo_id!r} is not a Hub repository id: {error}") from None
        if not (self.token or get_token()):
            raise UsageError("no Hub token: pass --token, set HF_TOKEN, or log in with `hf auth login`")
        api = HfApi(token=self.token)
        with reaching(api):
            try:
                repo_id = api.create_repo(self.repo_id, private=self.private, exist_ok=True).repo_id
            except HfHubHTTPError as error:
                status = error.response.status_code if error.response is not None else None
                if status not in (401, 403):
                    raise
                raise UsageError(
                    f"the Hub at {api.endpoint} refused to create {self.repo_id} ({status}): the "
                    "token is not valid, or may not write there"
                ) from None
            if self.revision:
                api.create_branch(repo_id, branch=self.revision, exist_ok=True)
        return replace(self, repo_id=repo_id)

    def upload(
        self, model_dir: str | Path, commit_message: str, card: bool = True, only: list[str] | None = None
    ) -> CommitInfo:
        """Upload ``model_dir``'s model files (``only`` these patterns, if given) to the opened repository, with the
        model card written for it first if ``card``."""
        check_model_dir(model_dir)
        if card:
            write_model_card(model_dir, self.repo_id)
        api = HfApi(token=self.token)
        with reaching(api):
            return api.upload_folder(
                repo_id=self.repo_id,
                folder_path=model_dir,
                revision=self.revision,
                commit_message=commit_message,
                allow_patterns=only,
                ignore_patterns=IGNORE,
            )


def push_model_dir(
    model_dir: str | Path,
    repo_id: str,
    private: bool = False,
    revision: str | None = None,
    token: str | None = None,
    commit_message: str = "Upload vanilla Transformer",
) -> CommitInfo:
    """Create the repo if needed (and the branch ``revision``), write the card, upload the directory's model files."""
    check_model_dir(model_dir)  # before the Hub is asked anything
    return HubRepo(repo_id, private, revision, token).open().upload(model_dir, commit_message)


def check_model_dir(model_dir: str | Path) -> None:
    """Refuse a folder that holds no saved model, or a model of another kind (the card is this package's)."""
    model_dir = Path(model_dir)
    missing = [name for name in REQUIRED if not (model_dir / name).is_file()]
    if missing:
        raise FileNotFoundError(f"{model_dir} is not a saved model directory: missing {', '.join(missing)}")
    check_convertible(AutoConfig.from_pretrained(model_dir), model_dir)


@contextmanager
def reaching(api: HfApi):
    """A Hub that cannot be reached, named in one line (the HTTP client's own error is a deep traceback)."""
    try:
        yield
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
