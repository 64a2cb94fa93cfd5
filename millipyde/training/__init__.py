"""Training batches: the Generator and what makes its batches.

``generator`` (``Generator``, its state and per-output path: ``generator_state``,
``generator_callables``), ``batches`` (``Generator.batches``: its workers and conversion,
``batch_convert``), the recorder of a batch (``batch_record``, grouped by coin pattern in
``batch_groups``; draws and rows in ``batch_math`` and ``batch_taps``; mixed sizes over an
arena in ``batch_arena``, ``batch_chain``, ``batch_ops``, ``batch_fill``; targets in
``batch_targets``; MixUp and CutMix in ``batch_mix``; streamed datasets in
``batch_stream``), compiling ahead (``warmup``, ``precompile``, ``precompile_workers``) and the
built-in recipes (``recipes``). ARCHITECTURE.md walks ``Generator.batches(256)`` through them.
"""
