"""What the models see: the task's own fields, the history index, the feature pipeline.
Rows in, a feature matrix out; no model and no decision on its output (decide/)."""
