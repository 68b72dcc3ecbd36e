"""The fixed numbers of the Qwen3-TTS-12Hz speech codec, which every layer of the engine shares: 24 kHz mono audio,
1920 samples per 80 ms frame, 16 codebook ids per frame. Imports nothing, so anything may import it."""

SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920
FRAME_RATE = SAMPLE_RATE / SAMPLES_PER_FRAME  # 12.5 frames per second
NUM_CODE_GROUPS = 16
