"""Text before it becomes frames: the tokenizer (Hugging Face `tokenizers`, byte-level BPE as the official
processor builds it), the prompt rows a synthesis starts from, the sentence splitter for long texts, and the
length estimate of a text (how many frames it will take, from the text alone).

It imports engine.runtime (the bundle holding the vocabulary), engine.codec_format and engine.errors; never a
network, synthesis, long text, the converter or the store.
"""
