"""PEFT on this model, used as PEFT's documentation says: an adapter trained with Seq2SeqTrainer, saved, reloaded
through AutoModelForSeq2SeqLM, and merged. See docs/ecosystem.md#peft."""

import pytest
import torch
from helpers import copy_task_batch, padded_batch, train_copy_model
from transformers import AutoModelForSeq2SeqLM, Seq2SeqTrainer, Seq2SeqTrainingArguments

peft = pytest.importorskip("peft")

# PEFT finds Marian's targets from a table keyed by model_type; a remote-code model is not in it, so they are named.
ADAPTERS = {
    "lora": lambda: peft.LoraConfig(task_type="SEQ_2_SEQ_LM", target_modules="all-linear", r=4),
    "ia3": lambda: peft.IA3Config(
        task_type="SEQ_2_SEQ_LM", target_modules=["in_proj", "fc2"], feedforward_modules=["fc2"]
    ),
}


class CopyPairs(torch.utils.data.Dataset):
    def __init__(self, batches: int = 4):
        src, mask, labels = copy_task_batch(torch.Generator().manual_seed(1), batch=16 * batches)
        rows = zip(src, mask, labels, strict=True)
        self.rows = [{"input_ids": s, "attention_mask": m, "labels": y} for s, m, y in rows]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("base")
    train_copy_model(steps=100).save_pretrained(folder)
    return folder


def logits(model, ids, mask) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits


@pytest.mark.parametrize("kind", sorted(ADAPTERS))
def test_adapter_trains_saves_reloads_and_merges(kind, base_dir, tmp_path):
    model = peft.get_peft_model(AutoModelForSeq2SeqLM.from_pretrained(base_dir), ADAPTERS[kind]())
    frozen = {n: p.clone() for n, p in model.named_parameters() if not p.requires_grad}
    adapter = {n: p.clone() for n, p in model.named_parameters() if p.requires_grad}
    assert 0 < sum(p.numel() for p in adapter.values()) < 0.25 * sum(p.numel() for p in frozen.values())
    in_cross_attention = [n for n in adapter if ".cross_attn.in_proj." in n]
    assert in_cross_attention, "the adapter must reach encoder-decoder attention's projections too"

    args = Seq2SeqTrainingArguments(
        tmp_path / "run",
        max_steps=8,
        per_device_train_batch_size=16,
        learning_rate=0.03,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        seed=0,
    )
    Seq2SeqTrainer(model=model, args=args, train_dataset=CopyPairs()).train()
    model.eval()
    for name, before in frozen.items():  # only the adapter moved
        assert torch.equal(dict(model.named_parameters())[name], before), name
    assert all(not torch.equal(dict(model.named_parameters())[n], before) for n, before in adapter.items())

    ids, mask = padded_batch(seed=3)
    tuned = logits(model, ids, mask)
    assert (tuned - logits(AutoModelForSeq2SeqLM.from_pretrained(base_dir), ids, mask)).abs().max() > 1e-3
    expected_tokens = model.generate(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=10)

    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    assert not (tmp_path / "adapter" / "model.safetensors").exists()  # the adapter alone travels
    reloaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "adapter").eval()  # base named in adapter_config
    torch.testing.assert_close(logits(reloaded, ids, mask), tuned, rtol=0, atol=1e-5)
    tokens = reloaded.generate(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=10)
    assert torch.equal(tokens, expected_tokens)

    merged = model.merge_and_unload()
    assert not any(isinstance(m, peft.tuners.tuners_utils.BaseTunerLayer) for m in merged.modules())
    torch.testing.assert_close(logits(merged, ids, mask), tuned, rtol=0, atol=1e-4)
