"""Watch what is served: feedback outcomes, drift checks, what-if and HTML reports.

Belongs here: runners that read served decisions and job records and write
``pp_task_outcome``, drift runs and report pages. Not here: training or gating.
"""
