"""Speech recognition with Whisper on ncnn + numpy: the transcript of a cloning reference.

features.py is the log-mel front end, rules.py what a model's generation config says about greedy decoding,
languages.py the languages Whisper knows, transcriber.py the Transcriber (load once, transcribe recordings of up to
30 s) and its Transcript. The networks are engine/nets/whisper.py; the converter engine/convert/whisper.py.

It imports engine.nets, engine.runtime, engine.io and engine.errors; never synthesis, text, the converter or the
store.
"""
