"""tether.integrations: tether's constraints inside other libraries' generation loops.

Code map: ``_common.py`` (an ``output`` → the engine's compiled constraint, through
`tether.program.outputs` and `tether.engine.compile`) → ``llama_cpp.py`` (a logits
processor for ``llama_cpp.Llama``) → ``transformers.py`` (a
``transformers.LogitsProcessor`` for ``model.generate``, batches and beams) →
``requests.py`` (per-request constraints of a serving batch, no engine imported) →
``vllm.py`` (vLLM's v1 logits-processor interface). ``transformers.py`` and ``vllm.py``
import their library when imported; this package itself imports nothing heavy. See
``docs/integrations.md``.
"""
