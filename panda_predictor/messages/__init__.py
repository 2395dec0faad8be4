"""The ``scout_prediction`` message route: the message, its publisher, its audit.

:mod:`.scout_prediction` is the one definition of the message (a pydantic model; the
JSON Schema file in ``panda_predictor/resources`` is generated from it);
:mod:`.publisher` sends messages to a STOMP destination with receipts;
:mod:`.hook_output` is the submit hook's ``publish`` output; :mod:`.consumer` reads a
destination in batches where JEDI is not running. Not here: JEDI's processor that
applies the messages (plugins/ai_parameter_adjuster) and their SQL (db/messages).
"""
