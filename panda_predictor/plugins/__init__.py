"""Adapters that bring predictions to outside systems at submission time.

- :mod:`panda_predictor.plugins.jedi_refiner`: JEDI TaskRefiners that wrap the
  refiner a VO/label is configured with (loaded by JEDI through ``modConfig``);
  :mod:`panda_predictor.plugins.jedi_prediction` is the prediction they add.
- :mod:`panda_predictor.plugins.prediction_client`: how that refiner gets a
  prediction (in-process champion, or the HTTP service through
  :mod:`panda_predictor.plugins.http_client`) and what it writes.
- :mod:`panda_predictor.plugins.ai_parameter_adjuster`: JEDI's message processor for
  ``scout_prediction`` messages; :mod:`panda_predictor.plugins.task_writers` writes
  what it accepts into the task.
- :mod:`panda_predictor.plugins.htcondor`: HTCondor submit attributes and schedd job
  transforms from a prediction.

Not here: the prediction itself (serving/), the message's format (messages/), the
database hook (hook/).
"""
