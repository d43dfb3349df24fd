"""The routing alarm's two cuts (``stats.routing``, docs/diagnostics.md), in plain Python: the
configuration's help (``trainers.config``, which loads neither NumPy nor torch) states them from
here, their one home."""

from __future__ import annotations

# The runner-up margin (nats: the top source's logit minus the runner-up's) beyond which a
# token's softmax has saturated. The gradient reaching a source's logit is its weight times how
# much reading it would help (d loss / d l_i = p_i (g_i - g_mean)); the runner-up, the one
# source that could take over, holds under e^-10 (4.5e-5) of the top source's weight there,
# and as little of its gradient, so training cannot turn the token back to it. The weakest
# source does not matter: a stale source far below the top says nothing about whether the
# close competitors can still win (Full AttnRes at 48 layers has 97 sources).
SATURATED = 10.0

# A site collapses when more than this share of its tokens are collapsed (top-1 mass above
# train.routing_alarm and runner-up margin above SATURATED, on the same token): a majority of
# its tokens then read one source through a saturated softmax, so the site as a whole no longer
# mixes, while a minority of saturated tokens leaves most of the site trainable.
COLLAPSED_SHARE = 0.5
