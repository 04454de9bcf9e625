"""tether.integrations: tether's constraints inside other libraries' generation loops.

Code map: ``_common.py`` (an ``output`` → the engine's compiled constraint, through
`tether.program.outputs` and `tether.engine.compile`) → ``llama_cpp.py`` (a logits
processor for ``llama_cpp.Llama``) → ``transformers.py`` (a
``transformers.LogitsProcessor`` for ``model.generate``, batches and beams) →
``requests.py`` (per-request constraints of a serving batch, no engine imported) →
``vllm.py`` (vLLM's two model runners' logits-processor interfaces) → ``sglang.py``
(SGLang's custom logit processor). ``transformers.py`` imports its library when
imported; ``vllm.py`` builds its classes on first access; ``sglang.py`` falls back to a
stand-in base class without SGLang; this package itself imports nothing heavy. See
``docs/integrations.md``.
"""
