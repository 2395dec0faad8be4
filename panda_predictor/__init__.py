"""panda-predictor: predict a PanDA task's resources at submission, so scouts can go."""

__version__ = "0.1.0"
