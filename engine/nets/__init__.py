"""One module per network of Qwen3-TTS-12Hz, the mirror of engine/convert/: the talker (text and codes to the
first code of each frame), the code predictor (the other 15 codes), the speech tokenizer's decoder (codes to
24 kHz audio) and encoder (reference audio to codes), and the speaker encoder (reference audio to an x-vector).
Each loads its nets from a bundle and runs them; none knows about prompts, sampling or voices. weight_reads
counts the weight bytes one generated frame reads (the memory-bandwidth floor).

It imports engine.runtime, engine.io (audio features), engine.codec_format and engine.errors; never text,
synthesis, long text, the converter or the store.
"""
