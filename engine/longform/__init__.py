"""Every text a caller asks to speak: SynthesisRequest (request.py), what speaking it yields (events.py), the
runner that splits it once into chunks (a short text is one), speaks them (one by one or side by side: attempts)
and joins them with pauses and fades at the seams (recording, joining), speak_many for several requests in one run
(many), the runaway guard that retries a chunk which loops, runs on or
goes silent, RecordingLength, how long the whole recording will be, run_speech, the one loop over the events
(consuming), and the chunk journal (journal).

It imports text/ (splitter, length estimate) and the plain data at the engine's root (types, voice,
codec_format, errors); it drives a synthesizer it is handed, so it never imports synthesis/, a network or the
runtime.
"""
