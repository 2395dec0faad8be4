"""The job-log replay: strategies re-run under PanDA's retry rules, peers, goals.
What a sizing strategy would have cost; the decisions themselves live in decide/."""
