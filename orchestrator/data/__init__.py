"""Package data: the o200k_base BPE ranks (from the MIT-licensed ``bpe-openai`` 0.1.4 wheel,
hash-identical to tiktoken's file), so token counting works offline."""
