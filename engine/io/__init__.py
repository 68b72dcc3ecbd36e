"""Files in and out: audio files read and written (any format soundfile reads, resampled to 24 kHz mono),
an audio file written chunk by chunk, atomic writes (fsync, then rename) that never lose what was there, the
checks every reader of user data makes first (a regular file of a sane size, .npy headers read before the data), and
the one reader of JSON object files (json_file.py).

It imports only engine.errors, engine.codec_format, the standard library, numpy, soundfile and soxr: nothing of
the engine above it.
"""
