"""Logged bandit data: synthetic (001 Section 3.1) and the Open Bandit Dataset (001 App. A)."""
