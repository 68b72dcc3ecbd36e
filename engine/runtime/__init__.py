"""ncnn plumbing that knows no model: the bundle folder (manifest, files, net options) and its writer
(bundle_writer), the .param writer the converter uses and the one .param reader (ncnn_graph), the q8 weight format
it writes, Mats in and out (ncnn_mats), a loaded net run one sequence at a time (sequence_net) or rewritten for
many rows per call (step_graph; the code predictor's rows stacked as attention heads: stacked_graph), the thread governor that backs off when the machine is busy, the CPU facts (cores, OpenMP wait policy, instruction sets), the memory
bandwidth and the weight bytes a graph reads (bandwidth), and the model-free part of self-tuning (tuning:
alternating candidates, the choice, the record kept in the cache folder).

It imports only engine.errors, engine.io and the standard library, numpy, ncnn and platformdirs: never a network (nets/),
text, synthesis, long text, the converter or the store, so any of them may build on it.
"""
