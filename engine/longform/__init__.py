"""Texts longer than one synthesis: the runner that splits a text into chunks, speaks them (one by one or side
by side) and joins them with pauses and fades (joining), the runaway guard that retries a chunk which loops,
runs on or goes silent, and RecordingLength, how long the whole recording will be.

It imports text/ (splitter, length estimate) and the plain data at the engine's root (types, codec_format,
errors); it drives a synthesizer it is handed, so it never imports synthesis/, a network or the runtime.
"""
