"""What a frozen checkpoint (tests/fixtures/checkpoint-DATE.tar.gz) is checked on: the logits of a padded batch
and the tokens of greedy and beam search, computed the same way when it was made and today."""

import torch

SOURCES = ["Two dogs play in the snow.", "A man reads."]


def outputs(model, tokenizer, sources: list[str]) -> dict[str, torch.Tensor]:
    batch = tokenizer(sources, return_tensors="pt", padding=True)
    start = torch.full_like(batch["input_ids"][:, :1], model.config.decoder_start_token_id)
    decoder_input_ids = torch.cat([start, batch["input_ids"][:, :-1]], dim=1)  # the source shifted: any tokens do
    with torch.no_grad():
        logits = model(**batch, decoder_input_ids=decoder_input_ids).logits
    greedy = model.generate(**batch, num_beams=1, max_new_tokens=8)
    beam = model.generate(**batch, num_beams=3, max_new_tokens=8)
    return {"input_ids": batch["input_ids"], "logits": logits, "greedy": greedy, "beam": beam}
