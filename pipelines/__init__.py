"""The learning side: programs that read history and write labels, models and runs.

Grouped by role: ``simulation``, ``labels`` and ``export`` produce data; ``training``
fits a bundle; ``retraining`` registers and gates it; ``monitoring`` watches what is
served; ``evaluation`` measures honestly. :mod:`pipelines.registry` maps every
runnable pipeline's name to its runner. Nothing here is imported by serving.
"""
