"""The vocabulary of a PanDA task: targets, units, SPLITRULE, resource type, prediction.
PanDA's own rules live here; nothing learned from data (that is features/, decide/)."""
