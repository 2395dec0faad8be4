"""Adapters that bring predictions to outside systems at submission time.

- :mod:`panda_predictor.plugins.jedi_refiner`: a JEDI TaskRefiner subclass (loaded by
  JEDI through ``modConfig``; imports PanDA's own classes, so import it only there).
- :mod:`panda_predictor.plugins.prediction_client`: how that refiner gets a
  prediction (in-process champion or the HTTP service) and what it writes.
- :mod:`panda_predictor.plugins.htcondor`: HTCondor submit attributes and schedd job
  transforms from a prediction.
"""
