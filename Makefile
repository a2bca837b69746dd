# The two commands of the README: `make demo` (the main job) and `make test` (ruff's lint and format check, and the
# fast tests). `make test-slow` runs the long end-to-end tests, those marked slow (transformers' convention: skipped
# unless RUN_SLOW=1; tests/conftest.py), and only them, so that CI, which runs both targets, runs each test once.
# `make compat` runs the model's tests on another transformers (or torch) release, in a side environment: the floor by
# default (CI), `make compat TRANSFORMERS=newest` what a fresh install resolves today (docs/hub.md#compatibility).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The oldest transformers release tested (pyproject's floor, modeling_vanilla/compat.py's TESTED_RELEASES); any other
# release by name (make compat TRANSFORMERS=5.25.0), or `newest`: no pin, the transformers, accelerate and datasets a
# fresh install resolves today, upgraded on each run (a .venv made earlier keeps what was newest then)
TRANSFORMERS ?= 5.17.0
NEWEST := $(filter newest,$(TRANSFORMERS))
# torch goes in first, pinned, so that the package's range is met and pip pulls no other build: the release CI tests,
# or another by name (make compat TRANSFORMERS=5.24.0 TORCH_RELEASE=2.15.0). PyPI's Linux wheel of torch is the CUDA
# build; where no CPU wheel is at hand (this project's machine has one on its disk), the CPU build comes from
# PyTorch's index: make test TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_RELEASE ?= 2.13.0
TORCH_INDEX ?=
TORCH := torch==$(TORCH_RELEASE) $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX))
COMPAT := .venv-transformers-$(TRANSFORMERS)-torch-$(TORCH_RELEASE)
# What a Hub user of the model meets on a release: the model, generate() and its caches, transformers' common tests,
# the pipeline, loading from the Hub with remote code, PEFT, the ONNX and CTranslate2 exports, Trainer training, and
# a run resumed (its train_loss: transformers before 5.19 divides it otherwise), and every private name the code uses
# resolved and called (tests/private_registry.py); slow tests among them, so RUN_SLOW=1
COMPAT_TESTS := tests/test_modeling_vanilla tests/test_training/test_trainer_hooks.py tests/test_hub_card/test_hub.py \
	tests/test_inference/test_onnx.py tests/test_inference/test_ctranslate2.py tests/test_training/test_training_run.py \
	"tests/test_training/test_relaunch.py::test_sigterm_then_the_same_command_resumes_then_has_nothing_to_do"

.PHONY: install demo test test-slow lint compat clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev,ct2,ecosystem,tensorboard]"

install: $(BIN)/python

# The demo decodes test2016 alone at the end: validation's beam decode scores nothing the demo shows (training's
# evaluations still score 300 validation pairs each epoch)
demo: install
	$(BIN)/python -m training.train --config demo --final_splits test

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

test-slow: install
	RUN_SLOW=1 $(BIN)/python -m pytest -m slow

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

$(COMPAT)/bin/python:
	$(PYTHON) -m venv $(COMPAT)
	$(COMPAT)/bin/pip install -q --upgrade pip
	$(COMPAT)/bin/pip install -q $(TORCH)
	$(COMPAT)/bin/pip install -q -e ".[dev,ct2,ecosystem]" $(if $(NEWEST),,"transformers==$(TRANSFORMERS)")

compat: $(COMPAT)/bin/python
	$(if $(NEWEST),$(COMPAT)/bin/pip install -q --upgrade transformers accelerate datasets)
	$(COMPAT)/bin/python -c "import accelerate, datasets, torch, transformers; \
		assert '$(NEWEST)' or transformers.__version__ == '$(TRANSFORMERS)', transformers.__version__; \
		assert torch.__version__.split('+')[0] == '$(TORCH_RELEASE)', torch.__version__; \
		print(*(f'{m.__name__} {m.__version__}' for m in (transformers, accelerate, datasets, torch)), sep=', ')"
	RUN_SLOW=1 $(COMPAT)/bin/python -m pytest $(COMPAT_TESTS)

clean:
	rm -rf $(VENV) $(VENV)-transformers-* *.egg-info .pytest_cache .ruff_cache
