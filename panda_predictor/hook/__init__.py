"""The database submit hook: predict the tasks waiting for scouts and write them back.

Here: one pass and its loop (submit), its report, its per-task fault isolation. Not
here: the prediction itself (serving/), the SQL of the write-back (db/), the CLI.
"""
