"""Autoregressive decoding: a one-node draft through the shared engine."""

from goose.drafter import Drafter


class ARDrafter(Drafter):
    name = "ar"
