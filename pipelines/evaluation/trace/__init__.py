"""Evaluation on real job logs (SWF, HTCondor, Nextflow): walk, score, replay, report.

Belongs here: the job-log data source of the walk forward and what reads its
``full.json``. Not here: the period loop (:mod:`pipelines.evaluation.walk_forward`).
"""
