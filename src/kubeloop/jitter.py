"""Randomness for back-off delays and timeouts, from a generator of kubeloop's own.

The module-level ``random`` functions share one generator with the application: drawing from it
in a background task moves the sequence a seeded program relies on, and tools that watch it
(hypothesis) take the draws for their own. ``uniform`` draws from a private ``random.Random``.
"""

from __future__ import annotations

import random

_generator = random.Random()


def uniform(low: float, high: float) -> float:
    """A float in [low, high]."""
    return _generator.uniform(low, high)
