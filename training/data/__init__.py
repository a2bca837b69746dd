"""The data path: the corpus and its splits, the tokenizer, the training sets and their token batches."""
