"""panda-predictor: predict a PanDA task's resources at submission so it can skip scouts."""

__version__ = "0.1.0"
