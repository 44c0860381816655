"""Judgement and operations: sanction policy, review queue and appeals, the SQLite store, the operator facade."""
