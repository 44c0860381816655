"""The admin API and web page, served beside the game server on its own event loop.

``view`` turns the core's and the operator's live state into plain JSON-able data and carries out
an administrator's actions (kick, review, appeals, flags); ``explain`` holds the plain-language
sentence for every detection kind; ``auth`` checks the bearer token; ``app`` is the FastAPI
application; ``server`` runs it with uvicorn as a task of the game server's loop. Nothing here
runs inside a tick except the detection subscriber, which only appends to bounded queues.
"""
