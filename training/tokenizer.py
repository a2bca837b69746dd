"""§5.1: one subword vocabulary shared by source and target, learned with the tokenizers library.

BPE over Metaspace pre-tokenization (SentencePiece-style "▁" word marks), so decoding gives back detokenized
text, which is what sacreBLEU scores. Punctuation is split from the words before BPE, as the Moses tokenization
of the usual WMT and Multi30k pipelines (and tensor2tensor's subword tokenizer) does: otherwise "Fenster." and
"Fenster" are different words to BPE, the vocabulary fills with word+punctuation merges and rarer words break into
odd pieces. Only "▁" marks a space, so the split costs no reversibility. Wrapped as a PreTrainedTokenizerFast so
``AutoTokenizer`` loads it.
"""

from collections.abc import Iterable

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

PAD, UNK, EOS = "<pad>", "<unk>", "</s>"
SPECIAL_TOKENS = [PAD, UNK, EOS]  # ids 0, 1, 2: the model config's pad/decoder-start (0) and eos (2)


def train_tokenizer(texts: Iterable[str], vocab_size: int, min_frequency: int = 2) -> PreTrainedTokenizerFast:
    """Learn a shared BPE vocabulary of at most ``vocab_size`` tokens from source and target texts together."""
    if vocab_size <= len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must exceed the {len(SPECIAL_TOKENS)} special tokens, got {vocab_size}")
    tokenizer = Tokenizer(models.BPE(unk_token=UNK))
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Metaspace(), pre_tokenizers.Punctuation()])
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIAL_TOKENS, show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    eos_id = tokenizer.token_to_id(EOS)
    # Every sequence, source or target, ends with </s>; the decoder starts from <pad> (Marian's convention).
    tokenizer.post_processor = processors.TemplateProcessing(single=f"$A {EOS}", special_tokens=[(EOS, eos_id)])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token=PAD, unk_token=UNK, eos_token=EOS)
