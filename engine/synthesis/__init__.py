"""Prompt to frames to audio: sampling (the official logits processing), the model kinds (Base, CustomVoice,
VoiceDesign) and their speakers, the one frame loop (generation: several sequences side by side, one sequence
a batch of one), designed voices, the self-tuner's measurements on the networks (self_tuning), the Synthesizer,
the one door the CLI and the GUI use, and its contract (contract: the Protocol they may rely on), the rules a
request is checked and sized by (planning), its prompt (prompting), its jobs' events and audio (jobs), streaming
decode (streaming) and the consumers of its events (runs).

It imports nets/, text/, runtime/, io/ and the plain data at the engine's root (types, voice, codec_format,
errors); never long text (which builds on it), the converter, the store, the CLI or the GUI.
"""
