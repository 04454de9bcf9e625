"""tether.integrations: tether's constraints inside other libraries' generation loops.

Code map: ``_common.py`` (an ``output`` → the engine's compiled constraint, through
`tether.program.outputs` and `tether.engine.compile`; vocabularies cached per tokenizer)
→ ``llama_cpp.py`` (a logits processor for ``llama_cpp.Llama``) → ``transformers.py``
(a ``transformers.LogitsProcessor`` for ``model.generate``, batches and beams). Each
module imports its library only when a processor is built; importing this package is
cheap. See ``docs/integrations.md``.
"""
